//! A mixture-of-experts run through the commands a dense run has, as a user runs them: killed
//! (SIGKILL) and resumed to the identical curve, perplexity, seeded generation, the server
//! (batched requests as alone), downstream evaluation, full and LoRA fine-tuning, and a sweep
//! over a `model.moe` axis with its routing in the results and the report.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    o
}

/// DeepSeek V3's router (sigmoid scores in 2 groups, the selection bias moved after each step)
/// with both balancing losses and a capacity factor that drops pairs in training.
const MOE: &str = "recipe = \"pre-rms\"\n[model.moe]\nexperts = 4\ntop_k = 2\nd_expert = 16\ncapacity = 0.75\n\
                   aux_loss = 0.01\nz_loss = 0.001\n\
                   router = { kind = \"sigmoid\", groups = 2, top_groups = 1, bias_update = 0.01 }\n";

/// The run killed at a checkpoint and resumed equals the run trained at once, record for
/// record (the routing records, with their dropped pairs, included): the selection biases and
/// everything else a step depends on came back from the checkpoint.
fn killed_and_resumed(root: &Path) -> PathBuf {
    let cfg = common::tiny_run(root, 60, MOE, "");
    let whole = root.join("whole");
    run(bin()
        .args(["train", "--quiet", "--config"])
        .arg(&cfg)
        .arg("--set")
        .arg(format!("run.dir=\"{}\"", whole.display())));
    let resumed = root.join("run");
    common::kill_after_a_checkpoint(&cfg, &resumed, 20);
    run(bin().args(["train", "--quiet", "--resume"]).arg(&resumed));
    let records = common::metrics_without_timings(&whole);
    assert_eq!(records, common::metrics_without_timings(&resumed), "identical train and eval records");
    let dropped: u64 = common::records(&whole, "train")
        .iter()
        .flat_map(|r| r["moe"]["dropped"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d.as_u64())
        .sum();
    assert!(dropped > 0, "the capacity factor dropped no pair; the case does not test it");
    resumed
}

#[test]
fn a_moe_run_goes_through_every_command_a_dense_run_has() {
    let root = common::Scratch::new("moe-commands");
    let run_dir = killed_and_resumed(&root);
    // Perplexity reproduces the last validation loss: evaluation is dropless in both.
    let o = run(bin().args(["perplexity", "--checkpoint"]).arg(&run_dir));
    let last = common::records(&run_dir, "eval").pop().unwrap();
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(printed.contains(&format!("val_loss {:.4}", last["val_loss"].as_f64().unwrap())), "{printed}");
    let sample = || {
        run(bin()
            .args(["generate", "--prompt", "Item 5 of", "--max-new-tokens", "30", "--seed", "3", "--checkpoint"])
            .arg(&run_dir))
    };
    let (a, b) = (sample(), sample());
    assert_eq!(a.stdout, b.stdout);
    assert!(String::from_utf8_lossy(&a.stdout).starts_with("Item 5 of"));
    serves_each_request_as_alone(&run_dir);
    let o = run(bin().args(["evaluate", "--checkpoint"]).arg(&run_dir).args(["--tasks", "sotu_words", "--limit", "8"]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("acc"), "{}", String::from_utf8_lossy(&o.stdout));
    fine_tunes(&root, &run_dir);
}

/// `normlab serve` on the run (its capacity factor set): six greedy completions sent at once
/// equal each sent alone, and `generate --temperature 0`: serving is dropless, so batching
/// moves no token's experts.
fn serves_each_request_as_alone(run_dir: &Path) {
    let s = common::serve(run_dir, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let complete = |prompt: &str| {
        let body = serde_json::json!({"prompt": prompt, "max_tokens": 12, "temperature": 0});
        let mut r = agent
            .post(format!("{}/v1/completions", s.url))
            .header("content-type", "application/json")
            .send(body.to_string())
            .unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["choices"][0]["text"].as_str().unwrap().to_string()
    };
    let prompts = ["Item 3 of the", "The north", "I", "district. Item 12", "west", "Item 40"];
    let alone: Vec<String> = prompts.iter().map(|p| complete(p)).collect();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = prompts.iter().map(|p| sc.spawn(|| complete(p))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(alone, together, "batched requests differ from alone");
    let o = run(bin()
        .args(["generate", "--temperature", "0", "--prompt", prompts[0], "--max-new-tokens", "12", "--checkpoint"])
        .arg(run_dir));
    let generated = String::from_utf8(o.stdout).unwrap();
    assert_eq!(generated.strip_prefix(prompts[0]).unwrap().trim_end_matches('\n'), alone[0]);
}

/// Full fine-tuning and LoRA on the experts (`targets = ["ffn"]`) both train; a fresh adapter
/// starts at the full run's first loss, and every routed expert carries its adapters.
fn fine_tunes(root: &Path, parent: &Path) {
    let data = root.join("chat.jsonl");
    let rows: String = (0..12)
        .map(|i| {
            let m = serde_json::json!({"messages": [
                {"role": "user", "content": format!("Spell {i}.")},
                {"role": "assistant", "content": format!("{i} is spelled {}.", "x".repeat(i % 4 + 1))}]});
            format!("{m}\n")
        })
        .collect();
    std::fs::write(&data, rows).unwrap();
    let finetune = |dir: &str, extra: &[&str]| {
        let mut c = bin();
        c.args(["finetune", "--quiet", "--checkpoint"]).arg(parent).arg("--data").arg(&data);
        c.args(["--set", "train.steps=3", "--set", "train.seq_len=96", "--set", "run.eval_every=0"]);
        c.arg("--set").arg(format!("run.dir={}", root.join(dir).display()));
        extra.iter().for_each(|e| {
            c.args(["--set", e]);
        });
        run(&mut c);
        common::records(&root.join(dir), "train").iter().map(|r| r["loss"].as_f64().unwrap()).collect::<Vec<_>>()
    };
    let full = finetune("sft", &[]);
    for targets in ["attention", "ffn"] {
        let dir = format!("sft-lora-{targets}");
        let lora = finetune(&dir, &["model.lora.rank=2", &format!("model.lora.targets=[\"{targets}\"]")]);
        assert!(full.iter().chain(&lora).all(|l| l.is_finite()), "{full:?} {lora:?}");
        assert_eq!(lora[0], full[0], "{targets}: a fresh adapter changes nothing");
        assert_ne!(lora[1], full[1], "{targets}: after one step LoRA and full fine-tuning differ");
        let routing = common::records(&root.join(&dir), "train");
        assert!(routing.iter().all(|r| r["moe"]["balance"].as_f64().is_some()), "{targets}: routing recorded");
    }
    let weights = normlab::io::tensors::read(&root.join("sft-lora-ffn/model.safetensors")).unwrap();
    for e in 0..4 {
        let name = format!("layers.1.ffn.f.experts.{e}.lora_w2.a");
        assert!(weights.tensors.contains_key(&name), "no {name} in {:?}", weights.tensors.keys().collect::<Vec<_>>());
    }
    // The experts' adapters have no peft form: one error line says so and what to do.
    let o =
        bin().args(["export"]).arg(root.join("sft-lora-ffn")).arg("--peft").arg(root.join("peft")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::error_line(&o).contains("no peft form"), "{}", common::stderr(&o));
    // The base stays the parent's under LoRA: the selection biases did not move.
    let parent_weights = normlab::io::tensors::read(&parent.join("model.safetensors")).unwrap();
    let bias = "layers.1.ffn.f.selection_bias";
    assert_eq!(weights.tensors[bias], parent_weights.tensors[bias], "LoRA moved the selection bias");
}

/// A sweep over `model.moe.aux_form` writes each run's routing (`moe_load_cv`, `moe_dead`,
/// `moe_balance`) in `results.csv`, and its report has the routing table.
#[test]
fn a_sweep_over_a_moe_axis_reports_the_routing() {
    let root = common::Scratch::new("moe-sweep");
    let file = common::tiny_sweep(&root, "\"model.moe.aux_form\" = [\"per-layer\", \"pooled\"]", 2, 30);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text += "[model.moe]\nexperts = 4\ntop_k = 2\nd_expert = 16\naux_loss = 0.01\n";
    std::fs::write(&file, text).unwrap();
    run(bin().args(["sweep", "--config"]).arg(&file));
    run(bin().arg("report").arg(root.join("sweep")));
    let csv = std::fs::read_to_string(root.join("sweep/results.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name}: {header:?}"));
    let rows: Vec<Vec<String>> = lines.map(|l| l.rsplit(',').map(str::to_string).collect::<Vec<_>>()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    // Counted from the end: run names hold commas (quoted), the routing columns do not.
    let from_end = |name: &str| header.len() - 1 - col(name);
    for r in &rows {
        let cv: f64 = r[from_end("moe_load_cv")].parse().unwrap();
        let balance: f64 = r[from_end("moe_balance")].parse().unwrap();
        assert!(cv >= 0.0 && balance > 0.0, "{r:?}");
    }
    let report = std::fs::read_to_string(root.join("sweep/report/report.md")).unwrap();
    assert!(report.contains("Routing at LR*") && report.contains("load CV"), "{report}");
}
