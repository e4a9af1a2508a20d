//! `normlab finetune` as a user runs it: every conversation layout (JSON lines and parquet)
//! trains on the same tokens, LoRA starts exactly at its parent, the parent is never
//! touched, every bad input is one `error:` line, and the chat endpoint answers the OpenAI
//! Python client.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

/// A trained pre-rms parent (byte tokenizer, d = 32, 2 layers) in `root/run`.
fn parent(root: &Path) -> PathBuf {
    let cfg = common::tiny_run(root, 20, "recipe = \"pre-rms\"\n", "");
    let o = bin().args(["train", "--quiet", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    root.join("run")
}

/// Twelve single-turn conversations (every layout can hold them), as OpenAI messages.
fn turns() -> Vec<(String, String)> {
    (0..12).map(|i| (format!("Spell {i}."), format!("{i} is spelled {}.", "x".repeat(i % 4 + 1)))).collect()
}

/// The conversations in `layout`, one JSON object each.
fn records(layout: &str) -> Vec<serde_json::Value> {
    use serde_json::json;
    turns()
        .into_iter()
        .map(|(q, a)| match layout {
            "messages" => json!({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}),
            "sharegpt" => json!({"conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}),
            "lima" => json!({"conversations": [q, a], "source": "test"}),
            _ => json!({"instruction": q, "input": "", "output": a}),
        })
        .collect()
}

fn write_jsonl(path: &Path, rows: &[serde_json::Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// The same records as parquet, written by pyarrow from the JSON lines.
fn write_parquet(jsonl: &Path, out: &Path) {
    let script =
        "import sys, pyarrow.json as j, pyarrow.parquet as p; p.write_table(j.read_json(sys.argv[1]), sys.argv[2])";
    let o = Command::new("python3").args(["-c", script]).arg(jsonl).arg(out).output().unwrap();
    assert!(o.status.success(), "pyarrow (pip install pyarrow): {}", common::stderr(&o));
}

fn finetune(parent: &Path, data: &Path, dir: &Path, extra: &[&str]) -> Output {
    let mut c = bin();
    c.args(["finetune", "--quiet", "--checkpoint"]).arg(parent).arg("--data").arg(data);
    c.args(["--set", "train.steps=2", "--set", "train.seq_len=96", "--set", "run.eval_every=0"]);
    c.arg("--set").arg(format!("run.dir={}", dir.display()));
    for e in extra {
        c.args(["--set", e]);
    }
    c.output().unwrap()
}

fn train_losses(run: &Path) -> Vec<f64> {
    common::records(run, "train").iter().map(|r| r["loss"].as_f64().unwrap()).collect()
}

fn digests(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        out.push((e.clone(), normlab::data::cache::sha256_hex(&std::fs::read(&e).unwrap())));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() { v.extend(walk(&p)) } else { v.push(p) }
    }
    v
}

#[test]
fn every_layout_trains_on_the_same_tokens_and_lora_starts_at_its_parent() {
    let root = common::Scratch::new("finetune-layouts");
    let parent = parent(&root);
    let before = digests(&parent);
    let mut first = None;
    for layout in ["messages", "sharegpt", "lima", "alpaca"] {
        let jsonl = root.join(format!("{layout}.jsonl"));
        write_jsonl(&jsonl, &records(layout));
        let parquet = root.join(format!("{layout}.parquet"));
        write_parquet(&jsonl, &parquet);
        for data in [&jsonl, &parquet] {
            let dir = root.join(format!("sft-{}", data.file_name().unwrap().to_string_lossy()));
            let o = finetune(&parent, data, &dir, &[]);
            assert!(o.status.success(), "{}: {}", data.display(), common::stderr(&o));
            let losses = train_losses(&dir);
            match &first {
                None => first = Some(losses),
                Some(f) => assert_eq!(&losses, f, "{} trains on other tokens than messages.jsonl", data.display()),
            }
        }
    }
    // LoRA's B starts at zero: its first loss is the full fine-tuning run's (the parent's model).
    let lora = root.join("sft-lora");
    let data = root.join("messages.jsonl");
    let o = finetune(&parent, &data, &lora, &["model.lora.rank=2", "model.lora.targets=[\"all-linear\"]"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let (l, f) = (train_losses(&lora), first.unwrap());
    assert_eq!(l[0], f[0], "a fresh adapter changes nothing");
    assert_ne!(l[1], f[1], "after one step LoRA and full fine-tuning differ");
    let cfg = std::fs::read_to_string(lora.join("config.toml")).unwrap();
    assert!(cfg.contains("[finetune]") && cfg.contains("parent_sha256"), "{cfg}");
    assert_eq!(digests(&parent), before, "fine-tuning changed nothing of the parent");
}

#[test]
fn bad_input_is_one_error_line_and_leaves_the_parent_alone() {
    let root = common::Scratch::new("finetune-errors");
    let parent = parent(&root);
    let before = digests(&parent);
    let ok = root.join("ok.jsonl");
    write_jsonl(&ok, &records("messages"));
    let no_assistant = root.join("no-assistant.jsonl");
    std::fs::write(&no_assistant, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n".repeat(3)).unwrap();
    let wizard = root.join("wizard.jsonl");
    let w = "{\"messages\": [{\"role\": \"wizard\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}\n";
    std::fs::write(&wizard, w.repeat(3)).unwrap();
    let template = root.join("broken.jinja");
    std::fs::write(&template, "{{ raise_exception('this template refuses everything') }}").unwrap();
    let tmpl = format!("data.chat_template={}", template.display());
    let cases: Vec<(&Path, &Path, Vec<&str>, &str)> = vec![
        (&parent, &no_assistant, vec![], "no assistant turn"),
        (&parent, &wizard, vec![], "unknown role `wizard`"),
        (&parent, &ok, vec![tmpl.as_str()], "refuses everything"),
        (&parent, &ok, vec!["model.lora.targets=[\"lm_head\"]"], "`lm_head` names no module"),
        (&root, &ok, vec![], "not a normlab run directory"),
    ];
    for (i, (from, data, extra, want)) in cases.into_iter().enumerate() {
        let o = finetune(from, data, &root.join(format!("bad-{i}")), &extra);
        assert_eq!(o.status.code(), Some(2), "{want}: {}", common::stderr(&o));
        let line = common::error_line(&o);
        assert!(line.contains(want), "{want}: {line}");
        assert!(!root.join(format!("bad-{i}")).join("config.toml").exists(), "{want}: no run was made");
    }
    let o = finetune(&parent, &ok, &parent, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::error_line(&o).contains("parent run's own directory"), "{}", common::stderr(&o));
    assert_eq!(digests(&parent), before, "no failed fine-tuning changed the parent");
}

/// The OpenAI client's `chat.completions.create`, streamed and not, answers what
/// `/v1/completions` answers for the conversation rendered by ChatML by hand (the template's
/// definition) and stopped at `<|im_end|>`, with the same log-probabilities.
#[test]
fn the_openai_chat_client_gets_the_templated_completion() {
    let root = common::Scratch::new("finetune-chat");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let sft = root.join("sft");
    let o = finetune(&parent, &data, &sft, &["train.steps=30", "train.seq_len=160"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let s = common::serve(&sft, &[]);
    let prompt =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSpell 3.<|im_end|>\n<|im_start|>assistant\n";
    let body = serde_json::json!({"prompt": prompt, "max_tokens": 24, "temperature": 0, "stop": ["<|im_end|>"], "logprobs": 0});
    let mut answer = ureq::post(format!("{}/v1/completions", s.url))
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let r: serde_json::Value = serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap();
    let want = r["choices"][0]["text"].as_str().unwrap().to_string();
    let want_lp: f64 =
        r["choices"][0]["logprobs"]["token_logprobs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).sum();
    let script = format!(
        "import json\nfrom openai import OpenAI\nc = OpenAI(base_url='{}/v1', api_key='none')\n\
         m = [{{'role': 'system', 'content': 'Be brief.'}}, {{'role': 'user', 'content': 'Spell 3.'}}]\n\
         r = c.chat.completions.create(model='run', messages=m, max_tokens=24, temperature=0, logprobs=True)\n\
         s = c.chat.completions.create(model='run', messages=m, max_tokens=24, temperature=0, stream=True)\n\
         streamed = ''.join(x.choices[0].delta.content or '' for x in s)\n\
         print(json.dumps([r.choices[0].message.content, streamed, sum(t.logprob for t in r.choices[0].logprobs.content), r.choices[0].message.role]))",
        s.url
    );
    let o = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "the openai package (pip install openai): {}", common::stderr(&o));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(got[0].as_str().unwrap(), want, "chat equals the templated completion");
    assert_eq!(got[1].as_str().unwrap(), want, "streamed chat equals it too");
    assert!((got[2].as_f64().unwrap() - want_lp).abs() < 1e-9, "{got} vs {want_lp}");
    assert_eq!(got[3], "assistant");
    assert!(!want.is_empty() && !want.contains("<|im_end|>"), "{want:?}");
}

/// A sweep's fine-tuning stage: each method's best pretraining run fine-tuned (LoRA) at every
/// SFT rate, each fine-tuning run naming its parent and the digest of the weights it started
/// from; the report ranks the methods after SFT; the Slurm executor refuses the stage.
#[test]
fn a_sweep_fine_tunes_each_methods_best_run() {
    let root = common::Scratch::new("finetune-sweep");
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let file =
        common::tiny_sweep(&root, "\"model.recipe\" = [\"pre-rms\", \"peri-rms\"]\n\"optim.lr\" = [0.003]", 2, 10);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text = text.replacen(
        "[sweep.axes]",
        &format!(
            "[sweep.finetune]\ndata = \"{}\"\ntuned = \"optim.lr\"\n[sweep.finetune.axes]\n\"optim.lr\" = [0.001, 0.003]\n\
             [sweep.finetune.config.train]\nsteps = 3\nseq_len = 96\n[sweep.finetune.config.model.lora]\nrank = 2\n\
             [sweep.axes]",
            data.display()
        ),
        1,
    );
    std::fs::write(&file, &text).unwrap();
    let o = bin().args(["sweep", "--report", "--config"]).arg(&file).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let sweep = root.join("sweep");
    let rows = common::results_without_timings(&sweep);
    let sft: Vec<&serde_json::Value> = rows.iter().filter(|r| r["stage"] == "finetune").collect();
    assert_eq!(sft.len(), 4, "two methods × two SFT rates");
    for r in &sft {
        assert_eq!(r["state"], "finished", "{r}");
        let name = r["name"].as_str().unwrap();
        let cfg: toml::Table =
            toml::from_str(&std::fs::read_to_string(sweep.join("runs").join(name).join("config.toml")).unwrap())
                .unwrap();
        let f = &cfg["finetune"];
        let parent = PathBuf::from(f["parent"].as_str().unwrap());
        let weights = std::fs::read(parent.join("model.safetensors")).unwrap();
        assert_eq!(f["parent_sha256"].as_str().unwrap(), normlab::data::cache::sha256_hex(&weights), "{name}");
        assert_eq!(cfg["data"]["task"].as_str(), Some("chat"));
    }
    let report = std::fs::read_to_string(sweep.join("report").join("report.md")).unwrap();
    assert!(report.contains("Fine-tuning: the methods after SFT") && report.contains("SFT train loss"), "{report}");
    assert!(sft.iter().all(|r| r["final_train_loss"].as_f64().is_some_and(f64::is_finite)), "{sft:?}");
    let o = bin().args(["sweep", "--executor", "slurm", "--config"]).arg(&file).output().unwrap();
    assert!(common::error_line(&o).contains("sweep.finetune"), "{}", common::stderr(&o));
}
