//! Batched decoding against decoding alone: every row's logits at every step, through joins,
//! leaves, padding and window slides, for every preset; cached against uncached decoding.

use super::*;
use crate::init::ParamSource;
use crate::model::{ModelConfig, Transformer};
use crate::recipe::{PRESET_NAMES, RecipeConfig};
use crate::testutil::cpu;
use burn::tensor::Device;

const VOCAB: usize = 64;

fn model(recipe: &str) -> Transformer {
    Transformer::new(&config(recipe), ParamSource::Seeded(3), &cpu()).unwrap()
}

fn config(recipe: &str) -> ModelConfig {
    ModelConfig {
        vocab_size: VOCAB,
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        // Far from uniform attention and logits: a key at the wrong position shows.
        init_std: 0.3,
        recipe: RecipeConfig::Preset(recipe.into()),
        ..Default::default()
    }
}

fn decoder<'a>(m: &'a Transformer, device: &'a Device, context: usize, cache: bool) -> Decoder<'a> {
    Decoder { model: m, device, context, cache }
}

/// A deterministic prompt of `len` tokens.
fn prompt(len: usize, seed: usize) -> Vec<u32> {
    (0..len).map(|i| ((i * 7 + seed * 13 + 5) % VOCAB) as u32).collect()
}

/// The token fed to row `row` at its `k`-th step (fixed, so batched and alone see the same).
fn fed(row: usize, k: usize) -> u32 {
    ((row * 11 + k * 5 + 1) % VOCAB) as u32
}

/// Max |a − b| over max |b|.
fn rel(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(1e-6f64, |m, v| m.max(v.abs() as f64));
    a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max) / scale
}

/// Row `row`'s logits decoded alone: after its prompt, then after each of `steps` fed tokens.
fn alone(d: &Decoder, p: &[u32], row: usize, steps: usize) -> Vec<Vec<f32>> {
    let mut rows = Rows::new();
    let mut out = rows.join(d, vec![p.to_vec()]).unwrap();
    for k in 0..steps {
        out.extend(rows.step(d, &[fed(row, k)]).unwrap());
    }
    out
}

/// A schedule of arrivals and departures: (row, step it joins, step after which it leaves,
/// prompt length). Prompts from 2 to 60 tokens, so the padding is up to 58 positions.
const SCHEDULE: [(usize, usize, usize, usize); 6] =
    [(0, 0, 9, 40), (1, 0, 4, 3), (2, 2, 14, 60), (3, 5, 14, 2), (4, 5, 11, 25), (5, 10, 14, 7)];

/// Runs [`SCHEDULE`] in one batch; returns each row's logits after its prompt and each step.
fn staggered(d: &Decoder) -> Vec<Vec<Vec<f32>>> {
    let mut got = vec![Vec::new(); SCHEDULE.len()];
    let mut rows = Rows::new();
    // The schedule row of each batch row, and how many tokens it has been fed.
    let mut live: Vec<(usize, usize)> = Vec::new();
    for step in 0..=14 {
        if !live.is_empty() {
            let tokens: Vec<u32> = live.iter().map(|&(r, k)| fed(r, k)).collect();
            for (&(r, _), l) in live.iter().zip(rows.step(d, &tokens).unwrap()) {
                got[r].push(l);
            }
            live.iter_mut().for_each(|e| e.1 += 1);
        }
        let joining: Vec<usize> = SCHEDULE.iter().filter(|s| s.1 == step).map(|s| s.0).collect();
        let prompts: Vec<Vec<u32>> = joining.iter().map(|&r| prompt(SCHEDULE[r].3, r)).collect();
        for (&r, l) in joining.iter().zip(rows.join(d, prompts).unwrap()) {
            got[r].push(l);
            live.push((r, 0));
        }
        let keep: Vec<bool> = live.iter().map(|&(r, _)| SCHEDULE[r].2 > step).collect();
        rows.retain(&keep);
        live = live.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(e, _)| e).collect();
    }
    got
}

/// Every row's logits at every step equal decoding it alone (1e-5 relative), through joins
/// of one and of two rows (prefilled apart and together), leaves from the middle and the end,
/// and padding up to 58 positions, for every preset.
#[test]
fn every_row_decodes_as_it_would_alone_through_joins_and_leaves() {
    let device = cpu();
    for name in PRESET_NAMES {
        let m = model(name);
        let d = decoder(&m, &device, 96, true);
        let got = staggered(&d);
        for (r, &(_, join, leave, len)) in SCHEDULE.iter().enumerate() {
            let want = alone(&d, &prompt(len, r), r, leave - join);
            assert_eq!(got[r].len(), want.len(), "{name} row {r}");
            for (k, (g, w)) in got[r].iter().zip(&want).enumerate() {
                let e = rel(g, w);
                assert!(e < 1e-5, "{name}: row {r} at its step {k}: logits differ from decoding it alone by {e:.2e}");
            }
        }
    }
}

/// The KV cache changes nothing: cached decoding gives the logits of re-running every row's
/// window at every step, including after a slide of the window.
#[test]
fn cached_and_uncached_decoding_give_the_same_logits() {
    let device = cpu();
    for name in ["pre", "post", "kitenorm", "bhyt", "dyt", "peri"] {
        let m = model(name);
        // Context 24: row 2 (prompt 20) slides at its fifth token.
        let prompts = vec![prompt(5, 0), prompt(1, 1), prompt(20, 2)];
        let run = |cache: bool| {
            let d = decoder(&m, &device, 24, cache);
            let mut rows = Rows::new();
            let mut out = rows.join(&d, prompts.clone()).unwrap();
            for k in 0..12 {
                out.extend(rows.step(&d, &[fed(0, k), fed(1, k), fed(2, k)]).unwrap());
            }
            out
        };
        for (a, b) in run(true).iter().zip(&run(false)) {
            assert!(rel(a, b) < 1e-5, "{name}: {:.2e}", rel(a, b));
        }
    }
}

/// A mixture of experts under a capacity factor that drops pairs in training (4 experts, top
/// 2, c = 0.25: at most ⌈0.25·2N/4⌉ pairs an expert) still decodes every row as it would alone
/// and gives the same logits with and without the KV cache: decoding forwards are dropless,
/// so a token's result never depends on its neighbours.
#[test]
fn a_moe_under_a_capacity_factor_decodes_each_row_alone_and_cached_as_uncached() {
    let device = cpu();
    let moe = "experts = 4\ntop_k = 2\nd_expert = 16\ncapacity = 0.25\nrouter = { kind = \"topk-softmax\" }";
    let cfg = ModelConfig { moe: Some(toml::from_str(moe).unwrap()), ..config("pre") };
    let m = Transformer::new(&cfg, ParamSource::Seeded(3), &device).unwrap();
    let (cached, uncached) = (decoder(&m, &device, 96, true), decoder(&m, &device, 96, false));
    let got = staggered(&cached);
    for (r, &(_, join, leave, len)) in SCHEDULE.iter().enumerate() {
        let p = prompt(len, r);
        for d in [&cached, &uncached] {
            let want = alone(d, &p, r, leave - join);
            for (k, (g, w)) in got[r].iter().zip(&want).enumerate() {
                let e = rel(g, w);
                assert!(e < 1e-5, "row {r} at its step {k} (cache {}): {e:.2e} from alone", d.cache);
            }
        }
    }
}

/// A row whose window slides in a batch continues as it would alone, while the rows beside
/// it, which have not slid, are undisturbed.
#[test]
fn a_window_slides_per_row_as_alone() {
    let device = cpu();
    let m = model("pre");
    let d = decoder(&m, &device, 16, true);
    let (long, short) = (prompt(14, 0), prompt(3, 1));
    let mut rows = Rows::new();
    let mut got = rows.join(&d, vec![long.clone(), short.clone()]).unwrap();
    let mut per_row = [vec![got.remove(0)], vec![got.remove(0)]];
    for k in 0..10 {
        for (r, l) in rows.step(&d, &[fed(0, k), fed(1, k)]).unwrap().into_iter().enumerate() {
            per_row[r].push(l);
        }
    }
    for (r, p) in [long, short].iter().enumerate() {
        let want = alone(&d, p, r, 10);
        for (k, (g, w)) in per_row[r].iter().zip(&want).enumerate() {
            assert!(rel(g, w) < 1e-5, "row {r} step {k}: {:.2e}", rel(g, w));
        }
    }
}

/// Greedy decoding of a batch gives each prompt's greedy decoding alone, and a stop token
/// ends only its own row (excluded from the output).
#[test]
fn a_batch_decodes_each_prompt_as_alone_and_stops_at_its_stop_token() {
    let device = cpu();
    let m = model("pre");
    let d = decoder(&m, &device, 32, true);
    let o = DecodeOptions { max_new: 10, stop: None };
    let prompts = vec![prompt(6, 0), prompt(2, 1), prompt(11, 2)];
    let batched = greedy(&d, &prompts, &o).unwrap();
    for (p, b) in prompts.iter().zip(&batched) {
        assert_eq!(&greedy(&d, std::slice::from_ref(p), &o).unwrap()[0], b);
    }
    let stop = batched[1][3];
    let first = batched[1].iter().position(|&t| t == stop).unwrap();
    let stopped = greedy(&d, &prompts, &DecodeOptions { stop: Some(stop), ..o }).unwrap();
    assert_eq!(stopped[1], batched[1][..first], "ends before its first stop token");
    for r in [0, 2] {
        let cut = batched[r].iter().position(|&t| t == stop).unwrap_or(batched[r].len());
        assert_eq!(stopped[r], batched[r][..cut]);
    }
}

/// Scoring a batch of sequences of different lengths in one forward gives, for every token,
/// `log_softmax` of the logits that decoding its prefix alone gives (1e-5), the arg-max flag
/// of those logits, the most likely tokens in order, and the next-token logits.
#[test]
fn scored_tokens_equal_decoding_each_prefix_alone() {
    let device = cpu();
    for name in ["pre", "bhyt", "kitenorm"] {
        let m = model(name);
        let d = decoder(&m, &device, 48, true);
        let seqs = vec![prompt(17, 0), prompt(2, 1), prompt(48, 2)];
        let scored = score::score(&d, &seqs, 3).unwrap();
        for (s, sc) in seqs.iter().zip(&scored) {
            assert_eq!(sc.tokens.len(), s.len() - 1);
            let mut rows = Rows::new();
            let mut logits = rows.join(&d, vec![s[..1].to_vec()]).unwrap().remove(0);
            for (i, tok) in sc.tokens.iter().enumerate() {
                let lp = logprobs::log_softmax(&logits);
                let want = lp[s[i + 1] as usize];
                assert!((tok.logprob - want).abs() < 1e-5 * want.abs().max(1.0), "{name}: {} vs {want}", tok.logprob);
                assert_eq!(tok.greedy, argmax(&logits) == s[i + 1] as usize, "{name} position {i}");
                let best: Vec<u32> = logprobs::top(&lp, 3).iter().map(|t| t.0).collect();
                assert_eq!(tok.top.iter().map(|t| t.0).collect::<Vec<_>>(), best);
                logits = rows.step(&d, &[s[i + 1]]).unwrap().remove(0);
            }
            assert!(rel(sc.next.as_ref().unwrap(), &logits) < 1e-5);
        }
    }
}

/// Continuations scored after their shared context run once give every token the
/// log-probability and arg-max flag that scoring the whole sequence gives (1e-5), for every
/// preset; contexts and continuations of different lengths share a group (padding both ways),
/// a one-token continuation included.
#[test]
fn shared_contexts_score_as_whole_sequences() {
    let device = cpu();
    for name in PRESET_NAMES {
        let m = model(name);
        let d = decoder(&m, &device, 40, true);
        let items = vec![
            shared::Shared { context: prompt(9, 0), continuations: vec![prompt(3, 1), prompt(1, 2), prompt(6, 3)] },
            shared::Shared { context: prompt(1, 4), continuations: vec![prompt(5, 5), prompt(2, 6)] },
            shared::Shared { context: prompt(30, 7), continuations: vec![prompt(11, 8), prompt(4, 9)] },
        ];
        let got = shared::score_shared(&d, &items).unwrap();
        for (item, scores) in items.iter().zip(&got) {
            for (c, tokens) in item.continuations.iter().zip(scores) {
                let whole: Vec<u32> = item.context.iter().chain(c).copied().collect();
                let want = &score::score(&d, &[whole], 0).unwrap()[0].tokens;
                let want = &want[want.len() - c.len()..];
                assert_eq!(tokens.len(), c.len());
                for (g, w) in tokens.iter().zip(want) {
                    assert!((g.logprob - w.logprob).abs() < 1e-5 * w.logprob.abs().max(1.0), "{name}: {g:?} vs {w:?}");
                    assert_eq!(g.greedy, w.greedy, "{name}");
                }
            }
        }
        let too_long = shared::Shared { context: prompt(38, 0), continuations: vec![prompt(4, 1)] };
        assert!(shared::score_shared(&d, &[too_long]).is_err(), "{name}: past the context + 1");
    }
}
