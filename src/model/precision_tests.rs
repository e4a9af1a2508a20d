//! Mixed precision against full precision, for every recipe: the loss and the whole gradient
//! of a bf16 or f16 forward stay within the half type's rounding of the f32 ones, every
//! gradient is finite and reaches the f32 parameters in f32. The tolerances follow the
//! mantissas: bf16 keeps 8 bits (relative rounding 2⁻⁹ ≈ 2e-3 per operand), f16 keeps 11
//! (2⁻¹² ≈ 2.4e-4); errors compound over a few layers of matmuls, so the bounds are ~10× that.

use super::*;
use crate::init::ParamSource;
use crate::kernels::Precision;
use crate::model::base::params::named_grads;
use crate::model::tests::{tiny, tokens};
use crate::recipe::{PRESET_NAMES, RecipeConfig};
use crate::testutil::cpu;
use burn::tensor::DType;

/// The loss and every parameter's gradient (empty where autodiff gives none: a provably dead
/// parameter, see `tests::provably_dead`).
fn loss_and_grads(cfg: &ModelConfig, p: Precision) -> (f64, Vec<Vec<f64>>) {
    let device = cpu().autodiff();
    let mut model = Transformer::new(cfg, ParamSource::Seeded(7), &device).unwrap();
    model.set_precision(p);
    let (x, y) = tokens(&device, 3);
    let (loss, _, _) = model.loss(x, y, false);
    assert_eq!(loss.dtype(), DType::F32, "the loss is computed in f32");
    let value = crate::testutil::values(loss.clone())[0];
    let grads = named_grads(&model, &loss.backward());
    let each = grads
        .into_iter()
        .map(|(name, g)| match g {
            Some(g) => {
                assert_eq!(g.dtype(), DType::F32, "{name}: the gradient reaches the parameter in f32");
                g.convert::<f64>().as_slice::<f64>().unwrap().to_vec()
            }
            None => Vec::new(),
        })
        .collect();
    (value, each)
}

fn l2(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn every_recipe_in_half_precision_tracks_its_f32_loss_and_gradient() {
    for name in PRESET_NAMES {
        let cfg = ModelConfig { init_std: 0.2, ..tiny(RecipeConfig::Preset(name.to_string()), 3) };
        let (loss, grad) = loss_and_grads(&cfg, Precision::F32);
        let grad = &grad;
        // bf16 keeps 8 significant bits (relative rounding 2⁻⁹ per value): the whole gradient's
        // relative error grows with the bf16 matmuls it passes, largest for the Peri-LN
        // placements whose raw embedding reaches the first sublayer (peri-norm, sandwich: ≈ 5e-2
        // in bf16) and for gemma3, whose embedding arrives there × √d (6.8e-2 in bf16, 1.0e-2
        // in f16).
        for (p, loss_tol, grad_tol) in [(Precision::Bf16, 1e-2, 9e-2), (Precision::F16, 2e-3, 1.5e-2)] {
            let (l, g) = loss_and_grads(&cfg, p);
            let shapes = |g: &[Vec<f64>]| g.iter().map(Vec::len).collect::<Vec<_>>();
            assert_eq!(shapes(&g), shapes(grad), "{name} {p:?}: the same parameters get gradients");
            let (g, grad) = (g.concat(), grad.concat());
            assert!(g.iter().all(|v| v.is_finite()), "{name} {p:?}: a non-finite gradient");
            let loss_err = (l - loss).abs() / loss;
            let grad_err = l2(g.iter().zip(&grad).map(|(a, b)| a - b)) / l2(grad.iter().copied());
            eprintln!("{name:20} {p:?}: loss rel err {loss_err:.1e}, gradient rel L2 err {grad_err:.1e}");
            assert!(loss_err < loss_tol, "{name} {p:?}: loss {l} vs f32 {loss} (rel {loss_err:.1e})");
            assert!(grad_err < grad_tol, "{name} {p:?}: gradient rel L2 error {grad_err:.1e}");
            assert!(grad_err > 0.0, "{name} {p:?}: identical to f32, so the half path did not run");
        }
    }
}
