//! Conversation records in the layouts fine-tuning data is published in, one record each:
//!
//! - `messages` (OpenAI): `{"messages": [{"role": "system"|"user"|"assistant", "content": …}]}`,
//!   `content` a string or OpenAI's list of text parts, as the server reads them
//! - `conversations` (ShareGPT, LIMA): `{"conversations": [...]}`, either turns as
//!   `{"from": "human"|"gpt"|"system", "value": …}` (or `role`/`content`), or LIMA's plain
//!   strings, which alternate user, assistant, user, … from the first
//! - `alpaca`: `{"instruction": …, "input": …, "output": …}`: one user turn (the instruction,
//!   then a blank line and the input when there is one, as Alpaca's prompt joins them) and
//!   one assistant turn (the output)
//!
//! `auto` takes the layout from the first record's fields.

use super::{Conversation, Message, Role};
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a conversation record is laid out (`data.chat_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatLayout {
    #[default]
    Auto,
    Messages,
    Conversations,
    Alpaca,
}

impl ChatLayout {
    /// The layout `record`'s fields say, for `auto`.
    pub fn detect(record: &Value) -> anyhow::Result<Self> {
        let has = |k: &str| record.get(k).is_some();
        Ok(if has("messages") {
            ChatLayout::Messages
        } else if has("conversations") {
            ChatLayout::Conversations
        } else if has("instruction") && has("output") {
            ChatLayout::Alpaca
        } else {
            bail!(
                "the record has none of `messages`, `conversations`, or `instruction` and `output`; give OpenAI \
                 messages, ShareGPT/LIMA conversations or Alpaca records (or set data.chat_layout)"
            )
        })
    }
}

/// The conversation `record` holds in `layout` (not `auto`).
pub fn conversation(record: &Value, layout: ChatLayout) -> anyhow::Result<Conversation> {
    let messages = match layout {
        ChatLayout::Auto => return conversation(record, ChatLayout::detect(record)?),
        ChatLayout::Messages => turns(record.get("messages").context("no `messages` list")?)?,
        ChatLayout::Conversations => turns(record.get("conversations").context("no `conversations` list")?)?,
        ChatLayout::Alpaca => alpaca(record)?,
    };
    Conversation::new(messages)
}

/// A list of turns: objects with `role`/`content` or `from`/`value`, or plain strings that
/// alternate user and assistant.
fn turns(list: &Value) -> anyhow::Result<Vec<Message>> {
    let items = list.as_array().context("the turns are not a list")?;
    items.iter().enumerate().map(|(i, t)| turn(t, i).with_context(|| format!("turn {}", i + 1))).collect()
}

fn turn(t: &Value, i: usize) -> anyhow::Result<Message> {
    if let Some(text) = t.as_str() {
        let role = if i.is_multiple_of(2) { Role::User } else { Role::Assistant };
        return Ok(Message { role, content: text.to_string() });
    }
    let field = |a: &str, b: &str| t.get(a).or_else(|| t.get(b));
    let role = field("role", "from").and_then(Value::as_str).context("no `role` (or `from`) string")?;
    let content = field("content", "value").context("no `content` (or `value`) string")?;
    let content = super::text_content(content).map_err(|e| anyhow::anyhow!("`content`: {e}"))?;
    Ok(Message { role: Role::parse(role)?, content })
}

fn alpaca(r: &Value) -> anyhow::Result<Vec<Message>> {
    let text = |k: &str| r.get(k).and_then(Value::as_str);
    let instruction = text("instruction").context("no `instruction` string")?;
    let output = text("output").context("no `output` string")?;
    let user = match text("input").filter(|s| !s.trim().is_empty()) {
        Some(input) => format!("{instruction}\n\n{input}"),
        None => instruction.to_string(),
    };
    Ok(vec![Message { role: Role::User, content: user }, Message { role: Role::Assistant, content: output.into() }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roles(c: &Conversation) -> Vec<Role> {
        c.messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn every_layout_reads_to_the_same_turns() {
        use Role::*;
        let m = json!({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                                    {"role": "assistant", "content": "a"}]});
        assert_eq!(roles(&conversation(&m, ChatLayout::Auto).unwrap()), vec![System, User, Assistant]);
        let sg = json!({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]});
        let c = conversation(&sg, ChatLayout::Auto).unwrap();
        assert_eq!((roles(&c), c.messages[1].content.as_str()), (vec![User, Assistant], "a"));
        let lima = json!({"conversations": ["q1", "a1", "q2", "a2"], "source": "stackexchange"});
        assert_eq!(roles(&conversation(&lima, ChatLayout::Auto).unwrap()), vec![User, Assistant, User, Assistant]);
        let al = json!({"instruction": "Add.", "input": "2 and 3", "output": "5"});
        let c = conversation(&al, ChatLayout::Auto).unwrap();
        assert_eq!(c.messages[0].content, "Add.\n\n2 and 3");
        let no_input = json!({"instruction": "Say hi.", "input": "", "output": "hi"});
        assert_eq!(conversation(&no_input, ChatLayout::Alpaca).unwrap().messages[0].content, "Say hi.");
    }

    #[test]
    fn bad_records_name_what_is_wrong() {
        let err = |v: Value| format!("{:#}", conversation(&v, ChatLayout::Auto).unwrap_err());
        let e = err(json!({"messages": [{"role": "user", "content": "q"}]}));
        assert!(e.contains("no assistant turn"), "{e}");
        let e = err(json!({"messages": [{"role": "wizard", "content": "q"}, {"role": "assistant", "content": "a"}]}));
        assert!(e.contains("turn 1") && e.contains("unknown role `wizard`"), "{e}");
        let e = err(json!({"text": "plain"}));
        assert!(e.contains("messages") && e.contains("data.chat_layout"), "{e}");
        let e = err(json!({"messages": [{"role": "user"}]}));
        assert!(e.contains("content"), "{e}");
        let e = err(json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}));
        assert!(e.contains("text parts"), "{e}");
    }

    /// OpenAI's content parts read as the server reads them: the texts joined.
    #[test]
    fn content_parts_read_as_their_texts() {
        let parts = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hel"},
            {"type": "text", "text": "lo"}]}, {"role": "assistant", "content": "hi"}]});
        assert_eq!(conversation(&parts, ChatLayout::Auto).unwrap().messages[0].content, "Hello");
    }
}
