//! A MoE model's routing over one optimizer step, per MoE layer: the load summed over the
//! step's micro-batches and ranks (what DeepSeek V3's bias update reads, so every rank moves
//! its biases alike), the router's mean entropy and its largest logit.

use crate::dist::Ranks;
use crate::model::moe_balance::RouterRecord;
use crate::stats::coefficient_of_variation;

/// One MoE layer's routing over a step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouterStep {
    /// Assignments per expert, `[E]`.
    pub load: Vec<f64>,
    /// The mean over the step's micro-batches of the router's mean entropy (nats).
    pub entropy: f64,
    /// The largest `|logit|` of the step.
    pub logit_max: f64,
    /// The (token, slot) pairs dropped over the experts' capacity.
    pub dropped: f64,
}

impl RouterStep {
    /// Adds one micro-batch's records (one per MoE layer) to `steps` (empty before the first).
    pub fn add(steps: &mut Vec<RouterStep>, records: &[RouterRecord]) {
        if steps.is_empty() {
            steps.resize(records.len(), RouterStep::default());
        }
        for (s, r) in steps.iter_mut().zip(records) {
            if s.load.is_empty() {
                s.load = vec![0.0; r.load.len()];
            }
            s.load.iter_mut().zip(&r.load).for_each(|(a, b)| *a += b);
            s.entropy += r.entropy;
            s.logit_max = s.logit_max.max(r.logit_max);
            s.dropped += r.dropped as f64;
        }
    }

    /// The sums of this rank's `micro_batches` turned into the step's: loads summed over the
    /// ranks, entropies averaged over all micro-batches, maxima over the ranks.
    pub fn over_ranks(steps: &mut [RouterStep], micro_batches: usize, ranks: Ranks) {
        if steps.is_empty() {
            return;
        }
        let mut sums: Vec<f64> =
            steps.iter().flat_map(|s| s.load.iter().copied().chain([s.entropy, s.dropped])).collect();
        ranks.sum_f64(&mut sums);
        let mut maxima: Vec<f64> = steps.iter().map(|s| s.logit_max).collect();
        ranks.max_f64(&mut maxima);
        let mut sums = sums.into_iter();
        for (s, max) in steps.iter_mut().zip(maxima) {
            s.load = sums.by_ref().take(s.load.len()).collect();
            s.entropy = sums.next().unwrap_or(0.0) / micro_batches.max(1) as f64;
            s.dropped = sums.next().unwrap_or(0.0);
            s.logit_max = max;
        }
    }

    /// The load's coefficient of variation over the experts (0: even).
    pub fn load_cv(&self) -> f64 {
        coefficient_of_variation(&self.load)
    }

    /// Experts that received no token this step.
    pub fn dead(&self) -> usize {
        self.load.iter().filter(|&&c| c == 0.0).count()
    }
}
