//! CPython's `random.Random` (MT19937 seeded by `init_by_array`), as far as
//! lm-evaluation-harness's few-shot sampler uses it: `Random(seed).sample(population, k)`,
//! one generator carried from document to document. With it normlab picks the same few-shot
//! examples for every item as lm-eval does with the same seed (its default 1234).
//!
//! Follows CPython 3.11's `Modules/_randommodule.c` (`init_genrand`, `init_by_array`,
//! `genrand_uint32`, `getrandbits`) and `Lib/random.py` (`_randbelow_with_getrandbits`,
//! `sample`).

const N: usize = 624;
const M: usize = 397;

/// A Mersenne Twister in CPython's state and seeding.
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer seed: the key is the seed's 32-bit
    /// words, least significant first (`[0]` for 0).
    pub fn new(seed: u64) -> Self {
        let key: Vec<u32> = match seed >> 32 {
            0 => vec![seed as u32],
            high => vec![seed as u32, high as u32],
        };
        let mut r = Self { mt: [0; N], index: N };
        r.init_by_array(&key);
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            (i, j) = (i + 1, (j + 1) % key.len());
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
        }
        for _ in 0..N - 1 {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
        }
        self.mt[0] = 0x8000_0000;
    }

    /// The next 624 words of state.
    fn twist(&mut self) {
        let mag = |y: u32| if y & 1 == 1 { 0x9908_b0df } else { 0 };
        for k in 0..N {
            let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % N] & 0x7fff_ffff);
            self.mt[k] = self.mt[(k + M) % N] ^ (y >> 1) ^ mag(y);
        }
        self.index = 0;
    }

    /// `genrand_uint32`.
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for 1 ≤ k ≤ 32: the top `k` bits of one word.
    fn getrandbits(&mut self, k: u32) -> u32 {
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow_with_getrandbits(n)`: uniform in `0..n` by rejection, `n ≥ 1`.
    pub fn randbelow(&mut self, n: usize) -> usize {
        let k = usize::BITS - n.leading_zeros();
        assert!(k <= 32, "populations above 2^32 items are not sampled");
        loop {
            let r = self.getrandbits(k) as usize;
            if r < n {
                return r;
            }
        }
    }

    /// `sample(range(n), k)`: `k` distinct indices below `n`, in CPython's order (a pool swap
    /// for small populations, rejection against a set for large ones).
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        assert!(k <= n, "a sample of {k} from {n}");
        let mut setsize = 21usize;
        if k > 5 {
            // `4 ** ceil(log(3k, 4))`: 3k is never a power of 4, so rounding cannot matter.
            setsize += 4usize.pow(((k * 3) as f64).log(4.0).ceil() as u32);
        }
        if n <= setsize {
            let mut pool: Vec<usize> = (0..n).collect();
            (0..k)
                .map(|i| {
                    let j = self.randbelow(n - i);
                    let picked = pool[j];
                    pool[j] = pool[n - i - 1];
                    picked
                })
                .collect()
        } else {
            let mut selected = std::collections::HashSet::new();
            (0..k)
                .map(|_| {
                    loop {
                        let j = self.randbelow(n);
                        if selected.insert(j) {
                            return j;
                        }
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by CPython 3.11.7 (`import random`):
    /// `r = random.Random(1234); [r.getrandbits(32) for _ in range(3)]`,
    /// `random.Random(5489).getrandbits(32)` (MT19937's reference seed through init_by_array),
    /// `r = random.Random(1234); [r.sample(range(3), 2) for _ in range(3)]`,
    /// `r = random.Random(1234); [r.sample(range(100), 5) for _ in range(2)]` (set branch),
    /// `random.Random(2**40 + 7).sample(range(10), 3)` (a two-word key), and the constants'
    /// own notes.
    #[test]
    fn draws_equal_cpythons() {
        let mut r = PyRandom::new(1234);
        assert_eq!([r.next_u32(), r.next_u32(), r.next_u32()], [PY_1234_WORDS[0], PY_1234_WORDS[1], PY_1234_WORDS[2]]);
        assert_eq!(PyRandom::new(5489).next_u32(), PY_5489_WORD);
        let mut r = PyRandom::new(1234);
        let small: Vec<Vec<usize>> = (0..3).map(|_| r.sample(3, 2)).collect();
        assert_eq!(small, PY_1234_SMALL.map(|s| s.to_vec()));
        let mut r = PyRandom::new(1234);
        let large: Vec<Vec<usize>> = (0..2).map(|_| r.sample(100, 5)).collect();
        assert_eq!(large, PY_1234_LARGE.map(|s| s.to_vec()));
        assert_eq!(PyRandom::new((1 << 40) + 7).sample(10, 3), PY_TWO_WORDS);
        let mut r = PyRandom::new(1234);
        let eight: Vec<Vec<usize>> = (0..2).map(|_| r.sample(50, 8)).collect();
        assert_eq!(eight, PY_1234_EIGHT.map(|s| s.to_vec()));
    }

    const PY_1234_WORDS: [u32; 3] = [4_150_886_329, 3_342_196_574, 1_892_932_127];
    const PY_5489_WORD: u32 = 3_382_763_572;
    const PY_1234_SMALL: [[usize; 2]; 3] = [[1, 0], [0, 2], [2, 0]];
    const PY_1234_LARGE: [[usize; 5]; 2] = [[99, 56, 14, 0, 11], [74, 4, 85, 88, 10]];
    const PY_TWO_WORDS: [usize; 3] = [9, 7, 4];
    /// `r = random.Random(1234); [r.sample(range(50), 8) for _ in range(2)]`: k > 5 widens the
    /// pool branch's bound to 21 + 4³.
    const PY_1234_EIGHT: [[usize; 8]; 2] = [[49, 28, 7, 0, 5, 37, 2, 42], [44, 5, 6, 22, 15, 1, 49, 43]];
}
