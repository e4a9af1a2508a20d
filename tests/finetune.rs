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

/// A chat template is a user's code: one that loops without end, one that doubles a string
/// until memory runs out, one that renders nothing and one that drops the assistant's turns
/// are each one `error:` line naming the problem, within seconds; so are a tokenizer other than
/// the parent's and a `parent_sha256` that is not a digest (cut inside a UTF-8 character, it
/// once panicked).
#[test]
fn hostile_templates_and_mismatched_settings_are_refused() {
    let root = common::Scratch::new("finetune-hostile");
    let parent = parent(&root);
    let ok = root.join("ok.jsonl");
    write_jsonl(&ok, &records("messages"));
    let template = |name: &str, text: &str| {
        let p = root.join(name);
        std::fs::write(&p, text).unwrap();
        format!("data.chat_template={}", p.display())
    };
    let chatml_turns = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
    let loops = template(
        "loops.jinja",
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
    );
    let doubling = template(
        "doubling.jinja",
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    );
    let empty = template("empty.jinja", "{% for m in messages %}{% endfor %}");
    let raises_on_7 = template(
        "sevens.jinja",
        &format!(
            "{{% if messages[0].content == 'Spell 7.' %}}{{{{ raise_exception('no sevens') }}}}{{% endif %}}{chatml_turns}"
        ),
    );
    let drops = template(
        "drops.jinja",
        &chatml_turns.replace("{% for m in messages %}", "{% for m in messages if m.role != 'assistant' %}"),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&loops], "more than 50000000 steps"),
        (vec![&doubling], "more than 1024 MiB of memory"),
        (vec![&empty], "renders a conversation as empty text"),
        (vec![&drops], "would learn no token"),
        (vec!["data.tokenizer=\"gpt2\""], "differs from the parent's \"byte\""),
        (vec!["finetune.parent_sha256=\"a€€€€\""], "not the a€€€€… finetune.parent_sha256 asks for"),
        (vec!["model.lora.rank=100000"], "model.lora.rank = 100000 is not below d_model = 32"),
        (vec![&raises_on_7], "record 8: the chat template failed to render: invalid operation: no sevens"),
    ];
    for (i, (extra, want)) in cases.into_iter().enumerate() {
        let started = std::time::Instant::now();
        let o = finetune(&parent, &ok, &root.join(format!("bad-{i}")), &extra);
        let line = common::error_line(&o);
        assert!(line.contains(want), "{want}: {line}");
        assert!(started.elapsed().as_secs() < 60, "{want}: refused after {:?}", started.elapsed());
        assert!(!root.join(format!("bad-{i}")).join("config.toml").exists(), "{want}: no run was made");
    }
}

/// Conversations from a directory or a FIFO are named as what they are; exporting the adapters
/// of a fine-tune whose parent moved says it is the parent that is gone; LoRA on a model drawn
/// at random trains with a word that its base is frozen noise.
#[test]
fn data_paths_moved_parents_and_random_bases_are_named() {
    let root = common::Scratch::new("finetune-named");
    let parent = parent(&root);
    let ok = root.join("ok.jsonl");
    write_jsonl(&ok, &records("messages"));
    // Conversations from a directory or a FIFO are named as such, not as missing.
    let fifo = root.join("fifo.jsonl");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (data, want) in [(root.to_path_buf(), "is a directory"), (fifo, "is not a regular file")] {
        let line = common::error_line(&finetune(&parent, &data, &root.join("bad-data"), &[]));
        assert!(line.contains(want), "{want}: {line}");
    }
    // A fine-tune whose parent moved: exporting its adapters says it is the parent that is gone.
    let sft = root.join("sft-moved");
    let o = finetune(&parent, &ok, &sft, &["model.lora.rank=2"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let moved = root.join("run-moved");
    std::fs::rename(&parent, &moved).unwrap();
    let o = bin().arg("export").arg(&sft).arg("--peft").arg(root.join("adapter-moved")).output().unwrap();
    std::fs::rename(&moved, &parent).unwrap();
    let line = common::error_line(&o);
    assert!(line.contains("exporting the parent") && line.contains("not a normlab run directory"), "{line}");
    // LoRA on a model drawn at random trains, with a word that its base is frozen noise.
    std::fs::create_dir_all(root.join("lora-random")).unwrap();
    let cfg = common::tiny_run(&root.join("lora-random"), 2, "", "");
    let o =
        bin().args(["train", "--quiet", "--config"]).arg(&cfg).args(["--set", "model.lora.rank=2"]).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("frozen random weights"), "{}", common::stderr(&o));
}

/// OpenAI's content parts (`[{"type": "text", "text": …}]`) and a byte-order mark at the start
/// of the file are read as the server and `data prepare` read them: the same tokens as plain
/// strings, so the same losses.
#[test]
fn content_parts_and_a_bom_train_as_plain_text() {
    let root = common::Scratch::new("finetune-parts");
    let parent = parent(&root);
    let plain = root.join("plain.jsonl");
    write_jsonl(&plain, &records("messages"));
    let parts: Vec<serde_json::Value> = records("messages")
        .into_iter()
        .map(|mut r| {
            for m in r["messages"].as_array_mut().unwrap() {
                let t = m["content"].as_str().unwrap().to_string();
                let (a, b) = t.split_at(t.len() / 2);
                m["content"] = serde_json::json!([{"type": "text", "text": a}, {"type": "text", "text": b}]);
            }
            r
        })
        .collect();
    let with_parts = root.join("parts.jsonl");
    write_jsonl(&with_parts, &parts);
    let text = std::fs::read_to_string(&with_parts).unwrap();
    std::fs::write(&with_parts, format!("\u{feff}{text}")).unwrap();
    let (a, b) = (root.join("sft-plain"), root.join("sft-parts"));
    for (data, dir) in [(&plain, &a), (&with_parts, &b)] {
        let o = finetune(&parent, data, dir, &[]);
        assert!(o.status.success(), "{}: {}", data.display(), common::stderr(&o));
    }
    assert_eq!(train_losses(&a), train_losses(&b));
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
    let want_lps = r["choices"][0]["logprobs"]["token_logprobs"].as_array().unwrap();
    let want_tokens = want_lps.len();
    let want_lp: f64 = want_lps.iter().map(|v| v.as_f64().unwrap()).sum();
    let script = chat_client_script(&s.url);
    let o = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "the openai package (pip install openai): {}", common::stderr(&o));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(got[0].as_str().unwrap(), want, "chat equals the templated completion");
    assert_eq!(got[1].as_str().unwrap(), want, "streamed chat equals it too");
    // One entry per completion token, the end-of-turn marker's included; the answer's own
    // tokens score as the completion's.
    let lp: Vec<f64> = got[2].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(lp.len() as u64, got[6].as_u64().unwrap(), "an entry per counted completion token");
    let answer: f64 = lp[..want_tokens].iter().sum();
    assert!((answer - want_lp).abs() < 1e-9, "{answer} vs {want_lp}");
    assert_eq!(got[3], "assistant");
    // OpenAI's fields this server has nothing to do for, at null or their defaults, as the
    // client sends them: the same answer; a value it cannot honour: a 400 naming the field.
    assert_eq!(got[4].as_str().unwrap(), want, "the defaults change nothing");
    let refused = got[5].as_str().unwrap();
    assert!(
        refused.contains("400") && refused.contains("response_format") && refused.contains("plain text"),
        "{refused}"
    );
    assert!(!want.is_empty() && !want.contains("<|im_end|>"), "{want:?}");
}

/// The OpenAI client's chat requests of [`the_openai_chat_client_gets_the_templated_completion`],
/// printed as JSON: the answer, streamed, its log-probabilities, the role, the answer with
/// OpenAI's fields at their defaults, the refusal of a JSON `response_format`, the usage.
fn chat_client_script(url: &str) -> String {
    format!(
        "import json\nfrom openai import OpenAI\nc = OpenAI(base_url='{}/v1', api_key='none')\n\
         m = [{{'role': 'system', 'content': 'Be brief.'}}, {{'role': 'user', 'content': 'Spell 3.'}}]\n\
         r = c.chat.completions.create(model='sft', messages=m, max_tokens=24, temperature=0, logprobs=True)\n\
         s = c.chat.completions.create(model='sft', messages=m, max_tokens=24, temperature=0, stream=True)\n\
         streamed = ''.join(x.choices[0].delta.content or '' for x in s)\n\
         d = c.chat.completions.create(model='sft', messages=m, max_tokens=24, temperature=0, response_format={{'type': 'text'}}, \
         tools=None, tool_choice=None, parallel_tool_calls=None, logit_bias={{}}, service_tier='auto', metadata={{'k': 'v'}}, \
         store=False, reasoning_effort=None, modalities=['text'], prediction=None, audio=None)\n\
         try:\n    c.chat.completions.create(model='sft', messages=m, max_tokens=4, response_format={{'type': 'json_object'}}); e = ''\n\
         except Exception as x:\n    e = str(x)\n\
         lp = [t.logprob for t in r.choices[0].logprobs.content]\n\
         print(json.dumps([r.choices[0].message.content, streamed, lp, r.choices[0].message.role, d.choices[0].message.content, e, r.usage.completion_tokens]))",
        url
    )
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

/// POSTs `body` to `url`; the status and the JSON answer.
fn post_json(url: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut r = agent.post(url).header("content-type", "application/json").send(body.to_string()).unwrap();
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
}

fn get_status(url: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    agent.get(url).call().map(|r| r.status().as_u16()).unwrap_or(0)
}

/// `n` alternating user / assistant messages ending with a user turn.
fn chat_messages(n: usize) -> serde_json::Value {
    let m: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("Spell {i}.")}))
        .collect();
    serde_json::Value::Array(m)
}

/// A run whose template loops without end for 5-message conversations and doubles a string
/// for 7-message ones (ChatML otherwise): while four such requests of each kind are in flight,
/// `/health` answers; each gets a 400 naming its bound; a plain conversation is answered after
/// them; one SIGTERM ends the server.
#[test]
fn a_runaway_template_never_holds_the_server() {
    let root = common::Scratch::new("finetune-serve-hostile");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let template = root.join("runaway.jinja");
    std::fs::write(
        &template,
        "{% if messages|length == 5 %}{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}\
         {% endfor %}{% elif messages|length == 7 %}{% set ns = namespace(s='ab') %}{% for i in range(40) %}\
         {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}{% endif %}{% for m in messages %}<|im_start|>\
         {{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n\
         {% endif %}",
    )
    .unwrap();
    let sft = root.join("sft");
    let tmpl = format!("data.chat_template={}", template.display());
    let o = finetune(&parent, &data, &sft, &[tmpl.as_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let mut s = common::serve(&sft, &[]);
    let url = format!("{}/v1/chat/completions", s.url);
    let hostile: Vec<_> = [5, 5, 5, 5, 7, 7, 7, 7]
        .into_iter()
        .map(|n| {
            let url = url.clone();
            std::thread::spawn(move || {
                post_json(&url, &serde_json::json!({"messages": chat_messages(n), "max_tokens": 4}))
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    assert_eq!(get_status(&format!("{}/health", s.url)), 200);
    assert!(started.elapsed().as_secs() < 5, "/health waited {:?}", started.elapsed());
    for (i, h) in hostile.into_iter().enumerate() {
        let (status, body) = h.join().unwrap();
        let want = if i < 4 { "more than 50000000 steps" } else { "more than 1024 MiB of memory" };
        assert_eq!(status, 400, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(want), "{want}: {body}");
    }
    let (status, body) = post_json(&url, &serde_json::json!({"messages": chat_messages(1), "max_tokens": 4}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(s.terminate(std::time::Duration::from_secs(30)), Some(143), "one SIGTERM ends the server");
}

/// `GET /v1/models/{id}` and a request naming a model agree: the served name (the run
/// directory's, `sft`), or a 404 naming the model.
fn the_served_model_is_the_one_name_answered(url: &str) {
    assert_eq!(get_status(&format!("{}/v1/models/sft", url)), 200);
    assert_eq!(get_status(&format!("{}/v1/models/gpt-4", url)), 404);
    // A request naming a model answers as `GET /v1/models/{id}` does: the served name, or a 404.
    for (model, want) in [("sft", 200), ("gpt-4", 404)] {
        let (status, body) = post_json(
            &format!("{url}/v1/chat/completions"),
            &serde_json::json!({"messages": chat_messages(1), "max_tokens": 2, "model": model}),
        );
        assert_eq!(status, want, "{model}: {body}");
    }
    let (status, body) =
        post_json(&format!("{}/v1/completions", url), &serde_json::json!({"prompt": "I", "model": "gpt-4"}));
    assert_eq!((status, body["error"]["param"].as_str()), (404, Some("model")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("this server serves `sft`"), "{body}");
}

/// OpenAI's fields as its specification and vLLM accept them: `null` for the optional ones,
/// the `developer` and `tool` roles, an assistant turn with `content: null`, zero penalties,
/// `GET /v1/models/{id}`; a chat answer without `max_tokens` may run to the end of the
/// context; an answer cut by `max_tokens` inside the end-of-turn marker ends before it.
#[test]
fn the_chat_endpoint_takes_what_the_openai_specification_allows() {
    let root = common::Scratch::new("finetune-openai-fields");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let sft = root.join("sft");
    let o = finetune(&parent, &data, &sft, &["train.steps=200", "train.seq_len=160", "optim.lr=5e-3"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    // `perplexity` scores the held-out conversations as the run's validation loss does.
    let o = bin().arg("perplexity").arg("--checkpoint").arg(&sft).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    let last_eval = common::records(&sft, "eval").last().unwrap()["val_loss"].as_f64().unwrap();
    assert!(printed.contains(&format!("val_loss {last_eval:.4}")), "{printed} vs {last_eval}");
    assert!(printed.contains("assistant's tokens only"), "{printed}");
    let s = common::serve(&sft, &[]);
    let chat = format!("{}/v1/chat/completions", s.url);
    let nulls = serde_json::json!({"messages": [{"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Spell 3."}], "logprobs": null, "stream": null, "max_tokens": 8,
        "presence_penalty": 0, "frequency_penalty": 0, "temperature": 0});
    let (status, body) = post_json(&chat, &nulls);
    assert_eq!(status, 200, "{body}");
    let tools = serde_json::json!({"messages": [{"role": "user", "content": "Spell 3."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "spell", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "user", "content": "Spell 4."}], "max_tokens": 4});
    let (status, body) = post_json(&chat, &tools);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post_json(&chat, &serde_json::json!({"messages": chat_messages(1), "presence_penalty": 0.5}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "presence_penalty");
    let completion =
        serde_json::json!({"prompt": "Item", "echo": null, "logprobs": null, "stream": null, "max_tokens": 2});
    let (status, body) = post_json(&format!("{}/v1/completions", s.url), &completion);
    assert_eq!(status, 200, "{body}");
    the_served_model_is_the_one_name_answered(&s.url);
    a_chat_answer_runs_to_its_end_of_turn(&chat);
}

/// Without `max_tokens` a chat answer may run to the end of the 160-token context, and the
/// fine-tuned model's greedy answer ends its turn; cut inside the marker it ends before it.
fn a_chat_answer_runs_to_its_end_of_turn(chat: &str) {
    // Without max_tokens: up to the end of the 160-token context (OpenAI's and vLLM's default).
    let greedy =
        serde_json::json!({"messages": [{"role": "user", "content": "Spell 3."}], "temperature": 0, "logprobs": true});
    let (_, whole) = post_json(chat, &greedy);
    let usage = &whole["usage"];
    let (prompt, answer) = (usage["prompt_tokens"].as_u64().unwrap(), usage["completion_tokens"].as_u64().unwrap());
    match whole["choices"][0]["finish_reason"].as_str().unwrap() {
        "length" => assert_eq!(prompt + answer, 160, "{whole}"),
        _ => assert!(answer < 160 - prompt, "{whole}"),
    }
    // Cut three bytes into `<|im_end|>` (byte tokenizer: a token a byte), the answer is the one
    // that stopped at the marker.
    assert_eq!(whole["choices"][0]["finish_reason"], "stop", "the fine-tuned model ends its turn: {whole}");
    let text = whole["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    // `logprobs.content`: an entry per counted token, the marker's 10 bytes included.
    let entries = whole["choices"][0]["logprobs"]["content"].as_array().unwrap().len() as u64;
    assert_eq!((entries, entries as usize), (answer, text.len() + "<|im_end|>".len()), "{whole}");
    let mut cut = greedy.clone();
    cut["max_tokens"] = serde_json::json!(text.len() + 3);
    let (_, body) = post_json(chat, &cut);
    assert_eq!(body["choices"][0]["finish_reason"], "length", "{body}");
    assert_eq!(body["choices"][0]["message"]["content"].as_str().unwrap(), text, "{body}");
}

/// Renders `requests` with Python's jinja2 as `transformers` sets it up
/// (`tools/render_chat_template.py`).
fn jinja2_render(requests: &serde_json::Value) -> Vec<String> {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tools/render_chat_template.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(requests.to_string().as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "jinja2 (pip install jinja2): {}", common::stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A template fixture's source, BOS and EOS: ChatML's (no tokens), a `.jinja` file's (none), or a
/// `tokenizer_config.json`'s.
fn template_fixture(fixtures: &Path, name: &str) -> (String, String, String) {
    match name {
        "chatml" => (normlab::data::chat::template::CHATML.to_string(), String::new(), String::new()),
        n if n.ends_with(".jinja") => {
            (std::fs::read_to_string(fixtures.join(n)).unwrap(), String::new(), String::new())
        }
        n => {
            let c: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(fixtures.join(n)).unwrap()).unwrap();
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("chat_template"), s("bos_token"), s("eos_token"))
        }
    }
}

/// The export's `tokenizer_config.json`, checked to name no pad token (nor `config.json` a pad id).
fn exported_tokenizer_config(hf: &Path, name: &str) -> serde_json::Value {
    let read =
        |f: &str| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(hf.join(f)).unwrap()).unwrap() };
    let exported = read("tokenizer_config.json");
    assert!(exported.get("pad_token").is_none(), "{name}: {exported}");
    let config = read("config.json");
    assert!(config["pad_token_id"].is_null(), "{name}: no pad id: {config}");
    exported
}

/// For each conversation, two renderings with the generation prompt: by the original template
/// with its own tokens, then by the export's with the export's tokens.
fn original_and_exported(
    conversations: &[serde_json::Value],
    (source, bos, eos): (&str, &str, &str),
    exported: &serde_json::Value,
) -> serde_json::Value {
    let mut requests = Vec::new();
    for m in conversations {
        requests.push(serde_json::json!({"source": source, "bos_token": bos, "eos_token": eos, "messages": m,
            "add_generation_prompt": true}));
        requests.push(serde_json::json!({"source": exported["chat_template"], "bos_token": exported["bos_token"],
            "eos_token": exported["eos_token"], "messages": m, "add_generation_prompt": true}));
    }
    serde_json::Value::Array(requests)
}

/// For ChatML, Qwen2.5's, Llama-3's and Llama-3.2's templates (tests/fixtures/chat_templates):
/// the export's `tokenizer_config.json` template, rendered by jinja2 as `transformers` renders
/// it with the export's own special tokens, gives the text the original template gives with
/// its own (Llama-3's `<|begin_of_text|>`, not the export's `Ċ`), and as many bytes as the
/// server's prompt has tokens (a byte run). A template's turn end is its stop marker, from a
/// `.jinja` file too (a Llama-3 answer stops at `<|eot_id|>`). The export names no pad token,
/// so `generate()` without a mask hides no newline.
#[test]
fn the_export_renders_each_template_as_the_run_did() {
    let root = common::Scratch::new("finetune-export-templates");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates");
    let conversations = [
        serde_json::json!([{"role": "user", "content": "Spell 3."}]),
        serde_json::json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Spell 3."},
            {"role": "assistant", "content": "3 is spelled xxxx."}, {"role": "user", "content": "Spell 4."}]),
    ];
    for (name, stop) in [
        ("chatml", "<|im_end|>"),
        ("qwen25.json", "<|im_end|>"),
        ("llama3.json", "<|eot_id|>"),
        ("llama32.json", "<|eot_id|>"),
        ("llama3.jinja", "<|eot_id|>"),
    ] {
        let (source, bos, eos) = template_fixture(&fixtures, name);
        let spec = if name == "chatml" { "chatml".to_string() } else { fixtures.join(name).display().to_string() };
        let sft = root.join(format!("sft-{name}"));
        let o = finetune(&parent, &data, &sft, &[&format!("data.chat_template={spec}"), "train.seq_len=512"]);
        assert!(o.status.success(), "{name}: {}", common::stderr(&o));
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sft.join("run.json")).unwrap()).unwrap();
        assert_eq!(info["data"]["chat"]["template"]["stop"], stop, "{name}");
        let hf = root.join(format!("hf-{name}"));
        let o = bin().args(["export"]).arg(&sft).arg("--hf").arg(&hf).output().unwrap();
        assert!(o.status.success(), "{name}: {}", common::stderr(&o));
        let exported = exported_tokenizer_config(&hf, name);
        let texts = jinja2_render(&original_and_exported(&conversations, (&source, &bos, &eos), &exported));
        let s = common::serve(&sft, &[]);
        for (i, m) in conversations.iter().enumerate() {
            let (original, export) = (&texts[2 * i], &texts[2 * i + 1]);
            assert_eq!(export, original, "{name}: the export renders as the original template");
            if bos.len() > 1 {
                assert!(export.starts_with(&bos), "{name}: {export:?}");
            }
            let (status, r) = post_json(
                &format!("{}/v1/chat/completions", s.url),
                &serde_json::json!({"messages": m, "max_tokens": 1}),
            );
            assert_eq!(status, 200, "{name}: {r}");
            assert_eq!(r["usage"]["prompt_tokens"].as_u64().unwrap() as usize, export.len(), "{name}: {export:?}");
        }
    }
}

/// `export --peft` names an exported base as the adapter's `base_model_name_or_path` (so that
/// `AutoPeftModelForCausalLM.from_pretrained(ADAPTER)` finds it): the parent exported into
/// `ADAPTER/base` (the same files as `export PARENT --hf`), or `--base`, checked to be an
/// export of the parent's model; a file or a run directory as `--peft` is named as such.
#[test]
fn the_peft_adapter_names_an_exported_base() {
    let root = common::Scratch::new("finetune-peft-base");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let lora = root.join("sft-lora");
    let o = finetune(&parent, &data, &lora, &["model.lora.rank=2"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let adapter = root.join("adapter");
    let o = bin().arg("export").arg(&lora).arg("--peft").arg(&adapter).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(adapter.join("adapter_config.json")).unwrap()).unwrap();
    let base = PathBuf::from(cfg["base_model_name_or_path"].as_str().unwrap());
    assert!(base.is_absolute() && base == std::path::absolute(adapter.join("base")).unwrap(), "{cfg}");
    let own = root.join("parent-hf");
    let o = bin().arg("export").arg(&parent).arg("--hf").arg(&own).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert_eq!(std::fs::read(base.join(f)).unwrap(), std::fs::read(own.join(f)).unwrap(), "{f}");
    }
    let named = root.join("adapter-named");
    let o = bin().arg("export").arg(&lora).arg("--peft").arg(&named).arg("--base").arg(&own).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(named.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(
        cfg["base_model_name_or_path"].as_str().unwrap(),
        std::path::absolute(&own).unwrap().display().to_string()
    );
    peft_refusals(&root, &lora);
}

/// `--base` that is an export of another model, and a file as `--peft`: one `error:` line each.
fn peft_refusals(root: &Path, lora: &Path) {
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let cfg = common::tiny_run(&other, 2, "recipe = \"peri\"\n", "");
    let o = bin().args(["train", "--quiet", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let other_hf = root.join("other-hf");
    assert!(bin().arg("export").arg(other.join("run")).arg("--hf").arg(&other_hf).output().unwrap().status.success());
    let file = root.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> =
        vec![(vec![other_hf.as_os_str()], "is not an export of this run's model"), (vec![], "give --peft a directory")];
    for (i, (base_arg, want)) in cases.into_iter().enumerate() {
        let mut c = bin();
        c.arg("export").arg(lora).arg("--peft");
        if i == 1 {
            c.arg(&file)
        } else {
            c.arg(root.join("bad-adapter"))
        };
        if let Some(b) = base_arg.first() {
            c.arg("--base").arg(b);
        }
        let line = common::error_line(&c.output().unwrap());
        assert!(line.contains(want), "{want}: {line}");
    }
}

/// The report of a fine-tune whose parent was retrained since says that the parent's weights
/// are no longer those it was fine-tuned from, beside the parent's (new) loss.
#[test]
fn the_report_says_when_the_parent_changed() {
    let root = common::Scratch::new("finetune-parent-changed");
    let parent = parent(&root);
    let data = root.join("chat.jsonl");
    write_jsonl(&data, &records("messages"));
    let sft = root.join("sft");
    let o = finetune(&parent, &data, &sft, &[]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let report = |dir: &Path| {
        let o = bin().arg("report").arg(dir).output().unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        std::fs::read_to_string(dir.join("report/report.md")).unwrap()
    };
    assert!(!report(&sft).contains("weights changed since"), "the parent is as it was");
    let o = bin()
        .args(["train", "--quiet", "--force", "--config"])
        .arg(root.join("cfg.toml"))
        .args(["--set", "train.steps=25"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = report(&sft);
    assert!(md.contains("pretraining (its weights changed since)") && md.contains("not those this run was"), "{md}");
}

/// A 20 000-turn conversation is prepared up to the window only (each turn past it was once
/// located by rendering every turn before it: minutes, in silence), with a line saying what is
/// being prepared; it trains cut after its last answer inside the window.
#[test]
fn a_very_long_conversation_is_prepared_up_to_the_window() {
    let root = common::Scratch::new("finetune-long-conversation");
    let parent = parent(&root);
    let mut rows = records("messages");
    let turns: Vec<serde_json::Value> = (0..20_000)
        .map(|i| serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {i}")}))
        .collect();
    rows.insert(0, serde_json::json!({"messages": turns}));
    let data = root.join("long.jsonl");
    write_jsonl(&data, &rows);
    let t0 = std::time::Instant::now();
    let o = finetune(&parent, &data, &root.join("sft"), &[]);
    let took = t0.elapsed();
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("preparing 13 conversations of 20024 turns"), "{err}");
    assert!(err.contains("cut after their last answer that fits"), "{err}");
    assert!(took < std::time::Duration::from_secs(60), "prepared in {took:?}");
    eprintln!("a 20 000-turn conversation prepared and trained 2 steps in {took:?}");
}
