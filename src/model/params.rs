//! Parameters by their dotted names (`layers.0.attn.f.wq`), the same names the constructor
//! used. Used for checkpoints, PyTorch fixtures and per-parameter gradient tests.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Gradients, Tensor, TensorData};

/// Every float parameter as `(name, value)`, in module order.
pub fn named_values<M: Module>(module: &M) -> Vec<(String, TensorData)> {
    let mut v = Collector { path: Vec::new(), out: Vec::new() };
    module.visit(&mut v);
    v.out
}

/// Every float parameter's gradient as `(name, gradient)`; a parameter absent from `grads`
/// (it did not influence the loss) is reported with `None`.
pub fn named_grads<M: Module>(module: &M, grads: &Gradients) -> Vec<(String, Option<TensorData>)> {
    let mut v = GradCollector { path: Vec::new(), out: Vec::new(), grads };
    module.visit(&mut v);
    v.out
}

struct Collector {
    path: Vec<String>,
    out: Vec<(String, TensorData)>,
}

impl ModuleVisitor for Collector {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.out.push((self.path.join("."), param.val().into_data()));
    }
}

struct GradCollector<'a> {
    path: Vec<String>,
    out: Vec<(String, Option<TensorData>)>,
    grads: &'a Gradients,
}

impl ModuleVisitor for GradCollector<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let g = param.val().grad(self.grads).map(|g| g.into_data());
        self.out.push((self.path.join("."), g));
    }
}
