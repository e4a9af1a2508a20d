//! Aggregation against hand-built result rows (diverged ones included), grid expansion and
//! the reseed stage.

use super::aggregate::{LrEdge, summarize};
use super::config::{Stage, Sweep};
use super::results::{RunResult, RunState};
use std::collections::BTreeMap;
use std::path::Path;

fn row(name: &str, stage: &str, recipe: &str, lr: f64, seed: i64, val: Option<f64>) -> RunResult {
    let mut axes = BTreeMap::new();
    axes.insert("model.recipe".to_string(), serde_json::json!(recipe));
    axes.insert("optim.lr".to_string(), serde_json::json!(lr));
    axes.insert("train.seed".to_string(), serde_json::json!(seed));
    RunResult {
        name: name.into(),
        stage: if stage == "grid" { Stage::Grid } else { Stage::Reseed },
        axes,
        state: if val.is_some() { RunState::Finished } else { RunState::Diverged },
        diverged_step: val.is_none().then_some(17),
        diverged_reason: val.is_none().then(|| "loss is NaN".into()),
        final_val_loss: val,
        final_train_loss: None,
        best_val_loss: val,
        final_val_ppl: val.map(f64::exp),
        best_val_ppl: val.map(f64::exp),
        steps: 100,
        wall_s: 10.0,
        tokens_per_s: Some(1000.0),
        steps_to_target: val.filter(|v| *v < 2.5).map(|_| 60),
        time_to_target_s: val.filter(|v| *v < 2.5).map(|_| 6.0),
        max_abs_last_layer: None,
        grad_spikes: None,
        spike_score: None,
        rollbacks: 0,
        grad_cv: None,
        final_tau: None,
        routing: Default::default(),
        failure: None,
        tasks: Vec::new(),
    }
}

#[test]
fn aggregation_by_hand() {
    let rows = vec![
        row("a1", "grid", "post", 1e-3, 7, Some(2.60)),
        row("a2", "grid", "post", 3e-3, 7, Some(2.50)),
        row("a3", "grid", "post", 1e-2, 7, None), // diverged
        row("b1", "grid", "peri", 1e-3, 7, Some(2.55)),
        row("b2", "grid", "peri", 3e-3, 7, Some(2.45)),
        row("b3", "grid", "peri", 1e-2, 7, Some(2.40)),
        row("b4", "reseed", "peri", 1e-2, 8, Some(2.44)),
        row("b5", "reseed", "peri", 1e-2, 9, None), // diverged reseed: excluded, counted
        row("a4", "reseed", "post", 3e-3, 8, Some(2.56)),
        row("c1", "grid", "keel", 1e-3, 7, None),
    ];
    let s = summarize(&rows, &Default::default(), "optim.lr");
    let names: Vec<&str> = s.iter().map(|m| m.method.as_str()).collect();
    assert_eq!(names, ["peri", "post", "keel"], "sorted by mean; all-diverged last");
    let peri = &s[0];
    assert_eq!(peri.lr_star, Some(1e-2));
    assert_eq!((peri.best, peri.worst), (Some(2.40), Some(2.44)));
    assert!((peri.mean.unwrap() - 2.42).abs() < 1e-12);
    // Sample std of 2.40, 2.44: √((0.02² + 0.02²) / 1) = 0.02·√2.
    assert!((peri.std.unwrap() - 0.02 * 2f64.sqrt()).abs() < 1e-12, "{:?}", peri.std);
    assert_eq!(peri.lr_edge, Some(LrEdge::Highest), "1e-2 is the top of peri's grid");
    assert_eq!((peri.seeds_at_lr_star, peri.diverged, peri.runs), (2, 1, 5));
    assert_eq!(peri.diverged_runs, ["b5 (step 17)"]);
    assert_eq!(peri.steps_to_target, Some(60));
    let post = &s[1];
    assert_eq!(post.lr_star, Some(3e-3), "the diverged 1e-2 run cannot be LR*");
    assert_eq!(post.lr_edge, None, "3e-3 lies inside the grid 1e-3..1e-2");
    assert_eq!((post.best, post.worst), (Some(2.50), Some(2.56)));
    assert_eq!(
        post.curve.iter().map(|p| (p.lr, p.val_loss, p.diverged)).collect::<Vec<_>>(),
        [(1e-3, Some(2.60), 0), (3e-3, Some(2.50), 0), (1e-2, None, 1)]
    );
    let keel = &s[2];
    assert_eq!((keel.lr_star, keel.best, keel.diverged), (None, None, 1));
}

fn acc(value: f64, stderr: f64) -> Vec<crate::tasks::TaskScore> {
    let s = crate::tasks::TaskScore {
        task: "t".into(),
        metric: "acc".into(),
        value,
        stderr: Some(stderr),
        chance: Some(0.25),
    };
    vec![s]
}

/// Task headlines follow the runs: at LR* the mean over seeds with the seeds' average standard
/// error; per rate the run that gave the rate its loss; in the CSV a value and an error column.
#[test]
fn task_scores_aggregate_by_hand() {
    let mut rows = vec![
        row("a1", "grid", "pre", 1e-3, 7, Some(2.60)),
        row("a2", "grid", "pre", 1e-2, 7, Some(2.40)),
        row("a3", "reseed", "pre", 1e-2, 8, Some(2.44)),
    ];
    for (r, (v, se)) in rows.iter_mut().zip([(0.30, 0.04), (0.50, 0.03), (0.40, 0.05)]) {
        r.tasks = acc(v, se);
    }
    let s = summarize(&rows, &Default::default(), "optim.lr");
    let t = &s[0].tasks[0];
    // Seeds at LR* = 1e-2: (0.50 + 0.40) / 2 = 0.45, errors (0.03 + 0.05) / 2 = 0.04.
    assert!((t.value - 0.45).abs() < 1e-12 && (t.stderr.unwrap() - 0.04).abs() < 1e-12, "{t:?}");
    let at_rates: Vec<f64> = s[0].curve.iter().map(|p| p.tasks[0].value).collect();
    assert_eq!(at_rates, [0.30, 0.50], "the grid run of each rate");
    let csv = String::from_utf8(crate::sweep::results::to_csv(&rows).unwrap()).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",t.acc,t.acc_se"), "{header}");
    assert!(csv.lines().nth(1).unwrap().ends_with(",0.3,0.04"), "{csv}");
}

/// The ranking is by the mean over seeds: a recipe with one lucky seed does not win.
#[test]
fn ranking_is_by_the_mean_over_seeds() {
    let rows = vec![
        row("a1", "grid", "pre", 1e-3, 7, Some(2.50)),
        row("a2", "reseed", "pre", 1e-3, 8, Some(2.84)),
        row("b1", "grid", "bhyt", 1e-3, 7, Some(2.55)),
        row("b2", "reseed", "bhyt", 1e-3, 8, Some(2.57)),
    ];
    let s = summarize(&rows, &Default::default(), "optim.lr");
    // pre: best 2.50 but mean 2.67; bhyt: best 2.55, mean 2.56.
    assert_eq!(s.iter().map(|m| m.method.as_str()).collect::<Vec<_>>(), ["bhyt", "pre"]);
    assert_eq!(s[0].lr_edge, None, "a one-rate grid has no edge to flag");
}

const SWEEP: &str = r#"
[sweep]
dir = "runs/test-sweep"
jobs = 2
[sweep.axes]
"model.recipe" = ["post", "peri"]
"optim.lr" = [1e-3, 1e-2]
"model.n_layers" = [2]
[sweep.reseed]
seeds = [8, 9]
[train]
steps = 10
"#;

#[test]
fn the_grid_is_the_product_of_the_axes_and_reseeds_use_lr_star() {
    let s = Sweep::parse(SWEEP, Path::new("test.toml"), &[]).unwrap();
    let g = s.grid();
    let names: Vec<&str> = g.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "recipe=post,lr=0.001,n_layers=2",
            "recipe=post,lr=0.01,n_layers=2",
            "recipe=peri,lr=0.001,n_layers=2",
            "recipe=peri,lr=0.01,n_layers=2"
        ]
    );
    let cfg = s.run_config(&g[3]).unwrap();
    assert_eq!((cfg.optim.lr, cfg.model.n_layers, cfg.train.steps), (1e-2, 2, Some(10)));
    assert_eq!(cfg.model.validate().unwrap().0.name, "peri");
    let rows = vec![
        row(&g[0].name, "grid", "post", 1e-3, 7, Some(2.4)),
        row(&g[1].name, "grid", "post", 1e-2, 7, None),
        row(&g[2].name, "grid", "peri", 1e-3, 7, Some(2.6)),
        row(&g[3].name, "grid", "peri", 1e-2, 7, Some(2.5)),
    ];
    let re = super::reseed_runs(&s, &rows, &[8, 9]);
    assert_eq!(re.len(), 4);
    let post = s.run_config(&re[0]).unwrap();
    assert_eq!((post.optim.lr, post.train.seed, post.train.sampler_seed), (1e-3, 8, 8));
    let peri = s.run_config(&re[3]).unwrap();
    assert_eq!((peri.optim.lr, peri.train.seed, peri.model.n_layers), (1e-2, 9, 2));
    let e = Sweep::parse("[sweep]\ndir = \"x\"\n[sweep.axes]\n\"optim.lrr\" = [1]\n", Path::new("bad.toml"), &[])
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("unknown field `lrr`"), "{e:#}");
}

/// A linked axis whose first key repeats a value is named by its next keys too, so that its
/// arms are never pooled as seeds of one method (moe-balance: the same coefficient per layer
/// and pooled, two arms without a loss).
#[test]
fn a_linked_axis_is_named_by_as_many_keys_as_tell_its_values_apart() {
    let text = r#"
[sweep]
dir = "runs/linked"
[sweep.axes]
"model.recipe" = ["pre", "peri"]
"model.moe.aux_loss+model.moe.z_loss+model.moe.aux_form+model.moe.router.bias_update" = [
    [0.0, 0.001, "per-layer", 0.0], [0.01, 0.001, "per-layer", 0.0], [0.01, 0.001, "pooled", 0.0],
    [0.0, 0.001, "per-layer", 0.001]]
"optim.lr" = [1e-3, 3e-3]
[model.moe]
experts = 4
top_k = 2
[model.moe.router]
kind = "sigmoid"
"#;
    let s = Sweep::parse(text, Path::new("linked.toml"), &[]).unwrap();
    let keys = ["model.recipe", "model.moe.aux_loss", "model.moe.aux_form", "model.moe.router.bias_update"];
    assert_eq!(s.section.group_by.keys(), keys, "z_loss is the same in every arm: not part of a name");
    let labels: std::collections::BTreeSet<String> =
        s.grid().iter().map(|r| s.section.group_by.label(&axes_json(&r.axes))).collect();
    assert_eq!(labels.len(), 8, "{labels:?}");
}

/// A run's axes as the results hold them.
fn axes_json(axes: &[(String, toml::Value)]) -> std::collections::BTreeMap<String, serde_json::Value> {
    axes.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap())).collect()
}

/// Keys joined by `+` vary together: each value sets one value per key (a method with its own
/// schedule, the BHyT paper's C.3), crossed with the other axes; a value of the wrong length is
/// refused by name.
#[test]
fn linked_axes_set_their_keys_together() {
    let text = r#"
[sweep]
dir = "runs/linked"
[sweep.axes]
"model.recipe+optim.lr+schedule.warmup_fraction" = [["pre-rms", 3e-4, 0.1], ["lns-rms", 5e-4, 0.05]]
"train.seed" = [1, 2]
[train]
steps = 10
"#;
    let s = Sweep::parse(text, Path::new("linked.toml"), &[]).unwrap();
    let g = s.grid();
    let names: Vec<&str> = g.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "recipe=pre-rms,lr=0.0003,warmup_fraction=0.1,seed=1",
            "recipe=pre-rms,lr=0.0003,warmup_fraction=0.1,seed=2",
            "recipe=lns-rms,lr=0.0005,warmup_fraction=0.05,seed=1",
            "recipe=lns-rms,lr=0.0005,warmup_fraction=0.05,seed=2"
        ]
    );
    let cfg = s.run_config(&g[2]).unwrap();
    assert_eq!((cfg.optim.lr, cfg.schedule.warmup_fraction, cfg.train.seed), (5e-4, 0.05, 1));
    assert_eq!(cfg.model.validate().unwrap().0.name, "lns-rms");
    assert_eq!(s.section.group_by.keys(), ["model.recipe"], "the recipe alone tells the methods apart");
    let bad = text.replace("[\"lns-rms\", 5e-4, 0.05]", "[\"lns-rms\", 5e-4]");
    let e = format!("{:#}", Sweep::parse(&bad, Path::new("linked.toml"), &[]).err().unwrap());
    assert!(e.contains("links 3 keys") && e.contains("list of 3 values"), "{e}");
}

/// `normlab textnorm`'s study: pre, post and peri over its grid on the pairs task by default;
/// `--recipes` replaces the recipe axis and keeps the rest.
#[test]
fn the_textnorm_study_and_its_recipes_option() {
    let s = Sweep::textnorm(false, &[], &[]).unwrap();
    let recipes: Vec<String> = s.grid().iter().map(|r| r.axes[0].1.as_str().unwrap().to_string()).collect();
    assert_eq!(recipes.iter().filter(|r| *r == "peri").count(), recipes.len() / 3);
    let cfg = s.run_config(&s.grid()[0]).unwrap();
    assert_eq!(cfg.data.task, crate::data::Task::Pairs);
    assert_eq!((cfg.optim.weight_decay, cfg.train.batch_size, cfg.micro_batch_size()), (0.01, 32, 8));
    let s = Sweep::textnorm(false, &["pre".into(), "kitenorm".into()], &["train.steps=10".into()]).unwrap();
    let grid = s.grid();
    assert_eq!(grid.len(), 2 * s.section.axes.get("optim.lr").unwrap().len());
    assert_eq!(grid.last().unwrap().axes[0].1.as_str(), Some("kitenorm"));
    assert_eq!(s.run_config(&grid[0]).unwrap().train.steps, Some(10));
    assert!(Sweep::textnorm(false, &["nonesuch".into()], &[]).is_err(), "an unknown recipe is refused up front");
    assert!(Sweep::textnorm(true, &[], &[]).is_ok());
}

/// `normlab compare --recipes`: presets outside compare's default set over its grid.
#[test]
fn compare_takes_its_recipes_from_the_command_line() {
    let new = ["rezero", "layerscale", "hybridnorm", "softcap", "qk-clip", "derf"].map(String::from);
    let s = Sweep::compare(false, &new, &[]).unwrap();
    let grid = s.grid();
    assert_eq!(grid.len(), new.len() * s.section.axes.get("optim.lr").unwrap().len());
    for r in &grid {
        let cfg = s.run_config(r).unwrap();
        assert!(new.contains(&cfg.model.validate().unwrap().0.name), "{}", r.name);
    }
}

/// A sweep's recorded run config trains with its own tokenizer: the vocabulary follows the
/// tokenizer (BPE, GPT-2) unless the sweep file sets `model.vocab_size`.
#[test]
fn recorded_run_configs_let_the_vocabulary_follow_the_tokenizer() {
    let s = Sweep::textnorm(false, &[], &[]).unwrap();
    let text = s.run_config(&s.grid()[0]).unwrap().to_toml_to_train().unwrap();
    let mut cfg = crate::run::RunConfig::from_text(&text, "recorded", &[]).unwrap();
    assert!(cfg.fit_vocab(2048, "bpe").is_ok(), "{text}");
    assert_eq!(cfg.model.vocab_size, 2048);
    let pinned = Sweep::textnorm(false, &[], &["model.vocab_size=300".into()]).unwrap();
    let text = pinned.run_config(&pinned.grid()[0]).unwrap().to_toml_to_train().unwrap();
    let mut cfg = crate::run::RunConfig::from_text(&text, "recorded", &[]).unwrap();
    assert!(cfg.fit_vocab(2048, "bpe").is_err(), "a vocabulary the sweep sets is kept and checked");
}

/// With `group_by = ["model.recipe", "model.n_layers"]` each depth of each recipe has its own
/// LR*: here pre's best rate moves from 1e-2 at 2 layers to 1e-3 at 8.
#[test]
fn several_group_keys_tune_the_rate_per_group() {
    let at = |name: &str, recipe: &str, layers: i64, lr: f64, val: f64| {
        let mut r = row(name, "grid", recipe, lr, 7, Some(val));
        r.axes.insert("model.n_layers".into(), serde_json::json!(layers));
        r
    };
    let rows = vec![
        at("p2a", "pre", 2, 1e-3, 3.0),
        at("p2b", "pre", 2, 1e-2, 2.9),
        at("p8a", "pre", 8, 1e-3, 2.5),
        at("p8b", "pre", 8, 1e-2, 2.7),
        at("k2a", "kitenorm", 2, 1e-3, 2.95),
        at("k2b", "kitenorm", 2, 1e-2, 2.8),
    ];
    let group = super::group::GroupBy::new(vec!["model.recipe".into(), "model.n_layers".into()]).unwrap();
    let s = summarize(&rows, &group, "optim.lr");
    let star: BTreeMap<&str, Option<f64>> = s.iter().map(|m| (m.method.as_str(), m.lr_star)).collect();
    assert_eq!(star["pre, n_layers=2"], Some(1e-2));
    assert_eq!(star["pre, n_layers=8"], Some(1e-3));
    assert_eq!(star["kitenorm, n_layers=2"], Some(1e-2));
    let pre8 = s.iter().find(|m| m.method == "pre, n_layers=8").unwrap();
    assert_eq!(pre8.group, vec![Some(serde_json::json!("pre")), Some(serde_json::json!(8))]);
    assert_eq!(pre8.lr_edge, Some(LrEdge::Lowest));
    // One key pools the depths: pre's best run over both is 2.5 at 1e-3.
    let pooled = summarize(&rows, &Default::default(), "optim.lr");
    assert_eq!(pooled.iter().find(|m| m.method == "pre").unwrap().lr_star, Some(1e-3));
}

/// A named recipe table is labelled by its name; an unnamed one longer than a file name allows
/// keeps its start and a hash of the whole, so two long tables that differ only at the end
/// still get two run directories.
#[test]
fn table_values_name_runs_by_their_name_or_a_bounded_label() {
    let named: toml::Value = toml::from_str::<toml::Table>(
        "r = { name = \"dyt-1b\", sublayer = { input = { kind = \"dyt\", alpha = 0.5 } } }",
    )
    .unwrap()["r"]
        .clone();
    assert_eq!(super::config::run_name(&[("model.recipe".into(), named)]), "recipe=dyt-1b");
    let long = |alpha: &str| -> toml::Value {
        let text = format!(
            "r = {{ sublayer = {{ input = {{ kind = \"dyt\", alpha = {alpha} }} }}, layers = [{{ range = \"1..=L\", sublayers = \"attn\", input = {{ kind = \"dyt\", alpha = 1.0 }} }}] }}"
        );
        toml::from_str::<toml::Table>(&text).unwrap()["r"].clone()
    };
    let (a, b) = (
        super::config::run_name(&[("model.recipe".into(), long("0.5"))]),
        super::config::run_name(&[("model.recipe".into(), long("0.25"))]),
    );
    assert!(a.len() <= 60 && b.len() <= 60 && a != b, "{a} {b}");
}
