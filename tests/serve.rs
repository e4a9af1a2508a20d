//! `normlab serve` as clients use it: the binary on a free localhost port, called over HTTP by
//! a Rust client (ureq), curl, and OpenAI's Python client where installed. Greedy completions
//! must equal `normlab generate`'s; batching, streaming and the task form must change nothing;
//! every bad request gets a 4xx JSON error and the server keeps serving.

mod common;

use serde_json::{Value, json};

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_normlab"))
}

use common::serve;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// POSTs `body` (any text) to `path`; returns the status, `Retry-After` and the body.
fn post(url: &str, path: &str, body: &str) -> (u16, Option<String>, String) {
    let mut r = agent().post(format!("{url}{path}")).header("content-type", "application/json").send(body).unwrap();
    let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), retry, r.body_mut().read_to_string().unwrap())
}

fn completion(url: &str, body: &Value) -> Value {
    let (status, _, text) = post(url, "/v1/completions", &body.to_string());
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The text of a streamed completion: the `data:` chunks' texts concatenated, checking that
/// the stream ends with a finish reason and `[DONE]`.
fn streamed(url: &str, body: &Value) -> String {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let (status, _, text) = post(url, "/v1/completions", &body.to_string());
    assert_eq!(status, 200, "{text}");
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(chunks.last().unwrap()["choices"][0]["finish_reason"].is_string(), "{text}");
    chunks.iter().map(|c| c["choices"][0]["text"].as_str().unwrap().to_string()).collect()
}

/// A byte-level run trained to a real loss on the built-in corpus: 2 layers, d = 64, context
/// 128, 400 steps at 1e-2 (validation ≈ 2.2 nats per byte; predicting bytes by frequency gives
/// ≈ 3.0), so its attention depends on positions as a trained model's does.
fn trained_on_the_corpus(root: &Path) -> PathBuf {
    let run = root.join("run");
    let o = bin()
        .args(["train", "--quiet"])
        .args(["--set", &format!("run.dir={:?}", run.display().to_string())])
        .args(["--set", "model.n_layers=2", "--set", "model.d_model=64", "--set", "model.n_heads=4"])
        .args(["--set", "train.seq_len=128", "--set", "train.batch_size=8", "--set", "train.steps=400"])
        .args(["--set", "run.eval_every=400", "--set", "optim.lr=1e-2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    run
}

/// Sentence starts of 2 to 120 bytes from the validation addresses (never trained on).
fn held_out_prompts(n: usize) -> Vec<String> {
    let text = "Fellow-Citizens of the Senate and House of Representatives: I embrace with great satisfaction the \
        opportunity which now presents itself of congratulating you on the present favorable prospects of our public \
        affairs. The recent accession of the important State of North Carolina to the Constitution of the United \
        States gives greater dignity to our Union.";
    (0..n).map(|i| text[i * 7 % 60..][..2 + (i * 37) % 119].to_string()).collect()
}

/// The shared tiny byte-level run (2 layers, d = 32, context 32), trained 40 steps.
fn trained(root: &Path) -> PathBuf {
    let cfg = common::tiny_run(root, 40, "recipe = \"peri\"\n", "");
    let o = bin().args(["train", "--quiet", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    root.join("run")
}

fn generate(run: &Path, prompt: &str, n: usize) -> String {
    let o = bin()
        .args([
            "generate",
            "--temperature",
            "0",
            "--prompt",
            prompt,
            "--max-new-tokens",
            &n.to_string(),
            "--checkpoint",
        ])
        .arg(run)
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    out.strip_prefix(prompt).unwrap().strip_suffix('\n').unwrap().to_string()
}

#[test]
fn completions_match_generate_and_batching_and_streaming_change_nothing() {
    let root = common::Scratch::new("serve-lm");
    let run = trained(&root);
    let s = serve(&run, &[]);
    let prompts = ["Item 3 of the", "The north", "I", "district. Item 12"];
    for p in prompts {
        let c = completion(&s.url, &json!({"prompt": p, "max_tokens": 12, "temperature": 0}));
        assert_eq!(c["choices"][0]["text"].as_str().unwrap(), generate(&run, p, 12), "{p}");
        assert_eq!(c["usage"]["completion_tokens"], 12);
        assert_eq!(c["choices"][0]["finish_reason"], "length");
    }
    // Eight requests (greedy and seeded sampling, different lengths) alone, then at once.
    let bodies: Vec<Value> = (0..8)
        .map(|i| {
            let t = if i % 2 == 0 { 0.0 } else { 0.9 };
            json!({"prompt": prompts[i % 4], "max_tokens": 6 + i, "temperature": t, "seed": i, "top_k": 20, "top_p": 0.9})
        })
        .collect();
    let alone: Vec<Value> = bodies.iter().map(|b| completion(&s.url, b)["choices"][0]["text"].clone()).collect();
    let together: Vec<Value> = std::thread::scope(|sc| {
        let hs: Vec<_> =
            bodies.iter().map(|b| sc.spawn(|| completion(&s.url, b)["choices"][0]["text"].clone())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(alone, together);
    // A stop string: two characters the greedy text has after its fifth byte.
    let full = generate(&run, "Item 3", 25);
    let stop = full.get(5..7).expect("an ASCII text of 25 bytes").to_string();
    let with_stop = json!({"prompt": "Item 3", "max_tokens": 25, "temperature": 0, "stop": [stop.clone(), "@@@"]});
    let stopped = completion(&s.url, &with_stop);
    assert_eq!(stopped["choices"][0]["text"].as_str().unwrap(), &full[..full.find(&stop).unwrap()]);
    assert_eq!(stopped["choices"][0]["finish_reason"], "stop");
    // Streaming gives the same text, with and without a stop string.
    for b in [&bodies[1], &bodies[2], &with_stop] {
        let whole = completion(&s.url, b)["choices"][0]["text"].as_str().unwrap().to_string();
        assert_eq!(streamed(&s.url, b), whole, "{b}");
    }
}

#[test]
fn bad_requests_get_a_4xx_json_error_and_the_server_keeps_serving() {
    let root = common::Scratch::new("serve-bad");
    let run = trained(&root);
    let s = serve(&run, &[]);
    let cases = [
        ("/v1/completions", "{\"prompt\": ", "invalid request body"),
        ("/v1/completions", "not json", "invalid request body"),
        ("/v1/completions", r#"{"prompt": 7}"#, "prompt must be a string"),
        ("/v1/completions", r#"{"prompt": "a", "max_tokens": "ten"}"#, "invalid type"),
        ("/v1/completions", r#"{"prompt": ""}"#, "must not be empty"),
        ("/v1/completions", r#"{"prompt": "a", "max_tokens": 1000}"#, "exceeds the model's context of 32"),
        ("/v1/completions", r#"{"prompt": "a", "max_tokens": 0}"#, "0 only with echo"),
        ("/v1/completions", r#"{"prompt": "a", "suffix": "b"}"#, "suffix = \"b\" is not supported"),
        ("/v1/completions", r#"{"prompt": "a", "sufix": "b"}"#, "unknown field `sufix`"),
        ("/v1/completions", r#"{"prompt": "a", "logprobs": 30}"#, "logprobs must be between 0 and 20"),
        ("/v1/completions", r#"{"prompt": [1, -2]}"#, "a list of token ids"),
        ("/v1/completions", r#"{"prompt": [300]}"#, "outside the vocabulary of 256"),
        ("/v1/completions", r#"{"prompt": "a", "temperature": -1}"#, "temperature"),
        ("/v1/completions", r#"{"prompt": "a", "top_p": 0}"#, "top_p"),
        ("/v1/completions", r#"{"prompt": "a", "n": 0}"#, "n must be between 1"),
        ("/v1/completions", r#"{"prompt": "a", "stop": ["", "x"]}"#, "stop"),
        ("/v1/completions", &format!(r#"{{"prompt": "{}"}}"#, "x".repeat(40)), "shorten the prompt"),
        ("/v1/normalize", r#"{"input": "5 kg"}"#, "not a pairs run"),
        ("/v2/anything", "{}", "no such route"),
    ];
    for (path, body, says) in cases {
        let (status, _, text) = post(&s.url, path, body);
        assert!((400..500).contains(&status), "{path} {body}: {status} {text}");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let mut h = agent().get(format!("{}/health", s.url)).call().unwrap();
    assert_eq!(h.status().as_u16(), 200);
    let health: Value = serde_json::from_str(&h.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!((health["status"].as_str(), health["context"].as_u64()), (Some("ok"), Some(32)));
    completion(&s.url, &json!({"prompt": "Item", "max_tokens": 3}));
    let metrics = agent().get(format!("{}/metrics", s.url)).call().unwrap().body_mut().read_to_string().unwrap();
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{metrics}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(value("normlab_request_errors_total"), cases.len() as f64);
    assert_eq!(value("normlab_generated_tokens_total"), 3.0);
    assert_eq!(value("normlab_request_latency_seconds_count"), 1.0);
    assert_eq!(value("normlab_queue_length"), 0.0);
}

#[test]
fn past_the_queue_requests_get_503_with_retry_after() {
    let root = common::Scratch::new("serve-queue");
    let run = trained(&root);
    let s = serve(&run, &["--max-batch", "1", "--queue", "1"]);
    let body = json!({"prompt": "Item", "max_tokens": 28, "temperature": 0}).to_string();
    let answers: Vec<(u16, Option<String>, String)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..16).map(|_| sc.spawn(|| post(&s.url, "/v1/completions", &body))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let refused: Vec<_> = answers.iter().filter(|a| a.0 == 503).collect();
    assert!(!refused.is_empty(), "16 requests at once against a queue of 1: none refused");
    assert!(refused.iter().all(|a| a.1.as_deref() == Some("1") && a.2.contains("queue is full")));
    assert!(answers.iter().all(|a| a.0 == 200 || a.0 == 503));
    assert_eq!(post(&s.url, "/v1/completions", &body).0, 200, "the server recovers");
}

/// curl and OpenAI's Python client (`pip install openai`), each where this machine has it.
#[test]
fn curl_and_the_openai_client_get_the_same_text() {
    let root = common::Scratch::new("serve-clients");
    let run = trained(&root);
    let s = serve(&run, &[]);
    let body = json!({"prompt": "Item 3 of the", "max_tokens": 12, "temperature": 0});
    let want = completion(&s.url, &body)["choices"][0]["text"].as_str().unwrap().to_string();
    let curl =
        Command::new("curl").args(["-s", "-d", &body.to_string(), &format!("{}/v1/completions", s.url)]).output();
    let o = curl.expect("curl is needed by this test (the README's setup installs it: apt-get install curl)");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["choices"][0]["text"].as_str().unwrap(), want);
    let script = format!(
        "from openai import OpenAI\nc = OpenAI(base_url='{}/v1', api_key='none')\n\
         r = c.completions.create(model='run', prompt='Item 3 of the', max_tokens=12, temperature=0)\n\
         s = c.completions.create(model='run', prompt='Item 3 of the', max_tokens=12, temperature=0, stream=True)\n\
         d = c.completions.create(model='run', prompt='Item 3 of the', max_tokens=12, temperature=0, suffix=None, best_of=1, logit_bias={{}})\n\
         assert d.choices[0].text == r.choices[0].text, d\n\
         try:\n    c.completions.create(model='run', prompt='Item', max_tokens=2, suffix='.'); e = ''\n\
         except Exception as x:\n    e = str(x)\n\
         assert '400' in e and 'suffix' in e, e\n\
         print(repr((r.choices[0].text, ''.join(x.choices[0].text for x in s))))",
        s.url
    );
    let has_openai = Command::new("python3").args(["-c", "import openai"]).output().is_ok_and(|o| o.status.success());
    assert!(
        has_openai,
        "the openai Python package is needed by this test: python3 -m pip install openai (README, setup)"
    );
    let o = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8(o.stdout).unwrap();
    let quoted = format!("{want:?}");
    assert_eq!(printed.trim(), format!("({quoted}, {quoted})").replace('"', "'"), "{printed}");
    the_openai_clients_scores_are_normlabs(&s.url, &run, &root);
}

/// The OpenAI client's `echo` with `logprobs` and normlab's own scoring agree: on this byte
/// run " the" after "Item 3 of" is the prompt's last four tokens, whose log-probabilities
/// (from the client) add up to the log-likelihood `normlab evaluate` gives the choice.
fn the_openai_clients_scores_are_normlabs(url: &str, run: &Path, root: &Path) {
    let script = format!(
        "import json\nfrom openai import OpenAI\nc = OpenAI(base_url='{url}/v1', api_key='none')\n\
         r = c.completions.create(model='run', prompt='Item 3 of the', max_tokens=0, echo=True, logprobs=1)\n\
         print(json.dumps(r.choices[0].logprobs.token_logprobs))"
    );
    let o = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lps: Vec<Option<f64>> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((lps.len(), lps[0]), (13, None), "13 bytes, the first unscored");
    let client: f64 = lps[9..].iter().map(|x| x.unwrap()).sum();
    let tasks = root.join("mc.jsonl");
    std::fs::write(&tasks, "{\"context\": \"Item 3 of\", \"choices\": [\"the\", \"a\"], \"answer\": 0}\n").unwrap();
    let cfg = root.join("mc.toml");
    let spec = format!(
        "[eval]\ntasks = [{{ name = \"mc\", layout = \"multiple_choice\", path = \"{}\" }}]\n",
        tasks.display()
    );
    std::fs::write(&cfg, spec).unwrap();
    let out = root.join("mc.json");
    let o = bin()
        .args(["evaluate", "--samples", "--checkpoint"])
        .arg(run)
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ours = e["results"][0]["items"][0]["lls"][0].as_f64().unwrap();
    assert!((ours - client).abs() <= 1e-5 * ours.abs().max(1.0), "normlab {ours} vs the client's {client}");
}

/// A pairs run serves the task form: every test source normalised over HTTP equals the
/// prediction the run's own evaluation decoded (`pairs_eval.json`).
#[test]
fn the_task_form_normalises_as_the_runs_evaluation_did() {
    let root = common::Scratch::new("serve-pairs");
    let words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
    let jsonl: String = (0..200)
        .map(|i| {
            format!(
                "{{\"in\": \"{}{}\", \"out\": \"{} {}\"}}\n",
                i / 10 % 10,
                i % 10,
                words[i / 10 % 10],
                words[i % 10]
            )
        })
        .collect();
    std::fs::write(root.join("pairs.jsonl"), jsonl).unwrap();
    let cfg = format!(
        "[run]\ndir = \"{run}\"\neval_every = 30\ncheckpoint_every = 30\n\n[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\n\n\
         [data]\ntask = \"pairs\"\ncorpus = \"{corpus}\"\nsource_field = \"in\"\ntarget_field = \"out\"\nheldout = \"none\"\n\
         cache_dir = \"{cache}\"\n\n[train]\nbatch_size = 8\nseq_len = 24\nsteps = 60\n",
        run = root.join("run").display(),
        corpus = root.join("pairs.jsonl").display(),
        cache = root.join("cache").display(),
    );
    std::fs::write(root.join("cfg.toml"), cfg).unwrap();
    let o = bin().args(["train", "--quiet", "--config"]).arg(root.join("cfg.toml")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let eval: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("run/pairs_eval.json")).unwrap()).unwrap();
    let preds = eval["predictions"].as_array().unwrap();
    assert!(!preds.is_empty());
    let s = serve(&root.join("run"), &[]);
    let (status, _, text) = post(&s.url, "/v1/normalize", &json!({"input": "12\u{1e}3"}).to_string());
    assert!(status == 400 && text.contains("U+001E or U+001F"), "markers are refused as in training: {text}");
    for p in preds.iter().take(12) {
        let (status, _, text) = post(&s.url, "/v1/normalize", &json!({"input": p["source"]}).to_string());
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["output"], p["prediction"], "{}", p["source"]);
    }
}

/// On a trained model, 32 greedy requests of prompts from 2 to 120 bytes, arriving staggered
/// and decoded together (joins and leaves at every step), give exactly the answers they get
/// one at a time; so do the same requests through the OpenAI fields that batch them (a list
/// of prompts, token-id prompts, `n`).
#[test]
fn batched_answers_equal_sequential_ones_on_a_trained_model() {
    let root = common::Scratch::new("serve-batched");
    let run = trained_on_the_corpus(&root);
    let s = serve(&run, &["--max-batch", "16"]);
    let bodies: Vec<Value> = held_out_prompts(32)
        .iter()
        .map(|p| json!({"prompt": p, "max_tokens": (128 - p.len()).min(40), "temperature": 0}))
        .collect();
    let alone: Vec<String> = bodies.iter().map(|b| text_of(&completion(&s.url, b), 0)).collect();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let url = &s.url;
                sc.spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis((i % 8) as u64 * 4));
                    text_of(&completion(url, b), 0)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let differing: Vec<usize> = (0..32).filter(|&i| alone[i] != together[i]).collect();
    assert!(differing.is_empty(), "batched answers differ from sequential ones for prompts {differing:?}");
    // One request with a list of eight prompts: each choice is that prompt's own answer.
    let prompts: Vec<String> = held_out_prompts(12).into_iter().filter(|p| p.len() <= 100).take(8).collect();
    let listed = completion(&s.url, &json!({"prompt": prompts, "max_tokens": 20, "temperature": 0}));
    for (i, p) in prompts.iter().enumerate() {
        let one = completion(&s.url, &json!({"prompt": p, "max_tokens": 20, "temperature": 0}));
        assert_eq!(text_of(&listed, i), text_of(&one, 0), "{p}");
        assert_eq!(listed["choices"][i]["index"], i);
    }
}

/// The `i`-th choice's text.
fn text_of(v: &Value, i: usize) -> String {
    v["choices"][i]["text"].as_str().unwrap_or_else(|| panic!("no choice {i} in {v}")).to_string()
}

/// OpenAI's completion fields as lm-evaluation-harness and the OpenAI client use them: token
/// prompts equal their text, `echo` with `logprobs` scores the prompt (the first token `null`,
/// each position's top tokens in order, the greedy token first among them), `max_tokens: 0`
/// with `echo` only scores, `n` draws with seeds `seed + j`, and a streamed answer ends with
/// the usage when asked; vLLM's tokenizer routes round-trip.
#[test]
fn echo_logprobs_n_and_the_tokenizer_routes_follow_openai_and_vllm() {
    let root = common::Scratch::new("serve-fields");
    let run = trained_on_the_corpus(&root);
    let s = serve(&run, &[]);
    let prompt = "The recent accession of the important State";
    tokenizer_routes_round_trip(&s.url, prompt);
    echo_scores_the_prompt(&s.url, prompt);
    n_draws_with_seeds_and_streams_with_the_usage(&s.url, prompt);
    echo_takes_the_context_and_one_token(&s.url, &run);
}

/// lm-eval's `local-completions` with `max_length = context + 2` sends its longest sequences
/// as its `hf` model feeds them: context + 1 tokens (129 here), `echo`, `max_tokens: 1`. They
/// are scored (positions shared with the 128-token prefix score alike), the one token after
/// them is `normlab generate`'s, and 130 tokens are refused.
fn echo_takes_the_context_and_one_token(url: &str, run: &Path) {
    let text: String = held_out_prompts(40).concat().chars().filter(char::is_ascii).take(129).collect();
    let ask =
        |p: &str, max: usize| json!({"prompt": p, "echo": true, "logprobs": 1, "max_tokens": max, "temperature": 0});
    let full = completion(url, &ask(&text, 1));
    let lp = &full["choices"][0]["logprobs"]["token_logprobs"];
    assert_eq!(lp.as_array().unwrap().len(), 130, "129 scored prompt tokens and one generated");
    let prefix = completion(url, &ask(&text[..128], 0));
    let shorter = prefix["choices"][0]["logprobs"]["token_logprobs"].as_array().unwrap().clone();
    for (i, want) in shorter.iter().enumerate().skip(1) {
        let (g, w) = (lp[i].as_f64().unwrap(), want.as_f64().unwrap());
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "position {i}: {g} vs {w}");
    }
    assert_eq!(text_of(&full, 0), format!("{text}{}", generate(run, &text, 1)));
    let too_long: String = format!("{text}x");
    let (status, _, body) = post(url, "/v1/completions", &ask(&too_long, 1).to_string());
    assert_eq!(status, 400, "{body}");
}

/// vLLM's `/tokenize`, `/detokenize` and `/tokenizer_info` on a byte run.
fn tokenizer_routes_round_trip(url: &str, prompt: &str) {
    let ids = post_json(url, "/tokenize", &json!({"prompt": prompt, "add_special_tokens": false}))["tokens"].clone();
    assert_eq!(ids, json!(prompt.bytes().collect::<Vec<u8>>()), "a byte run's tokens are the UTF-8 bytes");
    assert_eq!(post_json(url, "/detokenize", &json!({"tokens": ids}))["prompt"], prompt);
    let info: Value = serde_json::from_str(&get(url, "/tokenizer_info")).unwrap();
    assert_eq!((info["eos_token"].as_str(), info["model_max_length"].as_u64()), (Some("\n"), Some(128)));
}

/// `echo` with `logprobs`: a token-id prompt is its text, the first token's entries are `null`,
/// no token is above the most likely one, the greedy token is the most likely; `max_tokens: 0`
/// only scores.
fn echo_scores_the_prompt(url: &str, prompt: &str) {
    let ids: Vec<u8> = prompt.bytes().collect();
    let scored = |p: Value| {
        completion(url, &json!({"prompt": p, "echo": true, "logprobs": 3, "max_tokens": 1, "temperature": 0}))
    };
    let (by_text, by_ids) = (scored(json!(prompt)), scored(json!(ids)));
    assert_eq!(by_text["choices"], by_ids["choices"], "a token-id prompt is its text");
    let lp = &by_text["choices"][0]["logprobs"];
    let n = prompt.len() + 1;
    assert_eq!(lp["tokens"].as_array().unwrap().len(), n);
    assert!(lp["token_logprobs"][0].is_null() && lp["top_logprobs"][0].is_null());
    let max_of = |i: usize| {
        let top = lp["top_logprobs"][i].as_object().unwrap();
        // The 3 most likely tokens and always the chosen one (OpenAI: up to logprobs + 1).
        assert!(!top.is_empty() && top.len() <= 4, "{top:?}");
        top.iter()
            .map(|(t, v)| (v.as_f64().unwrap(), t.clone()))
            .fold((f64::NEG_INFINITY, String::new()), |a, b| if b.0 > a.0 { b } else { a })
    };
    for i in 1..n {
        assert!(lp["token_logprobs"][i].as_f64().unwrap() <= max_of(i).0 + 1e-6, "no token above the most likely");
    }
    let (best_lp, best) = max_of(n - 1);
    assert_eq!(lp["tokens"][n - 1].as_str(), Some(best.as_str()), "greedy: the generated token is the most likely");
    assert_eq!(lp["token_logprobs"][n - 1].as_f64(), Some(best_lp));
    assert_eq!(lp["text_offset"][1], 1);
    let only = completion(url, &json!({"prompt": prompt, "echo": true, "logprobs": 0, "max_tokens": 0}));
    assert_eq!((text_of(&only, 0).as_str(), only["usage"]["completion_tokens"].as_u64()), (prompt, Some(0)));
    // `logprobs: 0`: each position's entry holds the chosen token alone, with its log-probability.
    let zero = &only["choices"][0]["logprobs"];
    for i in 1..prompt.len() {
        let want = json!({ zero["tokens"][i].as_str().unwrap(): zero["token_logprobs"][i] });
        assert_eq!(zero["top_logprobs"][i], want, "position {i}");
    }
    let prompt_scores = json!(lp["token_logprobs"].as_array().unwrap()[..n - 1]);
    assert_eq!(only["choices"][0]["logprobs"]["token_logprobs"], prompt_scores);
}

/// `n = 3`: choice j is what seed 5 + j draws alone; streamed with `n = 2` and the usage, each
/// choice's chunks add up to its answer and the last chunk holds the usage.
fn n_draws_with_seeds_and_streams_with_the_usage(url: &str, prompt: &str) {
    let three = completion(url, &json!({"prompt": prompt, "n": 3, "seed": 5, "max_tokens": 12, "temperature": 1.0}));
    for j in 0..3 {
        let one = completion(url, &json!({"prompt": prompt, "seed": 5 + j, "max_tokens": 12, "temperature": 1.0}));
        assert_eq!(text_of(&three, j as usize), text_of(&one, 0));
    }
    let body = json!({"prompt": prompt, "n": 2, "seed": 9, "max_tokens": 10, "temperature": 0.8, "stream": true,
        "stream_options": {"include_usage": true}});
    let (status, _, text) = post(url, "/v1/completions", &body.to_string());
    assert_eq!(status, 200, "{text}");
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let last = chunks.last().unwrap();
    assert_eq!((last["choices"].as_array().unwrap().len(), last["usage"]["completion_tokens"].as_u64()), (0, Some(20)));
    let whole = completion(url, &json!({"prompt": prompt, "n": 2, "seed": 9, "max_tokens": 10, "temperature": 0.8}));
    for j in 0..2 {
        let streamed: String = chunks
            .iter()
            .filter(|c| c["choices"][0]["index"] == j)
            .map(|c| c["choices"][0]["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(streamed, text_of(&whole, j as usize));
    }
}

fn post_json(url: &str, path: &str, body: &Value) -> Value {
    let (status, _, text) = post(url, path, &body.to_string());
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn get(url: &str, path: &str) -> String {
    agent().get(format!("{url}{path}")).call().unwrap().body_mut().read_to_string().unwrap()
}
