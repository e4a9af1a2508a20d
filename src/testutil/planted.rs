//! A corpus with a planted spike: one sentence repeated (learned to a loss near zero within
//! two hundred steps of a tiny model) with 800 random printable bytes a third of the way
//! in. A batch that draws a window from the random stretch has a loss several nats above the
//! rest: a spike in the loss and the gradient norm, as bad data makes one in real runs. Shared
//! by the unit tests and, through `#[path]`, the integration tests.

/// Writes the corpus to `path` (≈ 181 KB, the same bytes every time).
pub fn write_planted_corpus(path: &std::path::Path) {
    let body = "the quick brown fox jumps over the lazy dog. ".repeat(4000);
    // SplitMix64 (Steele et al.), written out so that this file stands alone.
    let mut state: u64 = 5;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let noise: String = (0..800).map(|_| char::from(33 + (next() % 94) as u8)).collect();
    let cut = body.len() / 3;
    std::fs::write(path, format!("{}{noise}{}", &body[..cut], &body[cut..])).expect("write the planted corpus");
}
