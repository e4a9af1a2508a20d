//! nanoGPT / modded-nanogpt / llm.c token shards (`.bin`): a header of 256 little-endian int32
//! — magic, version, token count, zeros — then the tokens: version 1 (magic 20240520) holds
//! uint16 tokens (GPT-2's), version 7 (magic 20240801, llm.c's Llama 3 shards) uint32.

use super::stream::{Shard, Store};
use anyhow::{bail, ensure};

const HEADER: usize = 256 * 4;
/// (magic, version, bytes per token)
const KINDS: [(i32, i32, usize); 2] = [(20240520, 1, 2), (20240801, 7, 4)];

fn header_i32(bytes: &[u8], k: usize) -> i32 {
    i32::from_le_bytes(bytes[4 * k..4 * k + 4].try_into().expect("4 bytes"))
}

/// Whether the bytes start with a nanoGPT header's magic.
pub fn is_nanogpt(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && KINDS.iter().any(|k| header_i32(bytes, 0) == k.0)
}

/// The shard, its header checked against the file's size.
pub fn shard(bytes: Store, name: &str) -> anyhow::Result<Shard> {
    ensure!(bytes.len() >= HEADER, "{name} is shorter than a nanoGPT shard's 1024-byte header: it was cut short");
    let (magic, version, count) = (header_i32(&bytes, 0), header_i32(&bytes, 1), header_i32(&bytes, 2));
    let Some(&(_, _, width)) = KINDS.iter().find(|k| k.0 == magic && k.1 == version) else {
        bail!("{name}: nanoGPT magic {magic} with unknown version {version} (known: 1 with uint16, 7 with uint32)")
    };
    ensure!(count >= 0, "{name}: nanoGPT header gives a negative token count ({count})");
    let count = count as usize;
    ensure!(
        bytes.len() == HEADER + count * width,
        "{name} is truncated or corrupt: its header gives {count} tokens ({} bytes) but the file has {} bytes",
        HEADER + count * width,
        bytes.len()
    );
    Ok(Shard::new(bytes, HEADER, width, count))
}

/// The file's bytes: version 1 (uint16) when every token fits, else version 7 (uint32).
pub fn encode(tokens: &[u32]) -> anyhow::Result<Vec<u8>> {
    ensure!(tokens.len() < i32::MAX as usize, "a nanoGPT shard holds fewer than 2^31 tokens; use smaller shards");
    let narrow = tokens.iter().all(|&t| t <= u16::MAX as u32);
    let (magic, version, width) = if narrow { KINDS[0] } else { KINDS[1] };
    let mut out = Vec::with_capacity(HEADER + tokens.len() * width);
    for v in [magic, version, tokens.len() as i32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.resize(HEADER, 0);
    for &t in tokens {
        match width {
            2 => out.extend_from_slice(&(t as u16).to_le_bytes()),
            _ => out.extend_from_slice(&t.to_le_bytes()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_modded_nanogpts() {
        let b = encode(&[1, 2, 65535]).unwrap();
        let ints: Vec<i32> = b[..12].chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(ints, [20240520, 1, 3]);
        assert!(b[12..1024].iter().all(|&x| x == 0));
        assert_eq!(&b[1024..], &[1, 0, 2, 0, 255, 255]);
        let s = shard(Store::Mem(b), "t.bin").unwrap();
        assert_eq!(s.token_bytes().len(), 6);
        let wide = encode(&[65536]).unwrap();
        assert_eq!(i32::from_le_bytes(wide[..4].try_into().unwrap()), 20240801, "llm.c's uint32 shards");
        assert_eq!(&wide[1024..], &65536u32.to_le_bytes());
    }

    #[test]
    fn a_cut_shard_is_refused() {
        let mut b = encode(&[1, 2, 3]).unwrap();
        b.pop();
        assert!(shard(Store::Mem(b), "t.bin").err().unwrap().to_string().contains("truncated"));
    }
}
