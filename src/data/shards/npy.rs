//! numpy token arrays: `.npy` files as `np.save` writes them (magic `\x93NUMPY`, version, a
//! header dict with `descr`, `fortran_order` and `shape`, padded so the data starts at a
//! multiple of 64 bytes) holding a 1-D array of `<u2`, `<u4` or non-negative `<i4` tokens; and
//! the header-less `np.memmap` files OLMo-core and Dolma keep tokens in (also named `.npy`),
//! whose token width the reader is told.

use super::stream::{Shard, Store};
use anyhow::{Context, bail, ensure};

pub const MAGIC: &[u8] = b"\x93NUMPY";

/// The shard of an `np.save` file.
pub fn shard(bytes: Store, name: &str) -> anyhow::Result<Shard> {
    let (offset, header) = header(&bytes, name)?;
    let width = match field(&header, "descr").as_deref() {
        Some("'<u2'") => 2,
        Some("'<u4'" | "'<i4'") => 4,
        d => {
            bail!("{name}: numpy dtype {} is not a token dtype; save the tokens as uint16 or uint32", d.unwrap_or("?"))
        }
    };
    let shape = field(&header, "shape").unwrap_or_default();
    let dims: Vec<&str> = shape.trim_matches(|c| c == '(' || c == ')').split(',').map(str::trim).collect();
    let count: usize = match dims.as_slice() {
        [n] | [n, ""] => n.parse().with_context(|| format!("{name}: numpy shape {shape} is not a length"))?,
        _ => bail!("{name}: numpy shape {shape} is not 1-D; save the tokens as one flat array"),
    };
    ensure!(
        bytes.len().checked_sub(offset) == Some(count * width),
        "{name} is truncated or corrupt: its header gives {count} tokens but the file has {} bytes of data",
        bytes.len().saturating_sub(offset)
    );
    if field(&header, "descr").as_deref() == Some("'<i4'") {
        check_non_negative(&bytes[offset..], name)?;
    }
    Ok(Shard::new(bytes, offset, width, count))
}

/// Refuses an `<i4` array holding a negative value (read as unsigned it would pass for a huge
/// token id), naming the first one and where it is.
fn check_non_negative(data: &[u8], name: &str) -> anyhow::Result<()> {
    let values = data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    match values.enumerate().find(|(_, v)| *v < 0) {
        Some((i, v)) => bail!("{name}: token {i} is {v}; token ids are never negative (a padding or masking value?)"),
        None => Ok(()),
    }
}

/// The header-less memmap: the whole file is `width`-byte tokens.
pub fn raw_shard(bytes: Store, width: usize, name: &str) -> anyhow::Result<Shard> {
    ensure!(
        bytes.len().is_multiple_of(width),
        "{name} ({} bytes) is not a whole number of {width}-byte tokens: truncated, or set data.token_dtype",
        bytes.len()
    );
    let n = bytes.len() / width;
    Ok(Shard::new(bytes, 0, width, n))
}

/// The data offset and the header dict's text.
fn header(bytes: &[u8], name: &str) -> anyhow::Result<(usize, String)> {
    ensure!(bytes.len() >= 10, "{name} is cut short inside its numpy header");
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            ensure!(bytes.len() >= 12, "{name} is cut short inside its numpy header");
            (u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize, 12)
        }
        v => bail!("{name}: numpy format version {v} is unknown"),
    };
    ensure!(bytes.len() >= start + len, "{name} is cut short inside its numpy header");
    let text = std::str::from_utf8(&bytes[start..start + len]).with_context(|| format!("{name}: numpy header"))?;
    let fortran = field(text, "fortran_order");
    ensure!(fortran.as_deref() != Some("True"), "{name}: a Fortran-ordered array; save a flat C-ordered one");
    Ok((start + len, text.to_string()))
}

/// The value text of `'key': value` in a numpy header dict (a tuple kept whole).
fn field(header: &str, key: &str) -> Option<String> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}'])? };
    Some(rest[..end].trim().to_string())
}

/// An `np.save` version 1.0 file of the tokens (`<u2` when every token fits, else `<u4`).
pub fn encode(tokens: &[u32]) -> Vec<u8> {
    let narrow = tokens.iter().all(|&t| t <= u16::MAX as u32);
    let descr = if narrow { "<u2" } else { "<u4" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}", tokens.len());
    // numpy pads with spaces and ends with a newline so the data starts at a multiple of 64.
    let total = MAGIC.len() + 4 + dict.len() + 1;
    dict.push_str(&" ".repeat(total.next_multiple_of(64) - total));
    dict.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    for &t in tokens {
        match narrow {
            true => out.extend_from_slice(&(t as u16).to_le_bytes()),
            false => out.extend_from_slice(&t.to_le_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header `np.save(f, np.arange(3, dtype=np.uint16))` writes (numpy 2.x, format 1.0),
    /// typed out: 10 bytes of preamble, the dict, spaces and a newline to byte 128.
    fn numpy_bytes() -> Vec<u8> {
        let dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }";
        let h = format!("{dict}{}\n", " ".repeat(128 - 10 - dict.len() - 1));
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&[0, 0, 1, 0, 2, 0]);
        b
    }

    #[test]
    fn reads_the_header_numpy_writes_and_writes_it_back() {
        let bytes = numpy_bytes();
        let s = shard(Store::Mem(bytes.clone()), "t.npy").unwrap();
        assert_eq!(s.token_bytes(), &[0, 0, 1, 0, 2, 0]);
        assert_eq!(encode(&[0, 1, 2]), bytes, "np.save's bytes exactly");
        let wide = encode(&[70_000]);
        assert!(std::str::from_utf8(&wide[10..wide.len() - 4]).unwrap().contains("'<u4'"));
        assert_eq!((wide.len() - 4) % 64, 0, "data starts at a multiple of 64");
    }

    #[test]
    fn refuses_what_is_not_a_flat_token_array() {
        let mut b = numpy_bytes();
        b.pop();
        assert!(shard(Store::Mem(b), "t.npy").err().unwrap().to_string().contains("truncated"));
        let edited = |from: &str, to: &str| {
            let b = numpy_bytes();
            let at = b.windows(from.len()).position(|w| w == from.as_bytes()).unwrap();
            [&b[..at], to.as_bytes(), &b[at + from.len()..]].concat()
        };
        let e = |b: Vec<u8>| shard(Store::Mem(b), "t.npy").err().unwrap().to_string();
        assert!(e(edited("(3,)", "(1, 3)")).contains("not 1-D"));
        assert!(e(edited("<u2", "<f4")).contains("not a token dtype"));
    }
}
