//! Stability probes: see inside a run, live and after the fact.
//!
//! - [`stats`]: hidden-state variance, mean/max/top-k |x|, token alignment τ, angular distance,
//!   the LayerNorm-Jacobian bound's σ
//! - [`fit`]: RMSE, R², Pearson r, Spearman ρ (BHyT's variance approximation)
//! - [`grads`]: per-sublayer and per-block gradient norms, their CV, spikes
//! - [`snapshot`]: one probe of a model on a batch
//! - [`streams`]: a residual state of n streams: per-stream variance, the mixing's row and
//!   column sums and spectral norm, the composite gain over depth
//! - [`routing`]: a mixture of experts' routing per MoE layer (load, dead experts, router entropy and logits)
//! - [`live`]: probes during training (`probes.jsonl`, TensorBoard, warnings)
//! - [`alert`]: the Normalization chapter's gradient-norm alert against the warm-up average
//! - [`updates`]: the applied update's size by layer and parameter kind (probe steps)
//! - [`offline`]: `normlab probe` on a checkpoint (`probes/*.json`)
//! - [`config`]: the `[probe]` section of a run config

pub mod alert;
pub mod config;
pub mod fit;
pub mod grads;
pub mod live;
pub mod offline;
pub mod routing;
pub mod snapshot;
pub mod stats;
pub mod streams;
pub mod updates;

pub use config::ProbeConfig;
pub use live::{LiveProbe, ProbePaths, ProbeRecord, ProbeState};
pub use snapshot::{ForwardProbe, forward_probe};

#[cfg(test)]
mod tests;
