//! Parameters by their dotted names (`layers.0.attn.f.wq`), the same names the constructor
//! used. Used for checkpoints, PyTorch fixtures and per-parameter gradient tests.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Gradients, Tensor, TensorData};

/// Every float parameter as `(name, value)`, in module order.
pub fn named_values<M: Module>(module: &M) -> Vec<(String, TensorData)> {
    visit_named(module, None).into_iter().map(|(n, v)| (n, v.expect("a parameter always has a value"))).collect()
}

/// Every float parameter's gradient as `(name, gradient)`; a parameter absent from `grads`
/// (it did not influence the loss) is reported with `None`.
pub fn named_grads<M: Module>(module: &M, grads: &Gradients) -> Vec<(String, Option<TensorData>)> {
    visit_named(module, Some(grads))
}

/// With `grads`: each parameter's gradient; without: its value.
fn visit_named<M: Module>(module: &M, grads: Option<&Gradients>) -> Vec<(String, Option<TensorData>)> {
    let mut v = Named { path: Vec::new(), out: Vec::new(), grads };
    module.visit(&mut v);
    v.out
}

struct Named<'a> {
    path: Vec<String>,
    out: Vec<(String, Option<TensorData>)>,
    grads: Option<&'a Gradients>,
}

impl ModuleVisitor for Named<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let data = match self.grads {
            Some(g) => param.val().grad(g).map(|t| t.into_data()),
            None => Some(param.val().into_data()),
        };
        self.out.push((self.path.join("."), data));
    }
}

/// Every float parameter's name, optimizer id and shape, in module order.
pub fn param_table<M: Module>(module: &M) -> Vec<ParamEntry> {
    let mut v = Table { path: Vec::new(), out: Vec::new() };
    module.visit(&mut v);
    v.out
}

#[derive(Clone, Debug)]
pub struct ParamEntry {
    pub name: String,
    pub id: burn::module::ParamId,
    pub shape: Vec<usize>,
}

struct Table {
    path: Vec<String>,
    out: Vec<ParamEntry>,
}

impl ModuleVisitor for Table {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.out.push(ParamEntry { name: self.path.join("."), id: param.id, shape: param.val().dims().to_vec() });
    }
}

/// Number of scalar parameters, from the shapes alone (no data leaves the device).
pub fn count<M: Module>(module: &M) -> usize {
    param_table(module).iter().map(|p| p.shape.iter().product::<usize>()).sum()
}
