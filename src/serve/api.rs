//! The request bodies the server accepts, their checks, and the JSON it answers with: OpenAI's
//! `/v1/completions` (with `top_k` added) and the pairs task form `/v1/normalize`.

use crate::train::generate::Sampling;
use serde::Deserialize;
use serde_json::{Value, json};

/// A 4xx answer: the status and OpenAI's error object.
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

/// `POST /v1/completions`. Unknown fields are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionRequest {
    /// Accepted and echoed; the server has one model.
    pub model: Option<String>,
    pub prompt: String,
    pub max_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<usize>,
    pub stop: Option<Stop>,
    pub seed: Option<u64>,
    #[serde(default)]
    pub stream: bool,
    /// Only 1.
    pub n: Option<usize>,
    /// Accepted and ignored.
    pub user: Option<String>,
}

/// `POST /v1/normalize` (pairs runs): a source text in, its normalised form out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeRequest {
    pub input: String,
    #[serde(default)]
    pub stream: bool,
}

/// OpenAI's default `max_tokens`.
pub const DEFAULT_MAX_TOKENS: usize = 16;

/// A body parsed as `T`, or a 400 naming what is wrong (serde's message names the field).
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid request body: {e}"), None))
}

impl CompletionRequest {
    /// The sampling settings, checked (OpenAI's ranges; temperature 0 is greedy).
    pub fn sampling(&self) -> Result<Sampling, ApiError> {
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
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::bad("only n = 1 is supported", Some("n")));
        }
        Ok(Sampling { temperature, top_k: self.top_k, top_p })
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
    /// `max_tokens` if it fits, the rest of the context when not given.
    pub fn max_new(&self, prompt_len: usize, context: usize) -> Result<usize, ApiError> {
        let room = context.saturating_sub(prompt_len);
        if room == 0 {
            return Err(ApiError::bad(
                format!("the prompt is {prompt_len} tokens; the model's context is {context}: shorten the prompt"),
                Some("prompt"),
            ));
        }
        match self.max_tokens {
            None => Ok(DEFAULT_MAX_TOKENS.min(room)),
            Some(0) => Err(ApiError::bad("max_tokens must be at least 1", Some("max_tokens"))),
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
        let e = parse::<CompletionRequest>(br#"{"prompt": "a", "echo": true}"#).unwrap_err();
        assert!(e.status == 400 && e.message.contains("unknown field `echo`"), "{}", e.message);
        let e = parse::<CompletionRequest>(br#"{"prompt": "a", "max_tokens": "ten"}"#).unwrap_err();
        assert!(e.message.contains("invalid type: string \"ten\""), "{}", e.message);
        assert!(parse::<CompletionRequest>(b"{\"prompt\": ").is_err());
    }

    #[test]
    fn max_tokens_must_fit_the_context() {
        let r: CompletionRequest = parse(br#"{"prompt": "a", "max_tokens": 60}"#).unwrap();
        assert_eq!(r.max_new(4, 64).unwrap(), 60);
        assert_eq!(r.max_new(5, 64).unwrap_err().param, Some("max_tokens"));
        let d: CompletionRequest = parse(br#"{"prompt": "a"}"#).unwrap();
        assert_eq!(d.max_new(60, 64).unwrap(), 4, "the default is cut to the room left");
        assert_eq!(d.max_new(64, 64).unwrap_err().param, Some("prompt"));
    }
}
