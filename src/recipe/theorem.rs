//! The BHyT paper's Theorem 3.6: in a stack of `L` Transformer layers, BHyT's per-layer variance
//! multiplier stays below LayerNorm-Scaling's at every layer when its hyperparameters satisfy
//! `λ/κ < L^(−1/4)` (λ = 3, κ = 10 holds up to L ≈ 123). A recipe whose initial λ breaks it
//! still trains; it loses the theorem's guarantee, which is worth a warning.

use super::ResolvedRecipe;
use crate::norm::{NormKind, kappa};

/// The warning for every BHyT or BHyT* slot of `r` whose initial λ/κ is not below
/// `L^(−1/4)`, naming the largest offender; `None` when the condition holds (or there is no
/// BHyT norm).
pub fn theorem_3_6_warning(r: &ResolvedRecipe) -> Option<String> {
    let l = r.dims.n_layers as f64;
    let bound = l.powf(-0.25);
    let worst = r
        .sublayers
        .iter()
        .flat_map(|s| [&s.input, &s.output, &s.outer])
        .chain([&r.logits.norm, &r.embedding.norm])
        .filter_map(|n| n.as_ref().and_then(lambda_kappa))
        .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))?;
    let (lambda, kappa) = worst;
    // κ = (1 − p)^(−1/2) is 10 only to rounding: compare with a relative margin.
    (lambda / kappa >= bound * (1.0 - 1e-12)).then(|| {
        format!(
            "BHyT's λ/κ = {lambda}/{kappa:.3} = {:.3} is not below L^(−1/4) = {l}^(−1/4) = {bound:.3}: the BHyT paper \
                Theorem 3.6's bound on the variance growth (below LayerNorm-Scaling's) does not hold for this depth; \
                it holds up to L < (κ/λ)⁴ = {:.0} layers, or with λ < {:.3}",
            lambda / kappa,
            (kappa / lambda).powi(4),
            kappa * bound
        )
    })
}

/// Initial λ and κ of a BHyT or BHyT* norm.
fn lambda_kappa(n: &NormKind) -> Option<(f64, f64)> {
    match *n {
        NormKind::Bhyt { lambda, p, .. } | NormKind::BhytStar { lambda, p, .. } => Some((lambda, kappa(p))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::theorem_3_6_warning;
    use crate::recipe::{Dims, RecipeConfig, resolve};

    fn recipe(toml_src: &str, n_layers: usize) -> crate::recipe::ResolvedRecipe {
        let c: RecipeConfig = toml::from_str::<toml::Table>(toml_src).unwrap()["recipe"].clone().try_into().unwrap();
        resolve(&c.spec().unwrap(), Dims { n_layers, d_model: 64 }, 1e-6).unwrap()
    }

    #[test]
    fn bhyt_warns_exactly_when_lambda_over_kappa_reaches_l_to_the_minus_quarter() {
        // The preset: λ₀ = 2 before attention, κ = 10 (p = 0.99): 0.2 < L^(−1/4) ⟺ L < 625.
        assert!(theorem_3_6_warning(&recipe("recipe = \"bhyt\"", 624)).is_none());
        let w = theorem_3_6_warning(&recipe("recipe = \"bhyt\"", 625)).expect("0.2 = 625^(−1/4)");
        assert!(w.contains("625^(−1/4) = 0.200") && w.contains("L < (κ/λ)⁴ = 625"), "{w}");
        // The paper's example: λ = 3, κ = 10 holds up to L ≈ 123 (0.3⁻⁴ = 123.5).
        let three = "[recipe]\npreset = \"bhyt-star\"\n[recipe.sublayer]\ninput = { kind = \"bhyt-star\", lambda = 3.0 }\n\
                     [[recipe.layers]]\nrange = \"1..=L\"\nsublayers = \"attn\"\ninput = { kind = \"bhyt-star\", lambda = 3.0 }";
        assert!(theorem_3_6_warning(&recipe(three, 123)).is_none());
        assert!(theorem_3_6_warning(&recipe(three, 124)).is_some());
        assert!(theorem_3_6_warning(&recipe("recipe = \"pre\"", 1000)).is_none(), "no BHyT norm");
    }
}
