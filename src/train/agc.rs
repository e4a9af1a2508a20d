//! AGC, adaptive gradient clipping ("High-Performance Large-Scale Image Recognition Without
//! Normalization", NFNets; the reference code's `unitwise_norm` and clipping): each unit's
//! gradient `G_u` is kept within `λ` times its weight's norm,
//!
//! `G_u ← G_u · (λ·max(‖W_u‖, ε) / max(‖G_u‖, 10⁻⁶))` when `‖G_u‖ > λ·max(‖W_u‖, ε)`.
//!
//! A unit is one output neuron of a linear weight (a column of the `[d_in, d_out]` layout, the
//! NFNets code's axis 0), one token's row of the embedding table (timm's rule on torch's
//! `[num, dim]` layout), or a whole vector (gains, shifts, gates, scalars). The output projection
//! is left unclipped under `skip_output`, as NFNets leaves its classifier.

use crate::model::base::names::{OUTPUT_PROJECTION, TOKEN_EMBEDDING};
use crate::model::base::params::{ParamEntry, named_tensors, param_table};
use crate::run::clip_rule::AgcSettings;
use burn::module::{Module, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// The units a parameter is clipped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Each column (a linear weight's output neuron).
    Columns,
    /// Each row (a token's embedding).
    Rows,
    /// The whole tensor (a vector or scalar).
    Whole,
}

impl Unit {
    /// The unit of `p` under `settings`; `None` for the output projection under `skip_output`.
    pub fn of(p: &ParamEntry, settings: &AgcSettings) -> Option<Self> {
        match p.shape.len() {
            0 | 1 => Some(Self::Whole),
            _ if p.name == OUTPUT_PROJECTION && settings.skip_output => None,
            _ if p.name == TOKEN_EMBEDDING => Some(Self::Rows),
            _ => Some(Self::Columns),
        }
    }
}

/// How many units a step clipped, of how many.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AgcCount {
    pub clipped: usize,
    pub units: usize,
}

/// Every parameter's gradient in `grads` clipped unit by unit under `settings`, and how many
/// units were clipped (one read from the device).
pub fn clip_units<M: Module>(
    model: &M,
    mut grads: GradientsParams,
    settings: &AgcSettings,
) -> anyhow::Result<(GradientsParams, AgcCount)> {
    let mut clipped: Vec<Tensor<1>> = Vec::new();
    let mut units = 0usize;
    for (p, (_, value)) in param_table(model).iter().zip(named_tensors(model)) {
        let Some(unit) = Unit::of(p, settings) else { continue };
        let value = value.without_autodiff();
        let count = match p.shape[..] {
            [] | [_] => clip_param::<1>(&mut grads, p.id, value, [value_len(p)], unit, settings),
            [rows, cols] => clip_param::<2>(&mut grads, p.id, value, [rows, cols], unit, settings),
            _ => anyhow::bail!("AGC has no unit for the {}-D parameter {}", p.shape.len(), p.name),
        };
        if let Some(c) = count {
            units += unit_count(&p.shape, unit);
            clipped.push(c);
        }
    }
    let clipped = match clipped.is_empty() {
        true => 0,
        false => Tensor::cat(clipped, 0).sum().into_scalar::<f32>().round() as usize,
    };
    Ok((grads, AgcCount { clipped, units }))
}

fn value_len(p: &ParamEntry) -> usize {
    p.shape.iter().product()
}

fn unit_count(shape: &[usize], unit: Unit) -> usize {
    match unit {
        Unit::Whole => 1,
        Unit::Rows => shape[0],
        Unit::Columns => shape[1],
    }
}

/// Clips the gradient of parameter `id` (value `value`, flattened, of shape `dims`) and returns
/// how many of its units were clipped (`[1]`), or `None` when it has no gradient. Parameters and
/// gradients are in the master type (f32; f64 in the tests).
fn clip_param<const D: usize>(
    grads: &mut GradientsParams,
    id: ParamId,
    value: Tensor<1>,
    dims: [usize; D],
    unit: Unit,
    s: &AgcSettings,
) -> Option<Tensor<1>> {
    let g: Tensor<D> = grads.remove::<D>(id)?;
    let max_norm = unit_norms(value.reshape(dims), unit).clamp_min(s.eps).mul_scalar(s.clipping);
    let g_norm = unit_norms(g.clone(), unit);
    let trigger = g_norm.clone().greater(max_norm.clone());
    let factor = max_norm.ones_like().mask_where(trigger.clone(), max_norm.div(g_norm.clamp_min(1e-6)));
    grads.register(id, g.mul(factor));
    Some(trigger.float().sum().reshape([1]))
}

/// The L2 norm of each unit of `t`, kept in `t`'s rank (1 along the reduced axes).
fn unit_norms<const D: usize>(t: Tensor<D>, unit: Unit) -> Tensor<D> {
    let sq = t.square();
    let summed = match unit {
        Unit::Columns => sq.sum_dim(0),
        Unit::Rows => sq.sum_dim(D - 1),
        Unit::Whole => (0..D).fold(sq, |t, d| t.sum_dim(d)),
    };
    summed.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{f64_tensor, values};
    use serde_json::Value;

    fn floats(v: &Value) -> Vec<f64> {
        v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
    }

    /// One fixture case through `clip_param`: the clipped gradient and the count of clipped units.
    fn run_case(case: &Value) -> (Vec<f64>, f64) {
        let shape: Vec<usize> =
            case["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        let settings = AgcSettings {
            clipping: case["clipping"].as_f64().unwrap(),
            eps: case["eps"].as_f64().unwrap(),
            skip_output: true,
        };
        let unit = match case["kind"].as_str().unwrap() {
            "columns" => Unit::Columns,
            "rows" => Unit::Rows,
            _ => Unit::Whole,
        };
        let (param, grad) = (floats(&case["param"]), floats(&case["grad"]));
        let value = f64_tensor(&param, [param.len()], false);
        let id = ParamId::new();
        let mut grads = GradientsParams::new();
        let count = match shape[..] {
            [n] => {
                grads.register(id, f64_tensor(&grad, [n], false));
                let c = clip_param::<1>(&mut grads, id, value, [n], unit, &settings);
                (values(grads.remove::<1>(id).unwrap()), c)
            }
            [r, c] => {
                grads.register(id, f64_tensor(&grad, [r, c], false));
                let n = clip_param::<2>(&mut grads, id, value, [r, c], unit, &settings);
                (values(grads.remove::<2>(id).unwrap()), n)
            }
            _ => unreachable!("the fixture has 1-D and 2-D cases"),
        };
        (count.0, values(count.1.unwrap())[0])
    }

    /// Every case of the independent reference (the NFNets code's and timm's AGC, re-run in numpy
    /// by someone who had not read this code: tools/reference_clipping.py): linear weights by
    /// output column, embeddings by row, vectors whole; units clipped and not, weights below ε,
    /// zero gradients, λ = 0.01 and 0.1.
    #[test]
    fn agc_follows_the_nfnets_reference_unit_by_unit() {
        let path = format!("{}/tests/fixtures/clipping/agc.json", env!("CARGO_MANIFEST_DIR"));
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for case in &cases {
            let name = case["name"].as_str().unwrap();
            let (got, clipped) = run_case(case);
            let want = floats(&case["expected"]);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-12 * w.abs().max(1e-12), "{name}[{i}]: {g} vs the reference's {w}");
            }
            let want_clipped = case["unit_clipped"].as_array().unwrap().iter().filter(|c| c.as_bool().unwrap()).count();
            assert_eq!(clipped, want_clipped as f64, "{name}: units clipped");
        }
    }

    /// The units of each kind of parameter: the output projection is left out under `skip_output`.
    #[test]
    fn agc_units_by_parameter_kind() {
        let entry = |name: &str, shape: Vec<usize>| ParamEntry { name: name.into(), id: ParamId::new(), shape };
        let on = AgcSettings::default();
        let off = AgcSettings { skip_output: false, ..on };
        assert_eq!(Unit::of(&entry("layers.0.attn.f.wq", vec![8, 8]), &on), Some(Unit::Columns));
        assert_eq!(Unit::of(&entry(TOKEN_EMBEDDING, vec![50, 8]), &on), Some(Unit::Rows));
        assert_eq!(Unit::of(&entry("layers.0.attn.n_in.gamma", vec![8]), &on), Some(Unit::Whole));
        assert_eq!(Unit::of(&entry(OUTPUT_PROJECTION, vec![8, 50]), &on), None);
        assert_eq!(Unit::of(&entry(OUTPUT_PROJECTION, vec![8, 50]), &off), Some(Unit::Columns));
    }
}
