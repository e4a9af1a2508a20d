//! A batch of token rows with their next-token targets.

/// Inputs and next-token targets, row-major `[batch, seq_len]`; a target of −1 is not learned
/// (prompt and padding positions of pairs).
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub inputs: Vec<i64>,
    pub targets: Vec<i64>,
    pub batch: usize,
    pub seq_len: usize,
}
