//! The sweep report's ranked table (one row per method: LR*, mean ± sd over seeds, best and
//! worst, steps to target, each task's score), the notes under it, and the setup line above
//! it.

use super::data::RunData;
use crate::sweep::aggregate::MethodSummary;
use crate::sweep::results::RunResult;
use crate::sweep::significance::{ALPHA, AdjacentPair, adjacent_pairs, p_text};

/// The per-method results table in markdown, ranked by the mean over seeds at LR*; a column
/// per downstream task where the runs were evaluated.
pub fn summary_table(ms: &[MethodSummary]) -> String {
    let o = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "–".into());
    let tasks = task_keys(ms);
    let pairs = adjacent_pairs(ms);
    let rollbacks = ms.iter().any(|m| m.rollbacks > 0);
    let mut t = String::from(
        "| rank | recipe | LR* | mean | sd | n | vs next | best | worst | best ppl | diverged / runs | SpikeScore | \
            steps to target |",
    );
    t += if rollbacks { " rollbacks |" } else { "" };
    tasks.iter().for_each(|(task, metric)| t += &format!(" {task} {metric} |"));
    let columns = 13 + usize::from(rollbacks) + tasks.len();
    t += &format!("\n|{}\n", "---|".repeat(columns));
    for (i, m) in ms.iter().enumerate() {
        let edge = if m.lr_edge.is_some() { " †" } else { "" };
        t += &format!(
            "| {} | {} | {}{edge} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
            i + 1,
            m.method,
            m.lr_star.map(|l| format!("{l:e}")).unwrap_or_else(|| "–".into()),
            o(m.mean),
            o(m.std),
            m.seeds_at_lr_star,
            versus_next(&pairs, &m.method),
            o(m.best),
            o(m.worst),
            m.best.map(|b| format!("{:.2}", b.exp())).unwrap_or_else(|| "–".into()),
            m.diverged,
            m.runs,
            o(m.spike_score),
            m.steps_to_target.map(|s| s.to_string()).unwrap_or_else(|| "–".into()),
        );
        if rollbacks {
            t += &format!(" {} |", m.rollbacks);
        }
        for (task, metric) in &tasks {
            let s = crate::tasks::evaluate::find_score(&m.tasks, task, metric);
            t += &format!(" {} |", s.map(score_cell).unwrap_or_else(|| "–".into()));
        }
        t += "\n";
    }
    t
}

/// The "vs next" cell of `method`: Welch's p against the recipe ranked below it, `✓` when the
/// two are separated beyond noise, `tie` when they are within it.
fn versus_next(pairs: &[AdjacentPair], method: &str) -> String {
    match pairs.iter().find(|p| p.ahead == method).map(|p| (&p.loss, p.loss.p)) {
        Some((l, Some(p))) if l.separated() => format!("{} ✓", p_text(p)),
        Some((_, Some(p))) => format!("{} tie", p_text(p)),
        Some((_, None)) => "n < 2".into(),
        None => "–".into(),
    }
}

/// `0.463 ± 0.029`.
pub fn score_cell(s: &crate::tasks::TaskScore) -> String {
    match s.stderr {
        Some(se) => format!("{:.3} ± {se:.3}", s.value),
        None => format!("{:.3}", s.value),
    }
}

/// Every (task, metric) of the summaries, in order of first appearance.
pub fn task_keys(ms: &[MethodSummary]) -> Vec<(String, String)> {
    crate::tasks::evaluate::score_keys(ms.iter().flat_map(|m| &m.tasks))
}

/// What the table's columns mean, and its marks.
pub fn table_notes(ms: &[MethodSummary]) -> Vec<String> {
    let mut n = vec![
        "Ranked by the mean final validation loss over the n seeds at LR* (the grid's best rate); sd is the sample \
            standard deviation (n − 1), – with one seed; best and worst are the extreme seeds. Diverged runs are \
            excluded from every value and counted."
            .to_string(),
    ];
    n.push(format!(
        "vs next: Welch's t-test of this recipe's seeds against the next one's (two-sided p): ✓ beyond noise (p < \
            {ALPHA}), tie within it; n < 2 where a recipe has a single seed. With 2 seeds a gap must be large \
            against the seeds' spread to separate (the t quantile for one degree of freedom is 12.7)."
    ));
    n.push(
        "SpikeScore: OLMo-core's share of steps whose training loss or gradient norm exceeds the mean of the previous \
            128 steps by 6 standard deviations, at the end of each run (from step 128 on; – before), averaged over \
            the seeds at LR*."
            .into(),
    );
    if ms.iter().any(|m| m.rollbacks > 0) {
        n.push("rollbacks: the times the method's runs went back to a checkpoint after repeated spikes ([train.rollback]).".into());
    }
    if ms.iter().any(|m| m.seeds_at_lr_star == 2) {
        n.push("With n = 2, sd = |a − b| / √2: read it as the spread of two runs, not as an error bar.".into());
    }
    if ms.iter().any(|m| m.lr_edge.is_some()) {
        n.push("† LR* is the lowest or highest rate tried: the recipe's optimum may lie outside the grid.".into());
    }
    if !task_keys(ms).is_empty() {
        n.push(
            "Downstream tasks (after the loss columns): each task's headline at the end of training, averaged over the \
                seeds at LR*, ± its standard error over the task's items (docs/evaluation.md)."
                .into(),
        );
    }
    n
}

/// ` (d = 64, 16 layers = 32 sublayers, 4 heads, SiLU-GLU FFN); batch 16 × 64 tokens`.
fn shape_text(c: &crate::run::RunConfig) -> String {
    let m = &c.model;
    let ffn = match &m.moe {
        Some(moe) => format!("MoE {} × {} top-{}", moe.experts, m.ffn.info().label, moe.top_k),
        None => m.ffn.info().label.to_string(),
    };
    let layers = m.n_layers;
    let heads = m.n_heads;
    let batch = c.train.batch_size;
    let seq = c.train.seq_len;
    format!(
        " (d = {}, {layers} layers = {} sublayers, {heads} heads, {ffn} FFN); batch {batch} × {seq} tokens",
        m.d_model,
        2 * layers
    )
}

/// The study's setup in one paragraph: model, budget, data, grid, seeds, target and the
/// unigram loss, read from a best run's config and `run.json`.
pub fn setup_text(
    best_runs: &[RunData],
    ms: &[MethodSummary],
    rows: &[RunResult],
    target: Option<f64>,
) -> Option<String> {
    let r = best_runs.iter().find(|r| r.info.is_some())?;
    let info = r.info.as_ref()?;
    let tokens = info.total_steps * info.tokens_per_step;
    let mut lrs: Vec<f64> = ms.iter().flat_map(|m| m.curve.iter().map(|p| p.lr)).collect();
    lrs.sort_by(f64::total_cmp);
    lrs.dedup();
    let lrs: Vec<String> = lrs.iter().map(|l| format!("{l:e}")).collect();
    let mut seeds: Vec<u64> = best_runs.iter().filter_map(|r| r.info.as_ref().map(|i| i.seed)).collect();
    seeds.extend(rows.iter().filter_map(|r| r.axes.get("train.seed").and_then(|v| v.as_u64())));
    seeds.sort();
    seeds.dedup();
    let seeds: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
    // The model's shape and the batch come from the config, when the run kept one.
    let shape = r.config.as_ref().map(shape_text);
    let mut s = format!(
        "Setup: {} parameters{}; {} steps × {} tokens = {tokens} training tokens ({:.1} per parameter); corpus {} \
            ({} tokenizer, {} training / {} validation tokens); learning rates {}; seeds {}",
        info.params,
        shape.unwrap_or_default(),
        info.total_steps,
        info.tokens_per_step,
        info.tokens_per_param,
        info.data.corpus,
        info.data.tokenizer,
        info.data.train_tokens,
        info.data.val_tokens,
        lrs.join(", "),
        seeds.join(", "),
    );
    if let Some(t) = target {
        s += &format!("; target loss {t} (steps to target in the table)");
    }
    if let Some(u) = info.unigram_loss {
        s += &format!("; the unigram loss (token frequencies alone) is {u:.3}");
    }
    Some(s + ".")
}
