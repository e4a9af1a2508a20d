//! Reading and writing named tensors as safetensors (loadable with PyTorch's
//! `safetensors.torch.load_file`). Writes are atomic ([`super::atomic::write_atomic`]).

use anyhow::{Context, bail};
use burn::tensor::{DType, TensorData};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::atomic::write_atomic;

/// Named tensors plus the file's string metadata.
pub struct TensorFile {
    pub tensors: BTreeMap<String, TensorData>,
    pub metadata: BTreeMap<String, String>,
}

/// Reads every tensor (f32, f64, i64, i32; bf16 and f16 widened to f32) of a safetensors file.
pub fn read(path: &Path) -> anyhow::Result<TensorFile> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&bytes, &path.display().to_string())
}

/// Every tensor of safetensors `bytes`; `name` is for messages.
pub fn parse(bytes: &[u8], name: &str) -> anyhow::Result<TensorFile> {
    // The library's error is a bare variant name (`MetadataIncompleteBuffer`): say it in words.
    let st = SafeTensors::deserialize(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} cannot be read as safetensors ({} bytes; {}): the file is truncated or corrupt — use an intact copy or \
             an earlier checkpoint",
            name,
            bytes.len(),
            describe(&e)
        )
    })?;
    let (_, meta) = SafeTensors::read_metadata(bytes)?;
    let metadata = meta.metadata().clone().unwrap_or_default().into_iter().collect();
    let mut tensors = BTreeMap::new();
    for (name, view) in st.tensors() {
        tensors.insert(name.clone(), to_data(&name, &view)?);
    }
    Ok(TensorFile { tensors, metadata })
}

/// A safetensors error in words.
fn describe(e: &safetensors::SafeTensorError) -> &'static str {
    use safetensors::SafeTensorError as E;
    match e {
        E::HeaderTooSmall | E::MetadataIncompleteBuffer => "it ends before its header says it should",
        E::InvalidHeader | E::InvalidHeaderStart | E::InvalidHeaderDeserialization => "its header is not valid",
        E::HeaderTooLarge => "its header length is impossible",
        _ => "its tensors do not match its header",
    }
}

fn to_data(name: &str, v: &TensorView<'_>) -> anyhow::Result<TensorData> {
    let shape = v.shape().to_vec();
    let b = v.data();
    Ok(match v.dtype() {
        Dtype::F32 => TensorData::new(
            b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(),
            shape,
        ),
        Dtype::F64 => TensorData::new(
            b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(),
            shape,
        ),
        Dtype::I64 => TensorData::new(
            b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(),
            shape,
        ),
        Dtype::I32 => TensorData::new(
            b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(),
            shape,
        ),
        Dtype::BF16 => TensorData::new(
            b.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect::<Vec<_>>(),
            shape,
        ),
        Dtype::F16 => TensorData::new(
            b.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect::<Vec<_>>(),
            shape,
        ),
        other => bail!("tensor `{name}` has dtype {other:?}; normlab reads f32, f64, bf16, f16, i32 and i64"),
    })
}

/// Writes named tensors (stored as f32 / i64) with metadata, atomically.
pub fn write(
    path: &Path,
    tensors: &BTreeMap<String, TensorData>,
    metadata: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let mut raw: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, data) in tensors {
        let shape = data.shape().to_vec();
        let (dtype, bytes) = match data.dtype() {
            DType::I64 | DType::I32 | DType::U32 | DType::U64 => {
                let d = data.clone().convert::<i64>();
                (Dtype::I64, d.as_slice::<i64>().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect())
            }
            _ => {
                let d = data.clone().convert::<f32>();
                (Dtype::F32, d.as_slice::<f32>().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect())
            }
        };
        raw.push((name.clone(), dtype, shape, bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = raw
        .iter()
        .map(|(n, dt, s, b)| Ok((n.clone(), TensorView::new(*dt, s.clone(), b)?)))
        .collect::<Result<_, safetensors::SafeTensorError>>()?;
    let meta: HashMap<String, String> = metadata.clone().into_iter().collect();
    let bytes = safetensors::serialize(views, &Some(meta))?;
    write_atomic(path, &canonical_header(bytes)?)
}

/// `v` with every object's keys in sorted order (whatever map type serde_json was built with).
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let by_key: BTreeMap<String, serde_json::Value> = m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            serde_json::Value::Object(by_key.into_iter().collect())
        }
        other => other,
    }
}

/// The same file with its JSON header's keys sorted (the `safetensors` crate writes
/// `__metadata__` in hash-map order, which differs from process to process), so equal tensors
/// and metadata give equal bytes. Data offsets are relative to the data, so only the header's
/// length changes; it stays padded with spaces to a multiple of 8 bytes.
fn canonical_header(bytes: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let n = u64::from_le_bytes(bytes[..8].try_into()?) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n])?;
    let mut text = serde_json::to_vec(&sorted(header))?;
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + bytes.len() - 8 - n);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[8 + n..]);
    Ok(out)
}

#[cfg(test)]
mod determinism_tests {
    use super::*;

    #[test]
    fn equal_tensors_and_metadata_give_equal_bytes_with_sorted_keys() {
        let dir = std::env::temp_dir().join(format!("normlab-st-det-{}", std::process::id()));
        let tensors = BTreeMap::from([("b".to_string(), TensorData::new(vec![1f32, 2.0], [2]))]);
        let meta: BTreeMap<String, String> = (0..12).map(|i| (format!("k{i:02}"), format!("v{i}"))).collect();
        let mut files = Vec::new();
        // A fresh HashMap per write draws a fresh random hash seed: the order the crate would
        // write differs between writes.
        for i in 0..4 {
            let p = dir.join(format!("w{i}.safetensors"));
            write(&p, &tensors, &meta).unwrap();
            files.push(std::fs::read(&p).unwrap());
        }
        assert!(files.windows(2).all(|w| w[0] == w[1]));
        let n = u64::from_le_bytes(files[0][..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0);
        let header = std::str::from_utf8(&files[0][8..8 + n]).unwrap();
        let positions: Vec<usize> = (0..12).map(|i| header.find(&format!("\"k{i:02}\"")).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{header}");
        let back = read(&dir.join("w0.safetensors")).unwrap();
        assert_eq!(back.metadata, meta);
        assert_eq!(back.tensors["b"].as_slice::<f32>().unwrap(), [1.0, 2.0]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
