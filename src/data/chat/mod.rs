//! Conversations for supervised fine-tuning: read from the layouts people have, rendered by a
//! chat template, tokenized with only the assistant's tokens learned.
//!
//! - [`layouts`]: OpenAI `messages`, ShareGPT / LIMA `conversations`, Alpaca records as
//!   [`Conversation`]s
//! - [`bounded`]: a user's template rendered within bounds on its steps, output, memory and time
//! - [`template`]: the Jinja chat template `transformers`' `apply_chat_template` reads, and
//!   normlab's default (ChatML)
//! - [`encode`]: a conversation as an [`Example`](super::example::Example) whose learned ranges
//!   are the assistant turns, and the rule for a conversation longer than the context
//! - [`builtin`]: `instructions`, the built-in conversations (text normalisation and held-out
//!   addresses)
//! - [`load`]: a run's conversations, their held-out split and what `data.json` records

pub mod bounded;
pub mod builtin;
pub mod encode;
pub mod layouts;
pub mod load;
pub mod template;

use serde::{Deserialize, Serialize};

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result (OpenAI's `tool` turn), rendered as the template renders it; never learned.
    Tool,
}

impl Role {
    /// The role a record names: OpenAI's `system`/`developer` (OpenAI's name for the system
    /// turn of its newer models)/`user`/`assistant`/`tool`, ShareGPT's `human`/`gpt` (and
    /// `model`, `bot`, `chatgpt`, as published ShareGPT dumps spell the assistant).
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "system" | "developer" => Role::System,
            "user" | "human" => Role::User,
            "assistant" | "gpt" | "model" | "bot" | "chatgpt" => Role::Assistant,
            "tool" => Role::Tool,
            other => anyhow::bail!(
                "unknown role `{other}`; give system (or developer), user, assistant or tool (or ShareGPT's human / gpt)"
            ),
        })
    }
}

/// A message's text from OpenAI's `content`: a string, a list of `{"type": "text", "text": …}`
/// parts (joined), or `null` (an assistant turn that only called tools: empty).
pub fn text_content(content: &serde_json::Value) -> Result<String, String> {
    use serde_json::Value;
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(t)) => Ok(t),
                _ => Err("content parts must be {\"type\": \"text\", \"text\": …}; this model reads text parts".into()),
            })
            .collect(),
        _ => Err("content must be a string, a list of text parts or null".into()),
    }
}

/// One turn, as a chat template receives it (`{"role": …, "content": …}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// A conversation with at least one assistant turn (checked where it is built).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    pub messages: Vec<Message>,
}

impl Conversation {
    /// Checks that the conversation has an assistant turn to learn from.
    pub fn new(messages: Vec<Message>) -> anyhow::Result<Self> {
        anyhow::ensure!(
            messages.iter().any(|m| m.role == Role::Assistant),
            "the conversation has no assistant turn, so nothing in it would be learned; give at least one \
             assistant message"
        );
        Ok(Self { messages })
    }
}
