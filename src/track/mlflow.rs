//! An MLflow tracking server through its REST API (`/api/2.0/mlflow/…`, MLflow's
//! `rest-api.html`): experiments by name, runs, batched metrics, params and tags, the run's
//! status, and artifacts through the server's artifact proxy (`mlflow-artifacts:` URIs, the
//! default of `mlflow server`). Plain HTTP with ureq; no Python.

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};
use std::time::Duration;

/// MLflow's `LogBatch` limits: at most 1000 metrics, 100 params and 100 tags a request.
pub const MAX_METRICS: usize = 1000;
pub const MAX_PARAMS: usize = 100;
pub const MAX_TAGS: usize = 100;
/// MLflow's longest param value (`MAX_PARAM_VAL_LENGTH`) and key (`MAX_ENTITY_KEY_LENGTH`).
pub const MAX_PARAM_VALUE: usize = 6000;
pub const MAX_KEY: usize = 250;

/// One metric value (`Metric` of the REST API).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metric {
    pub key: String,
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    pub step: i64,
}

/// A run as the server made it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRef {
    pub run_id: String,
    pub artifact_uri: String,
}

/// Why a request failed: the server could not be reached or failed itself (worth retrying),
/// or it refused the request (retrying cannot help).
#[derive(Debug)]
pub enum Failure {
    Unreachable(String),
    Refused(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(s) | Failure::Refused(s) => f.write_str(s),
        }
    }
}

/// The client of one server.
pub struct Mlflow {
    agent: ureq::Agent,
    base: String,
}

/// Milliseconds since the Unix epoch now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Mlflow {
    /// The server at `base` (`http://host:port`).
    pub fn new(base: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self { agent, base: base.trim_end_matches('/').to_string() }
    }

    fn api(&self, path: &str) -> String {
        format!("{}/api/2.0/mlflow/{path}", self.base)
    }

    /// The answer's JSON, or why there is none.
    fn answer(&self, what: &str, r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Value, Failure> {
        let mut r = r.map_err(|e| Failure::Unreachable(format!("{what}: cannot reach {}: {e}", self.base)))?;
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match status {
            200..=299 => Ok(body),
            500.. => Err(Failure::Unreachable(format!("{what}: {} answered {status}: {}", self.base, brief(&text)))),
            _ => Err(Failure::Refused(format!("{what}: {} refused it ({status}): {}", self.base, brief(&text)))),
        }
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        let r = self.agent.post(&self.api(path)).header("content-type", "application/json").send(body.to_string());
        self.answer(path, r)
    }

    /// The id of experiment `name`, created when it does not exist.
    pub fn experiment(&self, name: &str) -> Result<String, Failure> {
        let url = format!("{}?experiment_name={}", self.api("experiments/get-by-name"), encode(name));
        match self.answer("experiments/get-by-name", self.agent.get(&url).call()) {
            Ok(v) => return id(&v["experiment"]["experiment_id"], "experiments/get-by-name"),
            Err(Failure::Refused(why)) if why.contains("RESOURCE_DOES_NOT_EXIST") => {}
            Err(e) => return Err(e),
        }
        match self.post("experiments/create", &json!({ "name": name })) {
            Ok(v) => id(&v["experiment_id"], "experiments/create"),
            // Another process created it in between.
            Err(Failure::Refused(why)) if why.contains("RESOURCE_ALREADY_EXISTS") => {
                let v = self.answer("experiments/get-by-name", self.agent.get(&url).call())?;
                id(&v["experiment"]["experiment_id"], "experiments/get-by-name")
            }
            Err(e) => Err(e),
        }
    }

    /// A new run named `name` in `experiment`, with `tags`.
    pub fn create_run(&self, experiment: &str, name: &str, tags: &[(String, String)]) -> Result<RunRef, Failure> {
        let tags: Vec<Value> = tags.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect();
        let body = json!({ "experiment_id": experiment, "run_name": name, "start_time": now_ms(), "tags": tags });
        let v = self.post("runs/create", &body)?;
        let info = &v["run"]["info"];
        Ok(RunRef {
            run_id: id(&info["run_id"], "runs/create")?,
            artifact_uri: id(&info["artifact_uri"], "runs/create")?,
        })
    }

    /// The artifact URI of run `run_id` (for a run made by an earlier process).
    pub fn artifact_uri(&self, run_id: &str) -> Result<String, Failure> {
        let url = format!("{}?run_id={}", self.api("runs/get"), encode(run_id));
        let v = self.answer("runs/get", self.agent.get(&url).call())?;
        id(&v["run"]["info"]["artifact_uri"], "runs/get")
    }

    /// One `log-batch` request; the caller keeps within [`MAX_METRICS`], [`MAX_PARAMS`] and
    /// [`MAX_TAGS`].
    pub fn log_batch(
        &self,
        run_id: &str,
        metrics: &[Metric],
        params: &[(String, String)],
        tags: &[(String, String)],
    ) -> Result<(), Failure> {
        let kv = |v: &[(String, String)]| v.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect::<Vec<_>>();
        let body = json!({ "run_id": run_id, "metrics": metrics, "params": kv(params), "tags": kv(tags) });
        self.post("runs/log-batch", &body).map(|_| ())
    }

    /// Sets the run's status (`RUNNING`, `FINISHED`, `FAILED`, `KILLED`); an ended run gets its
    /// end time.
    pub fn set_status(&self, run_id: &str, status: &str) -> Result<(), Failure> {
        let mut body = json!({ "run_id": run_id, "status": status });
        if status != "RUNNING" {
            body["end_time"] = json!(now_ms());
        }
        self.post("runs/update", &body).map(|_| ())
    }

    /// Uploads `bytes` as artifact `path` of the run whose artifacts live at `artifact_uri`.
    pub fn put_artifact(&self, artifact_uri: &str, path: &str, bytes: &[u8]) -> Result<(), Failure> {
        let Some(rest) = artifact_uri.strip_prefix("mlflow-artifacts:") else {
            return Err(Failure::Refused(format!(
                "the server keeps artifacts at {artifact_uri}, which only it can write; start `mlflow server` with \
                 artifact serving (its default) to receive them"
            )));
        };
        let url = format!("{}/api/2.0/mlflow-artifacts/artifacts/{}/{path}", self.base, rest.trim_start_matches('/'));
        let r = self.agent.put(&url).header("content-type", "application/octet-stream").send(bytes);
        self.answer("mlflow-artifacts", r).map(|_| ())
    }
}

/// A string id from an answer, or a failure naming the request.
fn id(v: &Value, what: &str) -> Result<String, Failure> {
    v.as_str().map(str::to_string).ok_or_else(|| Failure::Refused(format!("{what}: the answer has no id: {v}")))
}

/// The start of an answer, for a message.
fn brief(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    t.replace('\n', " ")
}

/// A query-string value, percent-encoded.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Reads a whole file for upload, naming it on failure.
pub fn read_artifact(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {} to upload it", path.display()))
}

/// Refuses a key MLflow would refuse (longer than [`MAX_KEY`] bytes).
pub fn check_key(key: &str) -> anyhow::Result<()> {
    if key.len() > MAX_KEY {
        bail!("the key `{key}` is longer than MLflow's {MAX_KEY} bytes");
    }
    Ok(())
}
