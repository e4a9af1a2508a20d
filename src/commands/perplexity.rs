//! `normlab perplexity`: the loss and perplexity of a saved run on its fixed validation windows
//! or on a text (`--data`); a pairs run on its own pairs also decodes and scores its test sets.

use super::log;
use super::windows::eval_windows;
use crate::dist::Ranks;
use crate::model::Transformer;
use crate::run::pairs_eval::PairsEval;
use crate::run::{CheckedConfig, SavedRun, checkpoint};
use crate::train::eval::Evaluated;
use burn::tensor::Device;
use std::path::{Path, PathBuf};

/// What `normlab perplexity` measured.
pub struct Perplexity {
    pub weights: PathBuf,
    pub source: String,
    pub val_loss: f64,
    pub val_ppl: f64,
    pub tokens: usize,
    pub windows: usize,
    pub seq_len: usize,
    /// Pairs runs on their own data: the test sets decoded and scored.
    pub pairs: Option<PairsEval>,
}

pub fn perplexity(path: &Path, data: Option<PathBuf>, windows: Option<usize>) -> anyhow::Result<()> {
    let e = measure(path, data.as_deref(), windows, &log)?;
    outln!("{}: {}", e.weights.display(), e.source);
    outln!(
        "val_loss {:.4}  val_ppl {:.3}  ({} tokens in {} windows of {})",
        e.val_loss,
        e.val_ppl,
        e.tokens,
        e.windows,
        e.seq_len
    );
    if let Some(p) = &e.pairs {
        print_pairs(p);
    }
    Ok(())
}

fn print_pairs(p: &PairsEval) {
    for s in &p.sets {
        outln!(
            "{}: exact match {:.3}, token F1 {:.3} ({} pairs)",
            s.name,
            s.overall.exact_match,
            s.overall.token_f1,
            s.overall.n
        );
        for (c, sc) in &s.categories {
            outln!("  {c:<12} EM {:.3}  F1 {:.3}  (n = {})", sc.exact_match, sc.token_f1, sc.n);
        }
    }
    outln!(
        "decoding: {} tokens in {:.2} s ({:.0} tokens/s, KV cache on)",
        p.generated_tokens,
        p.decode_s,
        p.generated_tokens as f64 / p.decode_s
    );
}

/// Validation loss and perplexity of a saved run on its validation windows or on `data`.
pub fn measure(
    path: &Path,
    data: Option<&Path>,
    limit: Option<usize>,
    log: &dyn Fn(&str),
) -> anyhow::Result<Perplexity> {
    let saved = SavedRun::open(path)?;
    let device = saved.cfg.open_device()?;
    let model = saved.model(&device)?;
    let SavedRun { weights, cfg, tokenizer, .. } = saved;
    let seq_len = cfg.train.seq_len;
    if matches!(cfg.data.task, crate::data::Task::Pairs | crate::data::Task::Chat) && data.is_none() {
        return measure_examples(&model, &cfg, tokenizer, weights, &device, log);
    }
    let w = eval_windows(&cfg, tokenizer, data, limit, log)?;
    let on = Evaluated { model: &model, device: &device, ranks: Ranks::single() };
    let v = on.windows(&w.tokens, &w.starts, seq_len, cfg.micro_batch_size());
    Ok(Perplexity {
        weights,
        source: w.source,
        val_loss: v.loss,
        val_ppl: v.perplexity,
        tokens: v.tokens,
        windows: w.starts.len(),
        seq_len,
        pairs: None,
    })
}

/// A pairs run or a run trained on conversations, on its own held-out examples: the loss over the
/// learned tokens only (a pair's target, the assistant's turns), as its validation loss counts
/// them (scoring every token would mix in the prompts it never learned to predict); for pairs,
/// exact match and F1 on every test set too.
fn measure_examples(
    model: &Transformer,
    cfg: &CheckedConfig,
    tokenizer: crate::data::Tokenizer,
    weights: PathBuf,
    device: &Device,
    log: &dyn Fn(&str),
) -> anyhow::Result<Perplexity> {
    let seq_len = cfg.train.seq_len;
    let mut ds = crate::data::Dataset::prepare(&cfg.data, Some(tokenizer), log)?;
    ds.fit_examples(seq_len, log)?;
    let p = ds.examples.as_ref().expect("a pairs or chat config prepares examples");
    let v = Evaluated { model, device, ranks: Ranks::single() }.pairs(&p.val, p.pad, cfg.micro_batch_size());
    let (source, pairs) = if cfg.data.task == crate::data::Task::Pairs {
        let step = checkpoint::weights_step(&weights).unwrap_or(0);
        let scores = crate::train::pairs_eval::score_sets(model, &ds.tokenizer, &p.tests, seq_len, step, device)?;
        (format!("the run's {} validation pairs (target tokens only)", p.val.len()), Some(scores))
    } else {
        let what = "held-out conversations (the assistant's tokens only, as its validation loss)";
        (format!("the run's {} {what}", p.val.len()), None)
    };
    Ok(Perplexity {
        weights,
        source,
        val_loss: v.loss,
        val_ppl: v.perplexity,
        tokens: v.tokens,
        windows: p.val.len(),
        seq_len,
        pairs,
    })
}
