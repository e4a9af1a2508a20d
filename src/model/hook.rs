//! One after-step hook of a model ([`crate::model::hooks`] applies them in order): the recipe's
//! own, or a MoE model's bias balancing.

use crate::recipe::AfterStep;

/// One after-step hook.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Hook {
    /// One of the recipe's hooks.
    Recipe(AfterStep),
    /// DeepSeek V3's auxiliary-loss-free balancing with step γ.
    BalanceExperts { gamma: f64 },
}
