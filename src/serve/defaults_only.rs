//! OpenAI request fields this server has nothing to do for, accepted where their value asks
//! nothing of it (`null`, and each field's default: vLLM's OpenAI server does the same) and
//! refused by name, with the reason, where it asks for what it cannot do.

use super::api::ApiError;
use serde_json::Value;

/// One field: its name, whether a value asks nothing of this server, and why another value
/// cannot be honoured.
struct Field {
    name: &'static str,
    accepts: fn(&Value) -> bool,
    why: &'static str,
}

/// The chat request's fields of this kind.
const CHAT: [Field; 12] = [
    Field {
        name: "response_format",
        accepts: is_text_format,
        why: "this server answers in plain text (no JSON mode or schema); send {\"type\": \"text\"}",
    },
    Field { name: "tools", accepts: is_empty_list, why: "this model calls no tools" },
    Field {
        name: "tool_choice",
        accepts: |v| v == "none" || v == "auto",
        why: "this model calls no tools; send \"none\"",
    },
    Field { name: "parallel_tool_calls", accepts: Value::is_boolean, why: "it must be true or false" },
    Field { name: "logit_bias", accepts: is_empty_object, why: "this server samples without logit biases; send {}" },
    Field {
        name: "service_tier",
        accepts: |v| v == "auto" || v == "default",
        why: "this server has one tier; send \"auto\"",
    },
    Field { name: "metadata", accepts: Value::is_object, why: "it must be an object of strings" },
    Field { name: "store", accepts: |v| v == false, why: "this server keeps no completions; send false" },
    Field { name: "reasoning_effort", accepts: |_| false, why: "this model has no reasoning mode" },
    Field { name: "modalities", accepts: is_text_only, why: "this model answers in text only; send [\"text\"]" },
    Field { name: "prediction", accepts: |_| false, why: "predicted outputs are not supported" },
    Field { name: "audio", accepts: |_| false, why: "this model answers in text only" },
];

/// The completion request's fields of this kind.
const COMPLETION: [Field; 2] = [
    Field { name: "suffix", accepts: |v| v == "", why: "this model does not insert text before a suffix" },
    Field { name: "logit_bias", accepts: is_empty_object, why: "this server samples without logit biases; send {}" },
];

fn is_text_format(v: &Value) -> bool {
    v.get("type").is_some_and(|t| t == "text") && v.as_object().is_some_and(|o| o.len() == 1)
}

fn is_empty_list(v: &Value) -> bool {
    v.as_array().is_some_and(Vec::is_empty)
}

fn is_empty_object(v: &Value) -> bool {
    v.as_object().is_some_and(serde_json::Map::is_empty)
}

fn is_text_only(v: &Value) -> bool {
    v.as_array().is_some_and(|m| m.iter().all(|x| x == "text"))
}

/// Checks the fields of `table` a request set (absent and `null` are unset).
fn check(table: &[Field], set: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    for f in table {
        match set.get(f.name) {
            Some(v) if !v.is_null() && !(f.accepts)(v) => {
                return Err(ApiError::bad(format!("{} = {v} is not supported: {}", f.name, f.why), Some(f.name)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Which request a body is, for the fields of this kind it may carry.
#[derive(Clone, Copy)]
pub enum Route {
    Chat,
    Completion,
}

/// A request body parsed as `T` after this kind of field is taken out of it and checked (the
/// rest is parsed strictly: an unknown field is still refused by name).
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8], route: Route) -> Result<T, ApiError> {
    let invalid = |e: serde_json::Error| ApiError::bad(format!("invalid request body: {e}"), None);
    let mut fields: serde_json::Map<String, Value> = serde_json::from_slice(body).map_err(invalid)?;
    let (table, extra): (&[Field], &[&str]) = match route {
        Route::Chat => (&CHAT, &[]),
        Route::Completion => (&COMPLETION, &["best_of"]),
    };
    let names = table.iter().map(|f| f.name).chain(extra.iter().copied());
    let set: serde_json::Map<String, Value> = names.filter_map(|n| Some((n.to_string(), fields.remove(n)?))).collect();
    check(table, &set)?;
    if let Some(best_of) = set.get("best_of").filter(|v| !v.is_null()) {
        check_best_of(best_of, fields.get("n"))?;
    }
    serde_json::from_value(Value::Object(fields)).map_err(invalid)
}

/// `best_of` is accepted where it asks for no more completions than are returned (`n`, 1 when
/// unset): this server returns every completion it draws.
fn check_best_of(best_of: &Value, n: Option<&Value>) -> Result<(), ApiError> {
    let n = n.and_then(Value::as_u64).unwrap_or(1);
    match best_of.as_u64() == Some(n) {
        true => Ok(()),
        false => Err(ApiError::bad(
            format!(
                "best_of = {best_of} is not supported: this server returns every completion it draws; send best_of = n ({n})"
            ),
            Some("best_of"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict request, as the routes' own are.
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Chat {
        #[serde(rename = "messages")]
        _messages: Value,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Completion {
        #[serde(rename = "prompt")]
        _prompt: Value,
        n: Option<usize>,
    }

    fn chat(extra: &str) -> Result<Chat, ApiError> {
        parse(format!(r#"{{"messages": [{{"role": "user", "content": "hi"}}]{extra}}}"#).as_bytes(), Route::Chat)
    }

    fn completion(extra: &str) -> Result<Completion, ApiError> {
        parse(format!(r#"{{"prompt": "a"{extra}}}"#).as_bytes(), Route::Completion)
    }

    /// Every field at `null` and at the value that asks nothing is accepted, as vLLM does.
    #[test]
    fn null_and_default_values_are_accepted() {
        for f in &CHAT {
            assert!(chat(&format!(r#", "{}": null"#, f.name)).is_ok(), "{} = null", f.name);
        }
        let defaults = r#", "response_format": {"type": "text"}, "tools": [], "tool_choice": "none",
            "parallel_tool_calls": true, "logit_bias": {}, "service_tier": "auto", "metadata": {"k": "v"},
            "store": false, "modalities": ["text"]"#;
        assert!(chat(defaults).is_ok());
        let defaults = r#", "suffix": "", "logit_bias": {}, "best_of": 2, "n": 2"#;
        assert_eq!(completion(defaults).map(|r| r.n).unwrap(), Some(2));
        assert!(completion(r#", "suffix": null, "best_of": 1"#).is_ok());
    }

    /// A value the server cannot honour is a 400 naming the field and why; an unknown field
    /// is still refused by name.
    #[test]
    fn values_asking_for_more_are_refused_by_name() {
        let cases = [
            (chat(r#", "response_format": {"type": "json_object"}"#).err(), "response_format", "plain text"),
            (chat(r#", "tools": [{"type": "function"}]"#).err(), "tools", "calls no tools"),
            (chat(r#", "logit_bias": {"65": 5}"#).err(), "logit_bias", "without logit biases"),
            (chat(r#", "store": true"#).err(), "store", "keeps no completions"),
            (chat(r#", "reasoning_effort": "low""#).err(), "reasoning_effort", "no reasoning mode"),
            (chat(r#", "modalities": ["text", "audio"]"#).err(), "modalities", "text only"),
            (completion(r#", "suffix": "end""#).err(), "suffix", "does not insert"),
            (completion(r#", "best_of": 3"#).err(), "best_of", "best_of = n (1)"),
        ];
        for (got, field, why) in cases {
            let e = got.expect("refused");
            assert_eq!((e.status, e.param), (400, Some(field)), "{}", e.message);
            assert!(e.message.starts_with(field) && e.message.contains(why), "{}", e.message);
        }
        let e = chat(r#", "temprature": 0"#).expect_err("refused");
        assert!(e.message.contains("unknown field `temprature`"), "{}", e.message);
    }
}
