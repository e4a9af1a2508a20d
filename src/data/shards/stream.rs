//! [`TokenFile`]: one token stream over any number of memory-mapped shards, read as if they were
//! one array (the shards' order is the stream's).

/// A shard's bytes: mapped from disk, or in memory for text tokenized on the fly.
pub enum Store {
    Map(memmap2::Mmap),
    Mem(Vec<u8>),
}

impl std::ops::Deref for Store {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Store::Map(m) => m,
            Store::Mem(v) => v,
        }
    }
}

/// One shard: `len` little-endian tokens of `width` bytes (2 or 4) from byte `offset`.
pub struct Shard {
    bytes: Store,
    offset: usize,
    width: usize,
    len: usize,
}

impl Shard {
    /// A shard whose layout its format's reader has checked: `offset + len · width` is the
    /// store's size.
    pub fn new(bytes: Store, offset: usize, width: usize, len: usize) -> Self {
        debug_assert!(width == 2 || width == 4);
        debug_assert_eq!(offset + len * width, bytes.len());
        Self { bytes, offset, width, len }
    }

    fn get(&self, i: usize) -> u32 {
        let o = self.offset + i * self.width;
        match self.width {
            2 => u16::from_le_bytes([self.bytes[o], self.bytes[o + 1]]) as u32,
            _ => u32::from_le_bytes(self.bytes[o..o + 4].try_into().expect("4 bytes")),
        }
    }

    /// The token bytes (no header).
    pub fn token_bytes(&self) -> &[u8] {
        &self.bytes[self.offset..]
    }
}

/// A token stream: shards concatenated.
pub struct TokenFile {
    shards: Vec<Shard>,
    /// `starts[k]` is the stream index of shard `k`'s first token; one more entry: the length.
    starts: Vec<usize>,
}

impl TokenFile {
    pub fn from_shards(shards: Vec<Shard>) -> Self {
        let mut starts = Vec::with_capacity(shards.len() + 1);
        let mut n = 0;
        starts.push(0);
        for s in &shards {
            n += s.len;
            starts.push(n);
        }
        Self { shards, starts }
    }

    /// The streams one after the other.
    pub fn concat(files: Vec<TokenFile>) -> Self {
        Self::from_shards(files.into_iter().flat_map(|f| f.shards).collect())
    }

    pub fn len(&self) -> usize {
        *self.starts.last().expect("one entry at least")
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shards in the stream.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Every token, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.shards.iter().flat_map(|s| (0..s.len).map(move |i| s.get(i)))
    }

    pub fn get(&self, i: usize) -> u32 {
        let k = self.shard_of(i);
        self.shards[k].get(i - self.starts[k])
    }

    fn shard_of(&self, i: usize) -> usize {
        assert!(i < self.len(), "token {i} of a stream of {}", self.len());
        self.starts.partition_point(|&s| s <= i) - 1
    }

    /// The largest token, if any (every token read once, shard by shard).
    pub fn max_token(&self) -> Option<u32> {
        use rayon::prelude::*;
        self.shards
            .par_iter()
            .filter_map(|s| match s.width {
                2 => s.token_bytes().chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as u32).max(),
                _ => s.token_bytes().chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).max(),
            })
            .max()
    }

    /// Appends tokens `start..start + n` to `out` as i64 (the model's index type); the window
    /// may cross shards.
    pub fn extend_window(&self, start: usize, n: usize, out: &mut Vec<i64>) {
        if n == 0 {
            return;
        }
        let (mut k, mut i, end) = (self.shard_of(start), start, start + n);
        while i < end {
            let s = &self.shards[k];
            let to = end.min(self.starts[k + 1]);
            out.extend((i - self.starts[k]..to - self.starts[k]).map(|j| s.get(j) as i64));
            (i, k) = (to, k + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(tokens: &[u16]) -> Shard {
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        Shard::new(Store::Mem(bytes), 0, 2, tokens.len())
    }

    #[test]
    fn windows_across_shards_read_the_concatenation() {
        let f = TokenFile::from_shards(vec![mem(&[1, 2, 3]), mem(&[]), mem(&[4]), mem(&[5, 6])]);
        assert_eq!(f.len(), 6);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!((0..6).map(|i| f.get(i)).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        let mut w = Vec::new();
        f.extend_window(1, 5, &mut w);
        assert_eq!(w, vec![2, 3, 4, 5, 6]);
        w.clear();
        f.extend_window(3, 1, &mut w);
        assert_eq!(w, vec![4]);
    }
}
