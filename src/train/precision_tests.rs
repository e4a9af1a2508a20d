//! Training in mixed precision: a short run in bf16 and in f16 tracks the f32 loss curve
//! within its type's rounding, and f16's loss scaling skips, records and recovers from an
//! overflow without touching the weights.

use super::tests::{quiet, run, tiny_cfg, train_losses};
use super::{Outcome, start};
use crate::kernels::Precision;
use crate::model::base::params::named_values;
use crate::run::layout;
use crate::run::metrics::Metrics;
use crate::testutil::temp_dir;

#[test]
fn half_precision_runs_track_the_f32_loss_curve() {
    let root = temp_dir("precision-curve");
    let steps = 40;
    let curve = |p: Precision, name: &str| {
        let mut cfg = tiny_cfg(&root, steps);
        cfg.run.dir = root.join(name);
        cfg.train.precision = p;
        let (_, outcome) = run(cfg);
        let Outcome::Finished { val_loss, .. } = outcome else { panic!("{name}: {outcome:?}") };
        (train_losses(&root.join(name)), val_loss)
    };
    let (f32_curve, f32_val) = curve(Precision::F32, "f32");
    assert!(f32_curve[steps - 1] < f32_curve[0] - 1.0, "the f32 run learns: {f32_curve:?}");
    // Relative tolerances ~10× each type's rounding (bf16 2⁻⁹, f16 2⁻¹²), as over one step in
    // `model::precision_tests`; 40 steps of AdamW let differences grow a little further.
    for (p, name, tol) in [(Precision::Bf16, "bf16", 2e-2), (Precision::F16, "f16", 5e-3)] {
        let (c, val) = curve(p, name);
        let worst = c.iter().zip(&f32_curve).map(|(a, b)| (a - b).abs() / b).fold(0.0, f64::max);
        eprintln!("{name}: worst relative gap to the f32 curve {worst:.1e}; val {val:.4} vs {f32_val:.4}");
        assert!(worst < tol, "{name}: the loss curve leaves f32's by {worst:.1e} (tolerance {tol:e})");
        assert!((val - f32_val).abs() / f32_val < tol, "{name}: validation loss {val} vs f32 {f32_val}");
        assert!(c != f32_curve, "{name}: bit-identical to f32, so the half path did not run");
    }
}

#[test]
fn f16_overflow_is_skipped_recorded_and_the_scale_recovers() {
    let root = temp_dir("precision-overflow");
    let mut cfg = tiny_cfg(&root, 16);
    cfg.train.precision = Precision::F16;
    let mut t = start(cfg, false, &quiet).unwrap();
    // The loss's gradient w.r.t. each of the 4 × 32 tokens' logits is (p − onehot)/128, about
    // 1/128 in magnitude: scaled by 2²⁴ it is ≈ 2¹⁷, beyond f16's 65504, so the backward pass
    // overflows; the weight gradients (sums over the tokens) keep overflowing a few halvings
    // longer.
    t.state.loss_scale.scale = 2f64.powi(24);
    let before = named_values(&t.model);
    let mut p = super::progress::Progress::new(t.state.total_steps, 0, true);
    t.stop_after = Some(1);
    t.run(&mut p).unwrap();
    assert_eq!(named_values(&t.model), before, "an overflowed step leaves the weights as they were");
    t.stop_after = None;
    let outcome = t.run(&mut p).unwrap();
    assert!(matches!(outcome, Outcome::Finished { .. }), "{outcome:?}");
    let train = Metrics::read(&layout::metrics(&root.join("run"))).unwrap().train;
    let skipped: Vec<_> = train.iter().filter(|r| r.skipped.is_some()).collect();
    assert!((1..=8).contains(&skipped.len()), "a few steps overflow, then the scale fits: {skipped:?}");
    assert!(train[0].skipped.is_some(), "the first step overflows");
    // The scale halves after each overflowed step and holds otherwise (growth needs 2000 steps).
    let mut want = 2f64.powi(24);
    for r in &train {
        assert_eq!(r.loss_scale, Some(want), "step {}", r.step);
        assert!(r.loss.is_finite(), "the loss itself is finite at step {}", r.step);
        if r.skipped.is_some() {
            want /= 2.0;
        }
    }
    let why = skipped[0].skipped.as_deref().unwrap();
    assert!(why.contains("overflowed") && why.contains("loss scale"), "{why}");
    assert_eq!(t.state.loss_scale.overflows, skipped.len());
    assert!(train.last().unwrap().loss < train[0].loss, "the applied steps train");
}
