//! The equations a recipe with `n` residual streams runs, as `normlab recipes` prints them: the
//! branch of every sublayer reads a mixture of the streams and is written back into all of them
//! ([`crate::model::residual::stream_mix`] computes exactly these), in place of the one-stream sum
//! `X_{l+1} = X_l + y_l`.

use super::streams::{Mixing, Streams};

/// The lines that replace the one-stream sublayer equation: the state, the read and write of
/// sublayer `l` around its branch `y_l = branch`, how the mixing's weights are computed, the
/// collapse to `X_{2L+1}`, and what the probes call `z_l`.
pub fn stream_lines(resolved: Streams, branch: &str) -> Vec<String> {
    let n = resolved.n;
    let mut lines = vec![
        format!("state: n = {n} streams H[1..n] ∈ ℝ^d per token, each H[s] = X_1 at the start"),
        format!(
            "every sublayer l:  x_l = Σ_s p_s·H[s];  y_l = {branch};  H[k] ← Σ_j R[j,k]·H[j] + w_k·y_l   \
             (read, branch, mix and write)"
        ),
    ];
    lines.extend(weights(resolved.mixing));
    lines.push(
        "probes: X_l is the read x_l, z_l the mean of the n streams after sublayer l's write (1/n·Σ_k H[k])".into(),
    );
    lines
}

/// How `p`, `R`, `w` and the collapse come about, per mixing.
fn weights(m: Mixing) -> Vec<String> {
    const MHC: &str = "m = RMS₀(vec H)·Φ over the n·d values (no gain), Φ learnable, split as m_pre, m_post, m_res; \
                       a, b learnable (a = 1, b = 0 at init)";
    const COLLAPSE: &str = "X_{2L+1} = Σ_s q_s·H[s],  q = σ(a·RMS₀(vec H)·Φ_head + b) + ε   (its own learned read)";
    match m {
        Mixing::Hc { dynamic: true } => vec![
            "[p | R] = A + s_α·tanh(RMS(H[s]) W_α),  w = B + s_β·tanh(RMS(H[s]) W_β)   (dynamic \
             Hyper-Connections)"
                .into(),
            "A, B learnable: p = e_{l mod n}, R = I, w = 1 at init (pre-norm); W_α, W_β = 0, s_α = s_β = 0.01 at \
             init"
                .into(),
            "X_{2L+1} = Σ_s H[s]".into(),
        ],
        Mixing::Hc { dynamic: false } => vec![
            "[p | R] = A,  w = B   (static Hyper-Connections)".into(),
            "A, B learnable: p = e_{l mod n}, R = I, w = 1 at init (pre-norm)".into(),
            "X_{2L+1} = Σ_s H[s]".into(),
        ],
        Mixing::Mhc { sinkhorn_iters } => vec![
            MHC.into(),
            format!(
                "p = σ(a_pre·m_pre + b_pre) + ε,  w = 2σ(a_post·m_post + b_post),  R = Sinkhorn(softmax(a_res·m_res + \
                 b_res)): columns, then {} × rows and columns, ε = 1e-6 on every sum (mHC)",
                sinkhorn_iters.saturating_sub(1)
            ),
            COLLAPSE.into(),
        ],
        Mixing::MhcLite => vec![
            MHC.into(),
            "p = σ(a_pre·m_pre + b_pre) + ε,  w = 2σ(a_post·m_post + b_post),  R = Σ_k c_k·P_k over the n! \
             permutation matrices, c = softmax(a_res·m_res + b_res): doubly stochastic exactly (mHC-lite)"
                .into(),
            COLLAPSE.into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mHC with the default 20 iterations prints one column step and 19 row-and-column steps,
    /// as `streams::sinkhorn` runs them; every mixing names the read, the write and `z_l`.
    #[test]
    fn each_mixing_prints_what_it_runs() {
        let spec = |mixing| Streams { n: 4, mixing };
        let (hc, mhc, lite) = (Mixing::Hc { dynamic: true }, Mixing::Mhc { sinkhorn_iters: 20 }, Mixing::MhcLite);
        let text = stream_lines(spec(mhc), "F_l(RMS(x_l))").join("\n");
        assert!(text.contains("columns, then 19 × rows and columns") && text.contains("w = 2σ"), "{text}");
        for m in [hc, mhc, lite] {
            let text = stream_lines(spec(m), "F_l(RMS(x_l))").join("\n");
            assert!(text.contains("y_l = F_l(RMS(x_l))") && text.contains("z_l the mean of the n streams"), "{text}");
        }
        assert!(stream_lines(spec(hc), "y").join("\n").contains("X_{2L+1} = Σ_s H[s]"));
    }
}
