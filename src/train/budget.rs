//! A run's training budget: a step count, or tokens per model parameter (Chinchilla's 20).

use anyhow::{bail, ensure};

/// How long a run trains, as checked from `train.steps` / `train.tokens_per_param` (exactly
/// one of them is given).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// This many optimizer steps.
    Steps(usize),
    /// This many training tokens per model parameter.
    TokensPerParam(f64),
}

impl Budget {
    /// The budget `train.steps` and `train.tokens_per_param` give, or why they give none.
    pub fn from_fields(steps: Option<usize>, tokens_per_param: Option<f64>) -> anyhow::Result<Self> {
        match (steps, tokens_per_param) {
            (Some(_), Some(_)) => bail!(
                "give train.steps or train.tokens_per_param, not both (set the other to nothing by leaving it out)"
            ),
            (None, None) => bail!("give a budget: train.steps or train.tokens_per_param (20 is Chinchilla)"),
            (Some(s), None) => {
                ensure!(s > 0, "train.steps must be > 0");
                Ok(Budget::Steps(s))
            }
            (None, Some(r)) => {
                ensure!(r > 0.0 && r.is_finite(), "train.tokens_per_param must be > 0");
                Ok(Budget::TokensPerParam(r))
            }
        }
    }

    /// Optimizer steps for a model of `params` parameters taking `tokens_per_step` tokens a
    /// step: a ratio budget rounds up, and is at least one step.
    pub fn steps(self, params: usize, tokens_per_step: usize) -> usize {
        match self {
            Budget::Steps(s) => s,
            Budget::TokensPerParam(r) => ((r * params as f64) / tokens_per_step as f64).ceil().max(1.0) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Budget;

    #[test]
    fn a_ratio_budget_rounds_up_to_whole_steps() {
        // 20 tokens/param × 1000 params = 20 000 tokens; 128 tokens a step: 156.25 → 157.
        assert_eq!(Budget::TokensPerParam(20.0).steps(1000, 128), 157);
        assert_eq!(Budget::TokensPerParam(1e-9).steps(1000, 128), 1, "at least one step");
        assert_eq!(Budget::Steps(7).steps(1000, 128), 7);
    }

    #[test]
    fn exactly_one_positive_budget_is_accepted() {
        assert_eq!(Budget::from_fields(Some(5), None).unwrap(), Budget::Steps(5));
        assert_eq!(Budget::from_fields(None, Some(20.0)).unwrap(), Budget::TokensPerParam(20.0));
        for (s, r) in [(Some(5), Some(20.0)), (None, None), (Some(0), None), (None, Some(0.0)), (None, Some(f64::NAN))]
        {
            assert!(Budget::from_fields(s, r).is_err(), "{s:?} {r:?}");
        }
    }
}
