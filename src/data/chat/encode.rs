//! A conversation as tokens, with the assistant turns the learned ranges.
//!
//! The whole conversation is rendered by the chat template and tokenized at once (the ids
//! `apply_chat_template(…, tokenize=True)` gives). An assistant turn's text is where the
//! rendering of the turns before it plus the generation prompt ends and the rendering up to
//! and including it ends: its content and the template's end-of-turn marker, so the model
//! learns to close its turn. A token is learned when its first byte lies in such a span.
//!
//! A conversation longer than the context is cut by [`crate::data::example::fit`]: after the
//! last assistant turn that ends inside it, never in the middle of a turn.

use super::template::ChatTemplate;
use super::{Conversation, Role};
use crate::data::Tokenizer;
use crate::data::example::Example;
use anyhow::{Context, ensure};
use std::ops::Range;

/// How far into a conversation its assistant turns are located: a turn that ends past
/// `tokens` (the run's window) is cut by [`crate::data::example::fit`] anyway, so once the text
/// rendered up to a turn holds more than `tokens · bytes_per_token` bytes (the longest token
/// of the vocabulary), no later turn is rendered. Without it, locating each turn of a
/// conversation of `n` turns renders `n` prefixes of it: quadratic.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub tokens: usize,
    pub bytes_per_token: usize,
}

impl Bound {
    /// `tokens` for `tok`'s vocabulary.
    pub fn of(tok: &Tokenizer, tokens: usize) -> Self {
        let ids = 0..tok.vocab_size() as u32;
        let bytes_per_token = ids.filter_map(|id| tok.token_bytes(id).map(|b| b.len())).max().unwrap_or(1).max(1);
        Self { tokens, bytes_per_token }
    }

    /// Whether a text of `bytes` bytes certainly holds more than `tokens` tokens.
    fn passed(&self, bytes: usize) -> bool {
        bytes > self.tokens.saturating_mul(self.bytes_per_token)
    }
}

/// The tokens of `conv` rendered by `template`, its assistant turns learned (those within
/// `bound`, when given).
pub fn encode(
    tok: &Tokenizer,
    template: &ChatTemplate,
    conv: &Conversation,
    bound: Option<Bound>,
) -> anyhow::Result<Example> {
    let text = template.render(&conv.messages, false)?;
    let spans = assistant_spans(template, conv, &text, bound)?;
    let tokens = tok.encode(&text)?;
    let starts = byte_starts(tok, &tokens, text.len())?;
    let learned = spans
        .iter()
        .filter_map(|s| {
            let first = starts.partition_point(|&b| b < s.start);
            let end = starts.partition_point(|&b| b < s.end);
            (first < end).then_some(first..end)
        })
        .collect();
    Ok(Example { tokens, learned })
}

/// Byte ranges of the assistant turns in the rendered `text`. The turns past `bound` are not
/// located: each stands as the text's last byte, which lies past the window, so that fitting
/// the example drops and counts them as it would their own spans.
fn assistant_spans(
    template: &ChatTemplate,
    conv: &Conversation,
    text: &str,
    bound: Option<Bound>,
) -> anyhow::Result<Vec<Range<usize>>> {
    let mut spans: Vec<Range<usize>> = Vec::new();
    for (i, m) in conv.messages.iter().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        if let (Some(b), Some(last)) = (bound, spans.last())
            && b.passed(last.end)
        {
            let end = text.len();
            spans.push(end.saturating_sub(1)..end);
            continue;
        }
        let before = template.render(&conv.messages[..i], true)?;
        let through = template.render(&conv.messages[..=i], false)?;
        ensure!(
            text.starts_with(&before) && text.starts_with(&through) && through.len() >= before.len(),
            "the chat template does not render a conversation as its turns one after another (the text up to \
             assistant turn {} is not how the whole conversation begins), so the assistant's tokens cannot be \
             told apart; use a template that renders each turn in place",
            i + 1
        );
        spans.push(before.len()..through.len());
    }
    Ok(spans)
}

/// Each token's first byte in the text the tokens spell.
fn byte_starts(tok: &Tokenizer, tokens: &[u32], text_len: usize) -> anyhow::Result<Vec<usize>> {
    let mut starts = Vec::with_capacity(tokens.len());
    let mut at = 0;
    for &id in tokens {
        starts.push(at);
        at += tok.token_bytes(id).with_context(|| not_bytes(id))?.len();
    }
    ensure!(
        at == text_len,
        "the tokenizer's tokens spell {at} bytes of a {text_len}-byte text (it normalises text), so the \
         assistant's tokens cannot be located; use a byte-level tokenizer"
    );
    Ok(starts)
}

fn not_bytes(id: u32) -> String {
    format!(
        "token {id} is not a byte sequence; chat fine-tuning needs a byte-level tokenizer (byte, BPE, gpt2, cl100k)"
    )
}

#[cfg(test)]
mod tests {
    use super::super::Message;
    use super::*;
    use crate::data::TokenizerKind;

    fn conv(turns: &[(Role, &str)]) -> Conversation {
        Conversation::new(turns.iter().map(|(r, c)| Message { role: *r, content: c.to_string() }).collect()).unwrap()
    }

    /// The learned bytes of `e` as text, one string per range.
    fn learned_text(e: &Example) -> Vec<String> {
        e.learned.iter().map(|r| e.tokens[r.clone()].iter().map(|&t| t as u8 as char).collect()).collect()
    }

    #[test]
    fn only_assistant_turns_and_their_end_markers_are_learned() {
        use Role::*;
        let tok = Tokenizer::fixed(TokenizerKind::Byte).unwrap();
        let c = conv(&[(System, "S"), (User, "Q1"), (Assistant, "A1"), (User, "Q2"), (Assistant, "A2")]);
        let e = encode(&tok, &ChatTemplate::chatml(), &c, None).unwrap();
        // By hand from ChatML's definition: each answer and its `<|im_end|>\n`.
        assert_eq!(learned_text(&e), vec!["A1<|im_end|>\n", "A2<|im_end|>\n"]);
        let prompt: String = e.prompt().iter().map(|&t| t as u8 as char).collect();
        assert_eq!(prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn bpe_tokens_are_located_by_their_bytes() {
        use Role::*;
        let docs = vec![crate::data::Document {
            name: "d".into(),
            text: "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n".repeat(20),
        }];
        let tok = Tokenizer::train_bpe(&docs, 300).unwrap();
        let e =
            encode(&tok, &ChatTemplate::chatml(), &conv(&[(User, "hello there"), (Assistant, "hello")]), None).unwrap();
        let learned: Vec<u32> = e.learned_tokens().collect();
        assert_eq!(tok.decode(&learned).unwrap(), "hello<|im_end|>\n");
        let whole =
            ChatTemplate::chatml().render(&conv(&[(User, "hello there"), (Assistant, "hello")]).messages, false);
        assert_eq!(tok.encode(&whole.unwrap()).unwrap(), e.tokens, "the whole rendering tokenized at once");
    }

    #[test]
    fn a_template_that_rewrites_earlier_turns_is_refused() {
        use Role::*;
        // Writes the number of turns first: no shorter rendering begins the whole one.
        let src = "{{ messages | length }}{% for m in messages %}{{ m.content }}{% endfor %}";
        let t = ChatTemplate { source: src.into(), ..ChatTemplate::chatml() };
        let tok = Tokenizer::fixed(TokenizerKind::Byte).unwrap();
        let e = format!("{:#}", encode(&tok, &t, &conv(&[(User, "q"), (Assistant, "a")]), None).unwrap_err());
        assert!(e.contains("cannot be told apart"), "{e}");
    }
}
