//! The chat template: a Jinja template over `messages` and `add_generation_prompt`, rendered
//! as `transformers`' `apply_chat_template` renders it (Jinja with `trim_blocks` and
//! `lstrip_blocks`, Python's string methods, `raise_exception`, the tokenizer's `bos_token` and
//! `eos_token` in scope), so that the template a run saves in its export's
//! `tokenizer_config.json` gives the tokens the run was trained on.
//!
//! A run without a template of its own uses ChatML ([`CHATML`]), the template of the
//! `transformers` chat-templating guide: `<|im_start|>{role}\n{content}<|im_end|>\n` per turn,
//! and `<|im_start|>assistant\n` as the generation prompt. Its markers are plain text for
//! every normlab tokenizer, so it needs no new token ids.

use super::Message;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// ChatML, as the `transformers` documentation writes it.
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + \
    message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ \
    '<|im_start|>assistant\\n' }}{% endif %}";

/// Where ChatML's turns end: generation stops there.
pub const CHATML_STOP: &str = "<|im_end|>";

/// A chat template and the special-token strings it may use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatTemplate {
    pub source: String,
    #[serde(default)]
    pub bos_token: String,
    #[serde(default)]
    pub eos_token: String,
    /// Where an assistant turn ends in the rendered text: what decoding stops at.
    pub stop: String,
}

impl ChatTemplate {
    pub fn chatml() -> Self {
        Self { source: CHATML.into(), bos_token: String::new(), eos_token: String::new(), stop: CHATML_STOP.into() }
    }

    /// `data.chat_template`: `chatml`, a `.jinja` file, or a `tokenizer_config.json` (its
    /// `chat_template`, `bos_token` and `eos_token`). A template from a file stops where it
    /// ends an assistant turn (Llama-3's `<|eot_id|>`, ChatML's `<|im_end|>`), else at its
    /// `eos_token`, else at ChatML's marker.
    pub fn named(spec: &str) -> anyhow::Result<Self> {
        if spec == "chatml" {
            return Ok(Self::chatml());
        }
        let path = Path::new(spec);
        let text = std::fs::read_to_string(path).with_context(|| {
            format!("cannot read the chat template {spec}; give `chatml`, a .jinja file or a tokenizer_config.json")
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_string();
        let t = if path.extension().is_some_and(|e| e == "json") { from_config(&text, spec)? } else { plain(text) };
        t.check()?;
        t.with_stop()
    }

    /// Renders `messages`; with `generation_prompt`, followed by the opening of an assistant
    /// turn. A template that fails, or runs past its bounds ([`super::bounded`]), is one error
    /// naming the template's problem.
    pub fn render(&self, messages: &[Message], generation_prompt: bool) -> anyhow::Result<String> {
        super::bounded::render(&super::bounded::Request {
            source: self.source.clone(),
            bos_token: self.bos_token.clone(),
            eos_token: self.eos_token.clone(),
            messages: serde_json::to_value(messages)?,
            add_generation_prompt: generation_prompt,
        })
    }

    /// Renders a two-turn conversation, so a template that cannot render is refused when it is
    /// named rather than at the first example, and one that renders nothing is refused too.
    fn check(&self) -> anyhow::Result<()> {
        use super::Role::{Assistant, User};
        let m = |role, c: &str| Message { role, content: c.into() };
        let text = self.render(&[m(User, "q"), m(Assistant, "a")], false)?;
        anyhow::ensure!(
            !text.trim().is_empty(),
            "the chat template renders a conversation as empty text, so there is nothing to train on or answer; \
             give a template that writes the messages (e.g. `chatml`)"
        );
        Ok(())
    }

    /// Where this template ends an assistant turn: the text it writes after the answer's
    /// content (a user turn, then an assistant turn whose content is a marker), whitespace
    /// trimmed; `None` when it writes nothing there.
    fn turn_end(&self) -> anyhow::Result<Option<String>> {
        use super::Role::{Assistant, User};
        const ANSWER: &str = "NORMLAB_ANSWER_7f3c";
        let m = |role, c: &str| Message { role, content: c.into() };
        let through = self.render(&[m(User, "q"), m(Assistant, ANSWER)], false)?;
        let after = through.rfind(ANSWER).map(|i| through[i + ANSWER.len()..].trim().to_string());
        Ok(after.filter(|s| !s.is_empty()))
    }

    /// The stop marker: where the template ends an assistant turn, else the `eos_token`, else
    /// ChatML's marker.
    fn with_stop(mut self) -> anyhow::Result<Self> {
        self.stop = match self.turn_end()? {
            Some(end) => end,
            None if !self.eos_token.is_empty() => self.eos_token.clone(),
            None => CHATML_STOP.into(),
        };
        Ok(self)
    }
}

fn plain(source: String) -> ChatTemplate {
    ChatTemplate { source, bos_token: String::new(), eos_token: String::new(), stop: CHATML_STOP.into() }
}

/// `tokenizer_config.json`'s template: a string, or transformers' list of named templates
/// (`[{"name": "default", "template": …}, …]`, of which the default is the chat template);
/// its special tokens are strings or `{"content": …}`.
fn from_config(text: &str, name: &str) -> anyhow::Result<ChatTemplate> {
    let v: serde_json::Value = serde_json::from_str(text).with_context(|| format!("{name} is not JSON"))?;
    let source = match v.get("chat_template") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .with_context(|| {
                format!("{name}'s `chat_template` is a list of named templates without one named `default`")
            })?
            .to_string(),
        _ => anyhow::bail!("{name} has no `chat_template` string (nor a list of named templates)"),
    };
    let token = |k: &str| -> String {
        let t = v.get(k);
        t.and_then(|t| t.as_str().or_else(|| t.get("content")?.as_str())).unwrap_or_default().to_string()
    };
    let (bos_token, eos_token) = (token("bos_token"), token("eos_token"));
    Ok(ChatTemplate { source, bos_token, eos_token, stop: CHATML_STOP.into() })
}

#[cfg(test)]
mod tests {
    use super::super::Role::{Assistant, System, User};
    use super::*;

    fn m(role: super::super::Role, c: &str) -> Message {
        Message { role, content: c.into() }
    }

    #[test]
    fn chatml_renders_as_its_definition() {
        let t = ChatTemplate::chatml();
        let conv = [m(System, "Be brief."), m(User, "Hi"), m(Assistant, "Hello.")];
        let want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                    <|im_start|>assistant\nHello.<|im_end|>\n";
        assert_eq!(t.render(&conv, false).unwrap(), want);
        let prompt = t.render(&conv[..2], true).unwrap();
        assert!(prompt.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "{prompt}");
    }

    #[test]
    fn huggingface_template_features_render() {
        // Blocks on their own lines (trim_blocks / lstrip_blocks), Python's `.strip()`,
        // `loop.first`, `bos_token` and `raise_exception`, as Llama-style templates use them.
        let src = "{{ bos_token }}\n{% for message in messages %}\n    {% if message['role'] == 'system' %}\
                   {{ raise_exception('no system turns') }}{% endif %}\n{{ '[' + message['role'] + '] ' + \
                   message['content'].strip() }}{% if not loop.last %} | {% endif %}\n{% endfor %}\n";
        let t =
            ChatTemplate { source: src.into(), bos_token: "<s>".into(), eos_token: String::new(), stop: "|".into() };
        // Python's jinja2 as `transformers` configures it (ImmutableSandboxedEnvironment with
        // trim_blocks and lstrip_blocks) renders this as below: the newline after an
        // expression stays, those after block tags go.
        assert_eq!(t.render(&[m(User, "  q "), m(Assistant, "a")], false).unwrap(), "<s>\n[user] q | [assistant] a");
        let e = format!("{:#}", t.render(&[m(System, "s")], false).unwrap_err());
        assert!(e.contains("failed to render") && e.contains("no system turns"), "{e}");
        let bad = ChatTemplate { source: "{% for %}".into(), ..ChatTemplate::chatml() };
        assert!(format!("{:#}", bad.render(&[], false).unwrap_err()).contains("does not parse"));
    }

    /// transformers' list of named templates gives its `default`; a Llama-3 `.jinja` file stops
    /// at the `<|eot_id|>` it ends turns with (not ChatML's marker); a byte-order mark is dropped.
    #[test]
    fn named_templates_stop_markers_and_a_bom() {
        let dir = crate::testutil::temp_dir("chat-template-named");
        let path = dir.join("tokenizer_config.json");
        let cfg = serde_json::json!({"chat_template": [{"name": "tool_use", "template": "{{ 'tools' }}"},
            {"name": "default", "template": CHATML}], "eos_token": "<|im_end|>"});
        std::fs::write(&path, cfg.to_string()).unwrap();
        let t = ChatTemplate::named(path.to_str().unwrap()).unwrap();
        assert_eq!((t.source.as_str(), t.stop.as_str()), (CHATML, "<|im_end|>"));
        let llama = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}\
                     <|eot_id|>{% endfor %}";
        let jinja = dir.join("llama3.jinja");
        std::fs::write(&jinja, format!("\u{feff}{llama}")).unwrap();
        let t = ChatTemplate::named(jinja.to_str().unwrap()).unwrap();
        assert_eq!((t.source.as_str(), t.stop.as_str()), (llama, "<|eot_id|>"));
        let unnamed = serde_json::json!({"chat_template": [{"name": "tool_use", "template": "x"}]});
        std::fs::write(&path, unnamed.to_string()).unwrap();
        let e = format!("{:#}", ChatTemplate::named(path.to_str().unwrap()).unwrap_err());
        assert!(e.contains("without one named `default`"), "{e}");
    }

    /// `strftime_now` formats the local time as the C library's `strftime` does (which Python's
    /// `datetime.strftime` calls): today's date as `date` prints it.
    #[test]
    fn strftime_now_is_todays_date() {
        let t = ChatTemplate { source: "{{ strftime_now('%Y-%m-%d') }}".into(), ..ChatTemplate::chatml() };
        let ours = t.render(&[], false).unwrap();
        let date = std::process::Command::new("date").arg("+%Y-%m-%d").output().unwrap();
        assert_eq!(ours, String::from_utf8_lossy(&date.stdout).trim());
    }

    #[test]
    fn a_tokenizer_config_gives_template_and_tokens() {
        let dir = crate::testutil::temp_dir("chat-template-config");
        let path = dir.join("tokenizer_config.json");
        let cfg =
            serde_json::json!({"chat_template": CHATML, "eos_token": {"content": "<|im_end|>"}, "bos_token": null});
        std::fs::write(&path, cfg.to_string()).unwrap();
        let t = ChatTemplate::named(path.to_str().unwrap()).unwrap();
        assert_eq!((t.source.as_str(), t.eos_token.as_str(), t.stop.as_str()), (CHATML, "<|im_end|>", "<|im_end|>"));
        let e = format!("{:#}", ChatTemplate::named(dir.join("none.jinja").to_str().unwrap()).unwrap_err());
        assert!(e.contains("cannot read the chat template"), "{e}");
    }
}
