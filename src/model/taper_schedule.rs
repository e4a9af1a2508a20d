//! TaperNorm's schedule applied after an optimizer step ([`crate::recipe::taper`]): each
//! `tapernorm` slot's calibration averages take the step's statistics while the gate is held,
//! `c` and γ̃ are set once at the taper start, and every slot's gate moves to `g(k)`.

use crate::model::transformer::Transformer;
use crate::norm::{Norm, TaperNorm};
use crate::recipe::{Taper, TaperSteps};
use burn::module::Param;
use burn::tensor::{Tensor, TensorData};

/// `model` after step `done` (1-based, this step included) of a run scheduled as `steps`;
/// `stats` are the step's calibration statistics `[mean ‖γ⊙x‖²/r, mean ‖γ⊙x‖²]`, one per
/// `tapernorm` slot in model order (attention's input norm, then the FFN's, layer by layer).
pub fn apply(mut model: Transformer, taper: Taper, steps: TaperSteps, done: usize, stats: &[Vec<f64>]) -> Transformer {
    let gate = steps.gate(done);
    let slots = model.layers.iter_mut().flat_map(|l| [&mut l.attn.input_norm, &mut l.ffn.input_norm]);
    let tapers = slots.filter_map(|n| match n {
        Some(Norm::TaperNorm(t)) => Some(t),
        _ => None,
    });
    for (i, n) in tapers.enumerate() {
        if steps.collects(done)
            && let Some(&[scaled, energy]) = stats.get(i).map(Vec::as_slice)
        {
            n.taper_ema_scaled = average(&n.taper_ema_scaled, scaled, taper.decay);
            n.taper_ema_energy = average(&n.taper_ema_energy, energy, taper.decay);
        }
        if done == steps.start {
            calibrate(n);
        }
        n.taper_gate = constant(&n.taper_gate, gate);
    }
    model
}

/// The taper start: `c ← m/n`, the least-squares scale of the linear branch, and γ̃ ← γ. γ̃
/// keeps its id (and so its optimizer moments) and its gradient tracking.
fn calibrate(n: &mut TaperNorm) {
    let c = (n.taper_ema_scaled.val() / n.taper_ema_energy.val()).detach();
    n.taper_scale = n.taper_scale.clone().map(|_| c);
    let gain = n.gain.val().detach();
    n.taper_gain = n.taper_gain.clone().map(|t| if t.is_require_grad() { gain.require_grad() } else { gain });
}

/// A buffer's moving average `β·m + (1 − β)·s`, on its device (no transfer).
fn average(m: &Param<Tensor<1>>, s: f64, decay: f64) -> Param<Tensor<1>> {
    m.clone().map(|t| (t.detach() * decay + s * (1.0 - decay)).detach())
}

/// A buffer set to `v`.
fn constant(p: &Param<Tensor<1>>, v: f64) -> Param<Tensor<1>> {
    p.clone().map(|t| {
        let data = TensorData::new(vec![v], [1]).convert_dtype(t.dtype());
        Tensor::<1>::from_data(data, &t.device())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::ParamSource;
    use crate::model::base::params::named_values;
    use crate::recipe::RecipeConfig;
    use crate::testutil::cpu;

    fn value(model: &Transformer, name: &str) -> Vec<f64> {
        let (_, v) = named_values(model).into_iter().find(|(n, _)| n == name).unwrap();
        v.convert::<f64>().try_into_vec::<f64>().unwrap()
    }

    /// A 1-layer `tapernorm` model under S = 2, E = 4: statistics
    /// [2, 4] then [1, 1]. By hand, β = 0.99: m = 0.02, then 0.99·0.02 + 0.01·1 = 0.0298;
    /// n = 0.04, then 0.0496; c = 0.0298/0.0496 at S. The gate: 1, 1, ½, 0, 0.
    #[test]
    fn the_schedule_by_hand() {
        let cfg = one_layer_tapernorm();
        let mut model = Transformer::new(&cfg, ParamSource::Seeded(3), &cpu()).unwrap();
        let taper = model.meta.taper.unwrap();
        let stats = [[[2.0, 4.0], [2.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]], [[9.0, 9.0], [9.0, 9.0]]];
        let slot = "layers.0.ffn.input_norm";
        let mut gates = Vec::new();
        for done in 1..=5 {
            let s: Vec<Vec<f64>> = stats[(done - 1).min(2)].iter().map(|r| r.to_vec()).collect();
            model = apply(model, taper, TaperSteps { start: 2, end: 4 }, done, &s);
            gates.push(value(&model, &format!("{slot}.taper_gate"))[0]);
            if done == 2 {
                assert_eq!(value(&model, &format!("{slot}.taper_gain")), value(&model, &format!("{slot}.gain")));
            }
        }
        assert_eq!(gates, vec![1.0, 1.0, 0.5, 0.0, 0.0]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.abs();
        assert!(close(value(&model, &format!("{slot}.taper_ema_scaled"))[0], 0.0298));
        assert!(close(value(&model, &format!("{slot}.taper_ema_energy"))[0], 0.0496));
        assert!(close(value(&model, &format!("{slot}.taper_scale"))[0], 0.0298 / 0.0496));
    }

    fn one_layer_tapernorm() -> crate::model::ModelConfig {
        crate::model::ModelConfig {
            vocab_size: 16,
            d_model: 8,
            n_layers: 1,
            n_heads: 2,
            d_glu: Some(8),
            recipe: RecipeConfig::Preset("tapernorm".into()),
            ..Default::default()
        }
    }
}
