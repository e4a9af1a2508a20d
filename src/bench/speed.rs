//! The BHyT paper's efficiency claims, measured (`normlab bench speed`): training tokens/s,
//! forward tokens/s and generation tokens/s (512-token prompts, 128/512/1024 new tokens,
//! greedy, KV cache: Table 3 / D.4 Table 8's protocol) for RMSNorm pre-norm, Peri-LN, LNS,
//! DyT, BHyT*, BHyT and RMSNorm-Approx, every one on the fused kernels where the device has
//! them (the CPU: every norm, RMSNorm-Approx's given-variance RMSNorm included).
//!
//! Rounds interleave the recipes (each round starts one recipe later) and each round holds one
//! generation trial per length, so the paper's five trials are five rounds. Every ratio is
//! taken within a round and the median over rounds reported: the machine's speed drifts
//! between rounds, not between two recipes measured seconds apart.

use super::Dims;
use super::speed_claims::{Metric, stated};
use super::step::{Case, Timing, bench_recipe, build};
use crate::decode::{DecodeOptions, Decoder, greedy};
use crate::device::Machine;
use crate::kernels::{Kernels, Precision};
use crate::stats::{mean, median, sample_std};
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// The recipes the BHyT paper compares (§4.3, Tables 3, 5, 8), in their RMSNorm forms.
pub const RECIPES: &[&str] = &["pre-rms", "peri-rms", "lns-rms", "dyt", "bhyt-star", "bhyt", "rmsnorm-approx"];

/// A median ratio within this fraction of 1 is not read as a difference.
pub const NOISE_BAND: f64 = 0.03;

/// What `normlab bench speed` measures.
#[derive(Clone, Debug)]
pub struct SpeedOptions {
    pub recipes: Vec<String>,
    pub dims: Dims,
    pub device: crate::device::DeviceName,
    pub precision: Precision,
    /// Interleaved rounds (each one generation trial per length).
    pub rounds: usize,
    /// Timed train steps and forwards per recipe and round (after one untimed each).
    pub steps: usize,
    pub prompt: usize,
    pub new_tokens: Vec<usize>,
    pub out: PathBuf,
}

/// One recipe's generation speed at one length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub new_tokens: usize,
    /// New tokens over wall time (prefill included, as the paper's serving measure), per trial.
    pub trials: Vec<f64>,
    pub mean: f64,
    pub std: f64,
}

/// One recipe across the rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipeSpeed {
    pub recipe: String,
    pub params: usize,
    /// Per round: the median of that round's timed steps.
    pub train_tok_s: Vec<f64>,
    pub fwd_tok_s: Vec<f64>,
    pub generation: Vec<Generation>,
}

/// Whether a paper's speed-up is seen here, read from the per-round ratios: a direction counts
/// only when the median is beyond [`NOISE_BAND`] and the quartile nearer 1 is on the same side
/// (three rounds in four agree), since this machine's speed drifts by ±15 % between rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The paper's direction, beyond the band, the rounds agreeing.
    Holds,
    /// The median within the band, or the rounds disagreeing: no difference resolved here.
    Unresolved,
    /// The opposite direction, beyond the band, the rounds agreeing.
    DoesNotHold,
}

/// The per-round ratios of a claim, summarised.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRatios {
    pub median: f64,
    /// Lower and upper quartiles (linear interpolation, numpy's default).
    pub quartiles: [f64; 2],
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

/// One of the paper's speed claims: `faster`'s speed over `slower`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub source: String,
    pub faster: String,
    pub slower: String,
    pub metric: Metric,
    /// The paper's ratio.
    pub paper: f64,
    /// The ratio within each round, summarised; `None` when a recipe was not measured.
    pub here: Option<RoundRatios>,
    pub verdict: Option<Verdict>,
}

/// `bench/speed.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedReport {
    pub benchmark: String,
    pub machine: Machine,
    pub device: String,
    pub precision: Precision,
    pub dims: Dims,
    pub rounds: usize,
    pub prompt: usize,
    pub recipes: Vec<RecipeSpeed>,
    /// Derived from `recipes` (and recomputed by `normlab bench speed-table`).
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// `normlab bench speed-table FILE`: a written report with its claims computed again from its measurements.
pub fn read(path: &std::path::Path) -> anyhow::Result<SpeedReport> {
    let mut r: SpeedReport = crate::io::json::read(path)?;
    r.claims = claims(&r.recipes);
    Ok(r)
}

/// Measures every recipe over the rounds, writes `o.out` after each round and returns the
/// report.
pub fn run(o: &SpeedOptions) -> anyhow::Result<SpeedReport> {
    anyhow::ensure!(o.rounds > 0 && o.steps > 0, "--trials and --round-steps must be > 0");
    anyhow::ensure!(!o.recipes.is_empty(), "no recipes to measure");
    let device = o.device.open(&super::kernel_cache::kernel_cache())?;
    crate::run::checked::check_precision(&device, &o.device.to_string(), o.precision)?;
    let mut speeds: Vec<RecipeSpeed> = o.recipes.iter().map(|r| empty(r)).collect();
    for round in 0..o.rounds {
        for i in (0..o.recipes.len()).map(|i| (i + round) % o.recipes.len()) {
            measure(o, &device, &mut speeds[i])?;
            crate::io::term::err(format_args!("round {}/{}: {}", round + 1, o.rounds, line(&speeds[i])));
        }
        crate::io::json::write(&o.out, &report(o, &speeds))?;
    }
    Ok(report(o, &speeds))
}

fn empty(recipe: &str) -> RecipeSpeed {
    RecipeSpeed {
        recipe: recipe.into(),
        params: 0,
        train_tok_s: Vec::new(),
        fwd_tok_s: Vec::new(),
        generation: Vec::new(),
    }
}

/// One round of one recipe: its train and forward rates, and one generation trial per length.
fn measure(o: &SpeedOptions, device: &Device, s: &mut RecipeSpeed) -> anyhow::Result<()> {
    let case = Case { recipe: s.recipe.clone(), kernels: Kernels::Fused, precision: o.precision };
    let timing = Timing { warmup: 1, steps: o.steps, fwd_steps: o.steps };
    let b = bench_recipe(&case, &o.dims, device, timing)?;
    s.params = b.params;
    s.train_tok_s.push(b.train_tok_s);
    s.fwd_tok_s.push(b.fwd_tok_s);
    let model = build(&case, &o.dims, device)?;
    let prompt = prompt_tokens(o.prompt, o.dims.vocab);
    let longest = o.new_tokens.iter().copied().max().unwrap_or(0);
    // The paper's serving limit (4096), or more when the longest request needs it: no row
    // ever re-windows.
    let d = Decoder { model: &model, device, context: (o.prompt + longest).max(4096), cache: true };
    for &n in &o.new_tokens {
        let t0 = Instant::now();
        let out = greedy(&d, std::slice::from_ref(&prompt), &DecodeOptions { max_new: n, stop: None })?;
        let secs = t0.elapsed().as_secs_f64();
        anyhow::ensure!(out[0].len() == n, "generation stopped after {} of {n} tokens", out[0].len());
        match s.generation.iter_mut().find(|g| g.new_tokens == n) {
            Some(g) => g.trials.push(n as f64 / secs),
            None => s.generation.push(Generation { new_tokens: n, trials: vec![n as f64 / secs], mean: 0.0, std: 0.0 }),
        }
    }
    for g in &mut s.generation {
        (g.mean, g.std) = mean_std(&g.trials);
    }
    Ok(())
}

/// A fixed prompt: `len` tokens of a 64-bit LCG below `vocab`.
fn prompt_tokens(len: usize, vocab: usize) -> Vec<u32> {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// Mean and sample standard deviation (0 for one value).
fn mean_std(v: &[f64]) -> (f64, f64) {
    (mean(v), if v.len() > 1 { sample_std(v) } else { 0.0 })
}

fn line(s: &RecipeSpeed) -> String {
    let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
    let generation: Vec<String> =
        s.generation.iter().map(|g| format!("gen{} {:.1}", g.new_tokens, last(&g.trials))).collect();
    format!(
        "{:<15} train {:>8.0} tok/s  fwd {:>8.0} tok/s  {}",
        s.recipe,
        last(&s.train_tok_s),
        last(&s.fwd_tok_s),
        generation.join("  ")
    )
}

fn report(o: &SpeedOptions, speeds: &[RecipeSpeed]) -> SpeedReport {
    let d = &o.dims;
    SpeedReport {
        benchmark: format!(
            "V={} d={} L={} H={} KV={} GLU{}; train/fwd batch {}x{}; generation: prompt {}, new {:?}, greedy, KV cache",
            d.vocab,
            d.d_model,
            d.n_layers,
            d.n_heads,
            d.n_kv_heads.unwrap_or(d.n_heads),
            d.d_ff,
            d.batch,
            d.seq,
            o.prompt,
            o.new_tokens
        ),
        machine: crate::device::machine(),
        device: o.device.to_string(),
        precision: o.precision,
        dims: o.dims,
        rounds: speeds.iter().map(|s| s.train_tok_s.len()).min().unwrap_or(0),
        prompt: o.prompt,
        recipes: speeds.to_vec(),
        claims: claims(speeds),
    }
}

/// The paper's claims with what was measured of each.
pub fn claims(speeds: &[RecipeSpeed]) -> Vec<Claim> {
    let find = |name: &str| speeds.iter().find(|s| s.recipe == name);
    stated()
        .into_iter()
        .map(|c| {
            let here = find(c.faster).zip(find(c.slower)).and_then(|(a, b)| round_ratio(a, b, c.metric));
            Claim {
                source: c.source,
                faster: c.faster.into(),
                slower: c.slower.into(),
                metric: c.metric,
                paper: c.paper,
                here,
                verdict: here.as_ref().map(|h| verdict(c.paper, h)),
            }
        })
        .collect()
}

/// The per-round values of `m` for `s`.
pub fn per_round(s: &RecipeSpeed, m: Metric) -> Vec<f64> {
    match m {
        Metric::Train => s.train_tok_s.clone(),
        Metric::Forward => s.fwd_tok_s.clone(),
        Metric::Generate(n) => {
            s.generation.iter().find(|g| g.new_tokens == n).map(|g| g.trials.clone()).unwrap_or_default()
        }
    }
}

/// `faster / slower` within each round, summarised over the rounds.
pub fn round_ratio(faster: &RecipeSpeed, slower: &RecipeSpeed, m: Metric) -> Option<RoundRatios> {
    let (a, b) = (per_round(faster, m), per_round(slower, m));
    let mut r: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let at = p * (r.len() - 1) as f64;
        let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
        r[lo] + (r[hi] - r[lo]) * (at - lo as f64)
    };
    Some(RoundRatios {
        median: median(&r),
        quartiles: [q(0.25), q(0.75)],
        min: r[0],
        max: r[r.len() - 1],
        rounds: r.len(),
    })
}

/// The verdict on a paper ratio `paper` given the ratios measured here (see [`Verdict`]).
pub fn verdict(paper: f64, here: &RoundRatios) -> Verdict {
    let [q1, q3] = here.quartiles;
    let (faster, slower) = (here.median >= 1.0 + NOISE_BAND && q1 > 1.0, here.median <= 1.0 - NOISE_BAND && q3 < 1.0);
    match (faster, slower) {
        (true, _) if paper > 1.0 => Verdict::Holds,
        (_, true) if paper < 1.0 => Verdict::Holds,
        (true, _) | (_, true) => Verdict::DoesNotHold,
        _ => Verdict::Unresolved,
    }
}

/// The report as a table: each recipe's medians, then each claim beside the paper's.
pub fn table(r: &SpeedReport) -> String {
    let mut t = format!(
        "{}\n{} on {} ({} threads), {} rounds\n",
        r.benchmark, r.device, r.machine.cpu, r.machine.threads, r.rounds
    );
    let lens: Vec<usize> =
        r.recipes.first().map(|s| s.generation.iter().map(|g| g.new_tokens).collect()).unwrap_or_default();
    t += &format!("{:<15} {:>10} {:>10}", "recipe", "train tok/s", "fwd tok/s");
    for n in &lens {
        t += &format!(" {:>14}", format!("gen{n} tok/s"));
    }
    t += "\n";
    for s in &r.recipes {
        t += &format!("{:<15} {:>10.0} {:>10.0}", s.recipe, median(&s.train_tok_s), median(&s.fwd_tok_s));
        for g in &s.generation {
            t += &format!(" {:>14}", format!("{:.1} ± {:.1}", g.mean, g.std));
        }
        t += "\n";
    }
    t += &format!("\n{:<42} {:>8} {:>8} {:>15}  verdict\n", "claim", "paper", "here", "quartiles");
    for c in &r.claims {
        let metric = match c.metric {
            Metric::Train => "train".to_string(),
            Metric::Forward => "forward".to_string(),
            Metric::Generate(n) => format!("gen{n}"),
        };
        let what = format!("{} / {} {metric}", c.faster, c.slower);
        let here = c.here.map_or("-".into(), |h| format!("{:.3}", h.median));
        let range = c.here.map_or("-".into(), |h| format!("{:.3}–{:.3}", h.quartiles[0], h.quartiles[1]));
        let v = match c.verdict {
            Some(Verdict::Holds) => "holds",
            Some(Verdict::Unresolved) => "not resolved here",
            Some(Verdict::DoesNotHold) => "does not hold here",
            None => "not measured",
        };
        t += &format!("{what:<42} {:>8.3} {here:>8} {range:>15}  {v} ({})\n", c.paper, c.source);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speed(recipe: &str, train: &[f64], gen128: &[f64]) -> RecipeSpeed {
        let (mean, std) = mean_std(gen128);
        RecipeSpeed {
            recipe: recipe.into(),
            params: 1,
            train_tok_s: train.to_vec(),
            fwd_tok_s: train.to_vec(),
            generation: vec![Generation { new_tokens: 128, trials: gen128.to_vec(), mean, std }],
        }
    }

    #[test]
    fn ratios_are_taken_within_rounds_and_their_median_reported() {
        // The machine slows by half in round 2; within each round `a` is 10 % faster.
        let a = speed("a", &[110.0, 55.0, 110.0], &[11.0, 5.5, 11.0]);
        let b = speed("b", &[100.0, 50.0, 100.0], &[10.0, 5.0, 10.0]);
        let r = round_ratio(&a, &b, Metric::Train).unwrap();
        assert!((r.median - 1.1).abs() < 1e-12 && (r.min - 1.1).abs() < 1e-12 && (r.max - 1.1).abs() < 1e-12);
        assert_eq!(r.rounds, 3);
        let g = round_ratio(&a, &b, Metric::Generate(128)).unwrap();
        assert!((g.median - 1.1).abs() < 1e-12);
        assert!(round_ratio(&a, &b, Metric::Generate(512)).is_none(), "a length not measured has no ratio");
    }

    /// Five rounds with ratios 0.9, 1.0, 1.1, 1.2, 1.3: quartiles at positions 1 and 3 of the
    /// sorted values (numpy's linear rule), 1.0 and 1.2; median 1.1.
    #[test]
    fn quartiles_by_hand() {
        let a = speed("a", &[90.0, 100.0, 110.0, 120.0, 130.0], &[1.0; 5]);
        let b = speed("b", &[100.0; 5], &[1.0; 5]);
        let r = round_ratio(&a, &b, Metric::Train).unwrap();
        assert!(
            (r.quartiles[0] - 1.0).abs() < 1e-12
                && (r.quartiles[1] - 1.2).abs() < 1e-12
                && (r.median - 1.1).abs() < 1e-12
        );
        let b4 = speed("b", &[100.0; 4], &[1.0; 4]);
        let a4 = speed("a", &[100.0, 110.0, 120.0, 130.0], &[1.0; 4]);
        let r4 = round_ratio(&a4, &b4, Metric::Train).unwrap();
        assert!((r4.quartiles[0] - 1.075).abs() < 1e-12 && (r4.quartiles[1] - 1.225).abs() < 1e-12, "{r4:?}");
    }

    fn ratios(median: f64, q1: f64, q3: f64) -> RoundRatios {
        RoundRatios { median, quartiles: [q1, q3], min: q1, max: q3, rounds: 5 }
    }

    #[test]
    fn verdicts_read_direction_band_and_agreement() {
        assert_eq!(verdict(1.077, &ratios(1.05, 1.01, 1.09)), Verdict::Holds);
        assert_eq!(verdict(1.077, &ratios(1.02, 1.01, 1.03)), Verdict::Unresolved, "within the band");
        assert_eq!(verdict(1.077, &ratios(1.09, 0.97, 1.20)), Verdict::Unresolved, "the rounds disagree");
        assert_eq!(verdict(1.077, &ratios(0.90, 0.85, 0.95)), Verdict::DoesNotHold);
        // A claim that the first recipe is slower (BHyT vs DyT in Table 8: 53.5 / 55.6).
        assert_eq!(verdict(53.5 / 55.6, &ratios(0.9, 0.85, 0.95)), Verdict::Holds);
        assert_eq!(verdict(53.5 / 55.6, &ratios(1.1, 1.05, 1.15)), Verdict::DoesNotHold);
    }

    #[test]
    fn mean_and_sample_std_by_hand() {
        let (m, s) = mean_std(&[50.5, 49.4, 51.6]);
        assert!((m - 50.5).abs() < 1e-12);
        assert!((s - 1.1).abs() < 1e-12, "{s}");
    }
}
