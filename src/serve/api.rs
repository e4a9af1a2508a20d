//! The request bodies the server accepts and their checks: OpenAI's `/v1/completions` (with
//! `top_k` added), the pairs task form `/v1/normalize`, and vLLM's `/tokenize` and
//! `/detokenize`; OpenAI's error object for whatever is wrong.

use crate::decode::Sampling;
use serde::Deserialize;
use serde_json::{Value, json};

/// A 4xx or 5xx answer: the status and OpenAI's error object.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn bad(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self { status: 400, message: message.into(), param }
    }

    pub fn body(&self) -> Value {
        let kind = match self.status {
            503 => "overloaded_error",
            404 => "not_found_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        };
        json!({"error": {"message": self.message, "type": kind, "param": self.param, "code": null}})
    }
}

/// `stop`: one string or up to four.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// A last chunk with the request's `usage` (and no choices).
    #[serde(default)]
    pub include_usage: bool,
}

/// A field that may be sent as `null` (the OpenAI specification allows it for every optional
/// field): `null` and absent both mean the default.
pub fn null_is_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// OpenAI's `presence_penalty` / `frequency_penalty`: accepted at 0 (their default; `null`
/// too), which is what this server samples with; any other value is refused by name.
pub fn check_penalties(presence: Option<f64>, frequency: Option<f64>) -> Result<(), ApiError> {
    for (name, v) in [("presence_penalty", presence), ("frequency_penalty", frequency)] {
        if let Some(v) = v.filter(|v| *v != 0.0) {
            return Err(ApiError::bad(
                format!("{name} = {v} is not supported: this server samples without penalties; send 0 or leave it out"),
                Some(name),
            ));
        }
    }
    Ok(())
}

/// `POST /v1/completions`. Unknown fields are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionRequest {
    /// The served model, or unnamed ([`super::app::App::check_model`]).
    pub model: Option<String>,
    /// A string, a list of strings, a list of token ids or a list of token-id lists
    /// ([`prompts`]).
    pub prompt: Value,
    pub max_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<usize>,
    pub stop: Option<Stop>,
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    /// Completions per prompt; choice `i·n + j` is prompt `i`'s `j`-th, drawn with seed `seed + j`.
    pub n: Option<usize>,
    /// The prompt is returned before the completion (with its log-probabilities when
    /// `logprobs` is set; the first token's is `null`).
    #[serde(default, deserialize_with = "null_is_default")]
    pub echo: bool,
    /// Log-probabilities of the tokens and the `logprobs` most likely tokens at each position.
    pub logprobs: Option<usize>,
    /// Accepted at 0 ([`check_penalties`]).
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Accepted and ignored.
    pub user: Option<String>,
    /// Unset `max_tokens` means the rest of the context (chat, as OpenAI and vLLM), not
    /// [`DEFAULT_MAX_TOKENS`] (completions, as OpenAI).
    #[serde(skip)]
    pub max_tokens_default_rest: bool,
}

/// One prompt of a request, as given.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptIn {
    Text(String),
    Tokens(Vec<u32>),
}

/// `POST /v1/normalize` (pairs runs): a source text in, its normalised form out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeRequest {
    pub input: String,
    #[serde(default)]
    pub stream: bool,
}

/// `POST /tokenize` (vLLM's): text to token ids.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: String,
    /// Accepted: normlab's tokenizers add no special tokens either way.
    #[serde(default)]
    pub add_special_tokens: Option<bool>,
}

/// `POST /detokenize` (vLLM's): token ids to text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

/// OpenAI's default `max_tokens`.
pub const DEFAULT_MAX_TOKENS: usize = 16;
/// The most log-probabilities asked for per position (vLLM's default limit).
pub const MAX_LOGPROBS: usize = 20;
/// The most completions per prompt (OpenAI's limit).
pub const MAX_N: usize = 128;

/// A body parsed as `T`, or a 400 naming what is wrong (serde's message names the field).
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid request body: {e}"), None))
}

/// How many prompts `prompt` holds (1 for a string or one list of token ids), read without
/// copying any of them.
pub fn prompt_count(prompt: &Value) -> usize {
    match prompt {
        Value::Array(items) if !items.is_empty() && !items.iter().all(Value::is_number) => items.len(),
        _ => 1,
    }
}

/// The prompts of `prompt`: a string, a list of strings, a list of token ids, or a list of
/// token-id lists (OpenAI's four forms), each non-empty.
pub fn prompts(prompt: &Value) -> Result<Vec<PromptIn>, ApiError> {
    let wrong = || {
        ApiError::bad(
            "prompt must be a string, a list of strings, a list of token ids or a list of token-id lists",
            Some("prompt"),
        )
    };
    let ids = |v: &Value| -> Option<Vec<u32>> {
        v.as_array()?.iter().map(|x| x.as_u64().and_then(|i| u32::try_from(i).ok())).collect()
    };
    let out = match prompt {
        Value::String(s) => vec![PromptIn::Text(s.clone())],
        Value::Array(items) if items.is_empty() => {
            return Err(ApiError::bad("prompt must not be empty", Some("prompt")));
        }
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.iter().map(|s| PromptIn::Text(s.as_str().unwrap_or_default().to_string())).collect()
        }
        Value::Array(items) if items.iter().all(Value::is_number) => {
            vec![PromptIn::Tokens(ids(prompt).ok_or_else(wrong)?)]
        }
        Value::Array(items) => {
            items.iter().map(|v| ids(v).map(PromptIn::Tokens).ok_or_else(wrong)).collect::<Result<_, _>>()?
        }
        _ => return Err(wrong()),
    };
    Ok(out)
}

impl CompletionRequest {
    /// The sampling settings, checked (OpenAI's ranges; temperature 0 is greedy).
    pub fn sampling(&self) -> Result<Sampling, ApiError> {
        check_penalties(self.presence_penalty, self.frequency_penalty)?;
        let temperature = self.temperature.unwrap_or(1.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::bad("temperature must be between 0 and 2", Some("temperature")));
        }
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::bad("top_p must be in (0, 1]", Some("top_p")));
        }
        if self.top_k == Some(0) {
            return Err(ApiError::bad("top_k must be at least 1", Some("top_k")));
        }
        Ok(Sampling { temperature, top_k: self.top_k, top_p })
    }

    /// Completions per prompt, checked.
    pub fn n(&self) -> Result<usize, ApiError> {
        match self.n.unwrap_or(1) {
            n @ 1..=MAX_N => Ok(n),
            _ => Err(ApiError::bad(format!("n must be between 1 and {MAX_N}"), Some("n"))),
        }
    }

    /// `logprobs`, checked: at most [`MAX_LOGPROBS`], and not with `stream`.
    pub fn logprobs(&self) -> Result<Option<usize>, ApiError> {
        match self.logprobs {
            Some(k) if k > MAX_LOGPROBS => {
                Err(ApiError::bad(format!("logprobs must be between 0 and {MAX_LOGPROBS}"), Some("logprobs")))
            }
            Some(_) if self.stream => Err(ApiError::bad(
                "logprobs with stream is not supported; ask without stream for log-probabilities",
                Some("logprobs"),
            )),
            k => Ok(k),
        }
    }

    /// The stop strings, checked: at most 4, none empty.
    pub fn stops(&self) -> Result<Vec<String>, ApiError> {
        let v = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if v.len() > 4 || v.iter().any(String::is_empty) {
            return Err(ApiError::bad("stop must be up to 4 non-empty strings", Some("stop")));
        }
        Ok(v)
    }

    /// Tokens to generate for a prompt of `prompt_len` tokens in a context of `context`:
    /// `max_tokens` if it fits (0 only with `echo`: the prompt scored, nothing generated), the
    /// rest of the context up to OpenAI's default when not given.
    ///
    /// With `echo` the prompt may hold up to `context + 1` tokens, scored whole as
    /// lm-evaluation-harness's `hf` model scores its longest sequences (the last token only
    /// predicted); after a prompt that fills the context one token may still follow (lm-eval's
    /// log-likelihood requests ask for one), drawn as decoding continues past the context.
    pub fn max_new(&self, prompt_len: usize, context: usize) -> Result<usize, ApiError> {
        let room = context.saturating_sub(prompt_len);
        if self.echo && prompt_len <= context + 1 {
            match self.max_tokens {
                Some(0) => return Ok(0),
                Some(1) | None if room == 0 => return Ok(1),
                _ => {}
            }
        }
        if room == 0 && self.echo && prompt_len <= context + 1 {
            return Err(ApiError::bad(
                format!(
                    "max_tokens = {} after a {prompt_len}-token prompt that fills the model's context of {context}; \
                     with echo ask for at most 1",
                    self.max_tokens.unwrap_or_default()
                ),
                Some("max_tokens"),
            ));
        }
        if room == 0 {
            let most = if self.echo { context + 1 } else { context - 1 };
            let how = if self.echo { "with echo, scored whole" } else { "leaving room for a completion" };
            return Err(ApiError::bad(
                format!(
                    "the prompt is {prompt_len} tokens; the model's context is {context}, so a prompt holds at most \
                     {most} ({how}): shorten the prompt"
                ),
                Some("prompt"),
            ));
        }
        match self.max_tokens {
            None if self.max_tokens_default_rest => Ok(room),
            None => Ok(DEFAULT_MAX_TOKENS.min(room)),
            Some(0) => Err(ApiError::bad("max_tokens must be at least 1 (0 only with echo)", Some("max_tokens"))),
            Some(n) if n > room => Err(ApiError::bad(
                format!(
                    "max_tokens = {n} with a {prompt_len}-token prompt exceeds the model's context of {context} tokens; \
                     ask for at most {room}"
                ),
                Some("max_tokens"),
            )),
            Some(n) => Ok(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_wrong_types_are_named() {
        let e = parse::<CompletionRequest>(br#"{"prompt": "a", "sufix": "b"}"#).unwrap_err();
        assert!(e.status == 400 && e.message.contains("unknown field `sufix`"), "{}", e.message);
        let e = parse::<CompletionRequest>(br#"{"prompt": "a", "max_tokens": "ten"}"#).unwrap_err();
        assert!(e.message.contains("invalid type: string \"ten\""), "{}", e.message);
        assert!(parse::<CompletionRequest>(b"{\"prompt\": ").is_err());
    }

    /// OpenAI's four prompt forms, and what is none of them.
    #[test]
    fn prompts_come_in_four_forms() {
        let p = |s: &str| prompts(&serde_json::from_str(s).unwrap());
        assert_eq!(p(r#""hi""#).unwrap(), vec![PromptIn::Text("hi".into())]);
        assert_eq!(p(r#"["a", "b"]"#).unwrap(), vec![PromptIn::Text("a".into()), PromptIn::Text("b".into())]);
        assert_eq!(p("[5, 0, 7]").unwrap(), vec![PromptIn::Tokens(vec![5, 0, 7])]);
        assert_eq!(p("[[1], [2, 3]]").unwrap(), vec![PromptIn::Tokens(vec![1]), PromptIn::Tokens(vec![2, 3])]);
        for bad in ["7", "[-1]", "[1.5]", r#"["a", 1]"#, "[[1], \"a\"]", "{}", "[[-2]]"] {
            assert_eq!(p(bad).unwrap_err().param, Some("prompt"), "{bad}");
        }
        assert!(p("[]").unwrap_err().message.contains("must not be empty"));
    }

    #[test]
    fn max_tokens_must_fit_the_context() {
        let r: CompletionRequest = parse(br#"{"prompt": "a", "max_tokens": 60}"#).unwrap();
        assert_eq!(r.max_new(4, 64).unwrap(), 60);
        assert_eq!(r.max_new(5, 64).unwrap_err().param, Some("max_tokens"));
        let d: CompletionRequest = parse(br#"{"prompt": "a"}"#).unwrap();
        assert_eq!(d.max_new(60, 64).unwrap(), 4, "the default is cut to the room left");
        assert_eq!(d.max_new(64, 64).unwrap_err().param, Some("prompt"));
        let zero: CompletionRequest = parse(br#"{"prompt": "a", "max_tokens": 0}"#).unwrap();
        assert!(zero.max_new(3, 64).unwrap_err().message.contains("only with echo"));
        let echo: CompletionRequest = parse(br#"{"prompt": "a", "max_tokens": 0, "echo": true}"#).unwrap();
        assert_eq!(echo.max_new(64, 64).unwrap(), 0, "a whole context scored, nothing generated");
        // The limits the messages state are the ones applied: 65 tokens scored with echo, 63
        // prompt tokens with room for one more without.
        assert_eq!(echo.max_new(65, 64).unwrap(), 0);
        let e = echo.max_new(66, 64).unwrap_err().message;
        assert!(e.contains("holds at most 65 (with echo"), "{e}");
        let e = d.max_new(64, 64).unwrap_err().message;
        assert!(e.contains("holds at most 63") && d.max_new(63, 64).is_ok(), "{e}");
        let five: CompletionRequest = parse(br#"{"prompt": "a", "max_tokens": 5, "echo": true}"#).unwrap();
        let e = five.max_new(64, 64).unwrap_err().message;
        assert!(e.contains("with echo ask for at most 1") && e.contains("max_tokens = 5"), "{e}");
    }

    #[test]
    fn logprobs_n_and_stream_are_checked() {
        let r = |s: &str| parse::<CompletionRequest>(s.as_bytes()).unwrap();
        assert_eq!(r(r#"{"prompt": "a", "logprobs": 5}"#).logprobs().unwrap(), Some(5));
        assert_eq!(r(r#"{"prompt": "a", "logprobs": 21}"#).logprobs().unwrap_err().param, Some("logprobs"));
        assert!(r(r#"{"prompt": "a", "logprobs": 1, "stream": true}"#).logprobs().is_err());
        assert_eq!(r(r#"{"prompt": "a", "n": 3}"#).n().unwrap(), 3);
        assert_eq!(r(r#"{"prompt": "a", "n": 0}"#).n().unwrap_err().param, Some("n"));
    }
}
