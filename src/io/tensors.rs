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
    write_atomic(path, &bytes)
}
