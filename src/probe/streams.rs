//! Probes of a residual state of `n` streams (Hyper-Connections, mHC, mHC-lite): per sublayer
//! each stream's variance, how far the residual mixing `R` is from doubly stochastic (its rows'
//! and columns' sums), its spectral norm; over the depth, the gain of the composite mixing
//! `Π_l R_lᵀ` — mHC's measure of what unconstrained mixing does to the identity path (its
//! largest absolute row sum, the forward gain, and column sum, the backward gain).

use super::stats::{Fetched, Gather, Slot};
use crate::model::residual::stream_mix::StreamTrace;
use serde::{Deserialize, Serialize};

/// One sublayer's stream statistics, over the probe batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamProbe {
    /// Each stream's variance over `d` after the sublayer, mean over tokens, `[n]`.
    pub stream_var: Vec<f64>,
    /// The largest `|Σ_k R[j, k] − 1|` (rows) and `|Σ_j R[j, k] − 1|` (columns) over tokens.
    pub row_dev: f64,
    pub col_dev: f64,
    /// The largest singular value of the token-mean `R`.
    pub spectral_norm: f64,
    /// The token-mean `R`, row-major `n × n`.
    pub mixing: Vec<f64>,
}

/// The composite mixing's gains over the depth (mHC's "Amax gain magnitude").
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamGain {
    /// The largest absolute row sum of `Π R_lᵀ` (the forward signal's worst amplification).
    pub forward: f64,
    /// The largest absolute column sum (the gradient's).
    pub backward: f64,
}

/// Where one sublayer's stream reductions sit among the fetched values.
pub struct StreamSlots {
    var: Slot,
    mean_r: Slot,
    row_dev: Slot,
    col_dev: Slot,
}

/// Pushes a sublayer's stream reductions for the probe's one transfer.
pub fn pend(tr: &StreamTrace, g: &mut Gather) -> StreamSlots {
    let [b, t, n, _] = tr.state.dims();
    let var = tr.state.clone().var_bias(3).reshape([b * t, n]).mean_dim(0).reshape([n]);
    let r = tr.residual.clone();
    let [rb, rt, _, _] = r.dims();
    let dev = |sums: burn::tensor::Tensor<4>| (sums - 1.0).abs().max().reshape([1]);
    StreamSlots {
        var: g.push(var),
        mean_r: g.push(r.clone().reshape([rb * rt, n * n]).mean_dim(0).reshape([n * n])),
        row_dev: g.push(dev(r.clone().sum_dim(3))),
        col_dev: g.push(dev(r.sum_dim(2))),
    }
}

/// The sublayer's statistics from the fetched values.
pub fn probe(s: &StreamSlots, f: &Fetched) -> StreamProbe {
    let mixing = f.get(s.mean_r).to_vec();
    let n = f.get(s.var).len();
    StreamProbe {
        stream_var: f.get(s.var).to_vec(),
        row_dev: f.get(s.row_dev)[0],
        col_dev: f.get(s.col_dev)[0],
        spectral_norm: spectral_norm(&mixing, n),
        mixing,
    }
}

/// The gains of `Π_l R_lᵀ` over the sublayers in order (`H_L = R_{L−1}ᵀ ⋯ R_0ᵀ H_0 + …`), `None`
/// without streams.
pub fn composite_gain(probes: &[&StreamProbe]) -> Option<StreamGain> {
    let n = probes.first()?.stream_var.len();
    let mut m: Vec<f64> = (0..n * n).map(|k| f64::from(u8::from(k / n == k % n))).collect();
    for p in probes {
        // M ← R_lᵀ M.
        m = (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n).map(|s| p.mixing[s * n + i] * m[s * n + j]).sum()
            })
            .collect();
    }
    let row = (0..n).map(|i| (0..n).map(|j| m[i * n + j].abs()).sum::<f64>()).fold(0.0, f64::max);
    let col = (0..n).map(|j| (0..n).map(|i| m[i * n + j].abs()).sum::<f64>()).fold(0.0, f64::max);
    Some(StreamGain { forward: row, backward: col })
}

/// The largest singular value of the row-major `n × n` matrix `m`: power iteration on `mᵀm`.
pub fn spectral_norm(m: &[f64], n: usize) -> f64 {
    let mut v = vec![1.0 / (n as f64).sqrt(); n];
    let mut sigma = 0.0;
    for _ in 0..200 {
        let mv: Vec<f64> = (0..n).map(|i| (0..n).map(|j| m[i * n + j] * v[j]).sum()).collect();
        let w: Vec<f64> = (0..n).map(|j| (0..n).map(|i| m[i * n + j] * mv[i]).sum()).collect();
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            return 0.0;
        }
        sigma = norm.sqrt();
        v = w.iter().map(|x| x / norm).collect();
    }
    sigma
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_of(mixing: Vec<f64>) -> StreamProbe {
        StreamProbe { stream_var: vec![1.0; 2], row_dev: 0.0, col_dev: 0.0, spectral_norm: 0.0, mixing }
    }

    /// `[[3, 0], [4, 5]]`: `mᵀm = [[25, 20], [20, 25]]`, eigenvalues 45 and 5, σ_max = √45.
    #[test]
    fn spectral_norm_of_a_matrix_worked_by_hand() {
        assert!((spectral_norm(&[3.0, 0.0, 4.0, 5.0], 2) - 45f64.sqrt()).abs() < 1e-9);
        assert!((spectral_norm(&[0.5, 0.5, 0.5, 0.5], 2) - 1.0).abs() < 1e-12, "doubly stochastic J/2");
    }

    /// Two sublayers with `R = [[1, 1], [0, 1]]`: `Rᵀ Rᵀ = [[1, 0], [2, 1]]`, rows sum to 1 and
    /// 3, columns to 3 and 1; doubly stochastic mixing keeps both gains at 1.
    #[test]
    fn composite_gain_multiplies_the_transposed_mixings() {
        let r = probe_of(vec![1.0, 1.0, 0.0, 1.0]);
        assert_eq!(composite_gain(&[&r, &r]), Some(StreamGain { forward: 3.0, backward: 3.0 }));
        let a = probe_of(vec![1.0, 2.0, 0.0, 1.0]);
        let b = probe_of(vec![1.0, 0.0, 0.0, 1.0]);
        // Rᵀ of a: [[1, 0], [2, 1]]: row sums 1, 3; column sums 3, 1.
        assert_eq!(composite_gain(&[&a, &b]), Some(StreamGain { forward: 3.0, backward: 3.0 }));
        let ds = probe_of(vec![0.25, 0.75, 0.75, 0.25]);
        let g = composite_gain(&[&ds, &ds, &ds]).unwrap();
        assert!((g.forward - 1.0).abs() < 1e-12 && (g.backward - 1.0).abs() < 1e-12);
        assert_eq!(composite_gain(&[]), None);
    }
}
