//! Parameters by their dotted names (`layers.0.attn.f.wq`), the names the constructor gave them
//! (see [`crate::model::base::names`]). One visitor tracks the module path; checkpoints, PyTorch fixtures,
//! the optimizer's decay groups, gradient norms and the probes all read parameters through it.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Gradients, Tensor, TensorData};

/// A parameter's name, optimizer id and shape.
#[derive(Clone, Debug)]
pub struct ParamEntry {
    pub name: String,
    pub id: ParamId,
    pub shape: Vec<usize>,
}

/// What the visitor takes from each parameter besides its entry.
trait Take {
    type Out;
    fn take<const D: usize>(&mut self, param: &Param<Tensor<D>>) -> Self::Out;
}

/// Nothing: the entry alone.
struct Nothing;
/// The value flattened to rank 1, left on the device.
struct Flat;
/// The value on the host.
struct Value;
/// The gradient on the host, `None` when the parameter has none.
struct Grad<'a>(&'a Gradients);
/// The optimizer's gradient flattened to rank 1, on the device; `None` when it has none.
struct FlatGrad<'a>(&'a GradientsParams);

impl Take for Nothing {
    type Out = ();
    fn take<const D: usize>(&mut self, _: &Param<Tensor<D>>) {}
}

impl Take for Flat {
    type Out = Tensor<1>;
    fn take<const D: usize>(&mut self, param: &Param<Tensor<D>>) -> Tensor<1> {
        flat(param.val())
    }
}

impl Take for Value {
    type Out = TensorData;
    fn take<const D: usize>(&mut self, param: &Param<Tensor<D>>) -> TensorData {
        param.val().into_data()
    }
}

impl Take for Grad<'_> {
    type Out = Option<TensorData>;
    fn take<const D: usize>(&mut self, param: &Param<Tensor<D>>) -> Option<TensorData> {
        param.val().grad(self.0).map(|t| t.into_data())
    }
}

impl Take for FlatGrad<'_> {
    type Out = Option<Tensor<1>>;
    fn take<const D: usize>(&mut self, param: &Param<Tensor<D>>) -> Option<Tensor<1>> {
        self.0.get::<D>(param.id).map(flat)
    }
}

fn flat<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

struct Walk<T: Take> {
    /// The module path; `None` for an enum's variant, which is not part of a name.
    path: Vec<Option<String>>,
    take: T,
    out: Vec<(ParamEntry, T::Out)>,
}

impl<T: Take> ModuleVisitor for Walk<T> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        // A `Norm` is an enum module: `layers.0.attn.input_norm.gain`, not `….LayerNorm.gain`.
        self.path.push((!container_type.starts_with("Enum:")).then(|| name.to_string()));
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let shape = param.val().dims().to_vec();
        let name = self.path.iter().flatten().cloned().collect::<Vec<_>>().join(".");
        let taken = self.take.take(param);
        self.out.push((ParamEntry { name, id: param.id, shape }, taken));
    }
}

fn walk<M: Module, T: Take>(module: &M, take: T) -> Vec<(ParamEntry, T::Out)> {
    let mut w = Walk { path: Vec::new(), take, out: Vec::new() };
    module.visit(&mut w);
    w.out
}

/// Every float parameter's name, optimizer id and shape, in module order.
pub fn param_table<M: Module>(module: &M) -> Vec<ParamEntry> {
    walk(module, Nothing).into_iter().map(|(e, ())| e).collect()
}

/// Every float parameter as `(name, value)`, in module order.
pub fn named_values<M: Module>(module: &M) -> Vec<(String, TensorData)> {
    walk(module, Value).into_iter().map(|(e, v)| (e.name, v)).collect()
}

/// Every float parameter's value flattened to rank 1, on its device (no transfer).
pub fn named_tensors<M: Module>(module: &M) -> Vec<(String, Tensor<1>)> {
    walk(module, Flat).into_iter().map(|(e, t)| (e.name, t)).collect()
}

/// Every float parameter's gradient as `(name, gradient)`; a parameter absent from `grads`
/// (it did not influence the loss) is reported with `None`.
pub fn named_grads<M: Module>(module: &M, grads: &Gradients) -> Vec<(String, Option<TensorData>)> {
    walk(module, Grad(grads)).into_iter().map(|(e, g)| (e.name, g)).collect()
}

/// Every float parameter's gradient in `grads` flattened to rank 1, on its device (no
/// transfer); `None` for a parameter without one.
pub fn named_flat_grads<M: Module>(module: &M, grads: &GradientsParams) -> Vec<(String, Option<Tensor<1>>)> {
    walk(module, FlatGrad(grads)).into_iter().map(|(e, g)| (e.name, g)).collect()
}

/// A model's parameter counts: all of them, and all but the token embedding and the output
/// projection (the count scaling laws are stated in; KiteNorm Fig. 4's x-axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamCounts {
    pub all: usize,
    pub non_embedding: usize,
}

/// [`ParamCounts`] from the shapes alone; buffers ([`crate::model::base::names::is_buffer`]) are not
/// parameters and are not counted.
pub fn counts<M: Module>(module: &M) -> ParamCounts {
    let size = |p: &ParamEntry| p.shape.iter().product::<usize>();
    let table: Vec<ParamEntry> =
        param_table(module).into_iter().filter(|p| !crate::model::base::names::is_buffer(&p.name)).collect();
    let all = table.iter().map(size).sum();
    let embedding = [crate::model::base::names::TOKEN_EMBEDDING, crate::model::base::names::OUTPUT_PROJECTION];
    let non_embedding = table.iter().filter(|p| !embedding.contains(&p.name.as_str())).map(size).sum();
    ParamCounts { all, non_embedding }
}

/// Parameters that take part in matrix products: all but the input embedding table (a lookup),
/// as the `6·N` of model FLOPs counts them (`device::peak`).
pub fn matmul_params<M: Module>(module: &M) -> usize {
    let size = |p: &ParamEntry| p.shape.iter().product::<usize>();
    param_table(module).iter().filter(|p| p.name != crate::model::base::names::TOKEN_EMBEDDING).map(size).sum()
}

/// Number of scalar parameters, from the shapes alone (no data leaves the device); buffers
/// are not counted.
pub fn count<M: Module>(module: &M) -> usize {
    counts(module).all
}

#[cfg(test)]
mod tests {
    use super::param_table;
    use crate::init::{ParamBuilder, ParamSource};
    use crate::norm::{BhytDenominator, Norm, NormKind};

    /// Each norm kind holds exactly the parameters of its formula (the table in
    /// [`crate::norm`]), named without the enum's variant.
    #[test]
    fn every_norm_kind_has_exactly_its_parameters_under_the_slot_name() {
        let d = 6;
        let eps = 1e-5;
        let cases: [(NormKind, &[(&str, usize)]); 9] = [
            (NormKind::LayerNorm { gain: true, shift: true, eps }, &[("gain", d), ("shift", d)]),
            (NormKind::LayerNorm { gain: true, shift: false, eps }, &[("gain", d)]),
            (NormKind::LayerNorm { gain: false, shift: false, eps }, &[]),
            (NormKind::RmsNorm { gain: true, eps }, &[("gain", d)]),
            (NormKind::ScalarLayerNorm { shift: true, eps }, &[("gain", 1), ("shift", 1)]),
            (NormKind::ScalarRmsNorm { eps }, &[("gain", 1)]),
            (NormKind::Dyt { alpha: 0.5 }, &[("gain", d), ("shift", d), ("alpha", 1)]),
            (
                NormKind::BhytStar { lambda: 1.0, p: 0.99, denominator: BhytDenominator::Std, eps },
                &[("gain", d), ("lambda", 1)],
            ),
            (NormKind::Bhyt { lambda: 1.0, p: 0.99, eps }, &[("gain", d), ("lambda", 1)]),
        ];
        for (kind, want) in cases {
            let device = crate::testutil::cpu();
            let mut b = ParamBuilder::new(&device, ParamSource::Seeded(0));
            let norm = Norm::new(kind.clone(), d, &mut b, "layers.0.attn.input_norm").unwrap();
            let got: Vec<(String, usize)> = param_table(&norm).into_iter().map(|p| (p.name, p.shape[0])).collect();
            // Walked on its own, a slot's names are its fields': no `LayerNorm.` or `Dyt.` prefix.
            let want: Vec<(String, usize)> = want.iter().map(|(n, len)| (n.to_string(), *len)).collect();
            assert_eq!(got, want, "{kind:?}");
        }
    }
}
