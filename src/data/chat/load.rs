//! A run's conversations (`data.task = "chat"`): the built-in `instructions`, or the records
//! of `data.corpus` (JSON lines, a JSON array or parquet) in `data.chat_layout`, every `data.val_every`-th held out for the
//! validation loss, rendered by `data.chat_template`.

use super::Conversation;
use super::encode;
use super::layouts::{self, ChatLayout};
use super::template::ChatTemplate;
use crate::data::Tokenizer;
use crate::data::config::DataConfig;
use crate::data::document::{Corpus, Document};
use crate::data::example::Example;
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Every conversation a run uses.
pub struct ChatCorpus {
    pub name: String,
    pub template: ChatTemplate,
    pub layout: ChatLayout,
    pub train: Vec<Conversation>,
    pub val: Vec<Conversation>,
    /// Each conversation's record number in its file (1-based), for messages.
    pub train_records: Vec<usize>,
    pub val_records: Vec<usize>,
    pub split_rule: String,
    /// The run's window (`data.context_tokens`): turns past it are not prepared.
    pub context: Option<usize>,
}

/// What `data.json` records about a run's conversations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatInfo {
    /// The template the conversations were rendered with (what export and serve apply).
    pub template: ChatTemplate,
    pub layout: ChatLayout,
    pub train_conversations: usize,
    pub val_conversations: usize,
    /// Conversations cut after their last assistant turn inside the context, and the
    /// assistant turns that cut dropped.
    pub truncated: usize,
    pub dropped_turns: usize,
    /// Conversations whose first assistant turn does not fit the context.
    pub left_out: usize,
}

impl ChatCorpus {
    /// Where the `i`-th conversation of a split whose record numbers are `records` came from.
    fn record(&self, records: &[usize], i: usize) -> String {
        format!("{} record {}", self.name, records.get(i).copied().unwrap_or(i + 1))
    }

    /// The conversations rendered whole: what the corpus hash, the BPE trainer and the token
    /// files see.
    pub fn documents(&self) -> anyhow::Result<Corpus> {
        let docs = |cs: &[Conversation], records: &[usize]| -> anyhow::Result<Vec<Document>> {
            cs.iter()
                .enumerate()
                .map(|(i, c)| {
                    let text = self.template.render(&c.messages, false).with_context(|| self.record(records, i))?;
                    Ok(Document { name: format!("conversation {i}"), text })
                })
                .collect()
        };
        Ok(Corpus {
            name: self.name.clone(),
            train: docs(&self.train, &self.train_records)?,
            val: docs(&self.val, &self.val_records)?,
            split_rule: self.split_rule.clone(),
        })
    }
}

/// Reads the conversations `cfg` names: the built-in `instructions`, or a file.
pub fn load(cfg: &DataConfig) -> anyhow::Result<ChatCorpus> {
    let template = ChatTemplate::named(&cfg.chat_template)?;
    if cfg.corpus == super::builtin::NAME {
        let all = super::builtin::conversations(cfg)?;
        let name = format!("{}-seed{}", super::builtin::NAME, cfg.pairs_seed);
        let mut c = split(all, cfg.val_every, name, template, ChatLayout::Messages);
        c.context = cfg.context_tokens;
        return Ok(c);
    }
    let path = Path::new(&cfg.corpus);
    check_file(path)?;
    let records = crate::data::read::records::records(path, None)?;
    ensure!(
        records.len() >= 2,
        "{} holds {} conversations; give at least 2 (one is held out)",
        path.display(),
        records.len()
    );
    let layout = match cfg.chat_layout {
        ChatLayout::Auto => ChatLayout::detect(&records[0]).with_context(|| format!("{} record 1", path.display()))?,
        l => l,
    };
    let all = records
        .iter()
        .enumerate()
        .map(|(i, r)| layouts::conversation(r, layout).with_context(|| format!("{} record {}", path.display(), i + 1)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let name = std::fs::canonicalize(path).unwrap_or(path.to_path_buf()).display().to_string();
    let mut c = split(all, cfg.val_every, name, template, layout);
    c.context = cfg.context_tokens;
    Ok(c)
}

/// The conversations' path names a regular file: a directory, a FIFO or a device (`/dev/zero`)
/// is named as what it is.
fn check_file(path: &Path) -> anyhow::Result<()> {
    const GIVE: &str = "give a .jsonl, .json or .parquet file of conversations";
    let what = match std::fs::metadata(path) {
        Err(_) => "does not exist",
        Ok(m) if m.is_dir() => "is a directory",
        Ok(m) if !m.is_file() => "is not a regular file (a FIFO, socket or device)",
        Ok(_) => return Ok(()),
    };
    anyhow::bail!("the conversation file {} {what}; {GIVE}", path.display())
}

/// Every `val_every`-th conversation held out (at least one).
fn split(
    all: Vec<Conversation>,
    val_every: usize,
    name: String,
    template: ChatTemplate,
    layout: ChatLayout,
) -> ChatCorpus {
    let (mut train, mut val) = (Vec::new(), Vec::new());
    let (mut train_records, mut val_records) = (Vec::new(), Vec::new());
    for (i, c) in all.into_iter().enumerate() {
        if (i + 1) % val_every == 0 {
            val.push(c);
            val_records.push(i + 1);
        } else {
            train.push(c);
            train_records.push(i + 1);
        }
    }
    if val.is_empty()
        && let (Some(c), Some(r)) = (train.pop(), train_records.pop())
    {
        val.push(c);
        val_records.push(r);
    }
    let split_rule = format!("every {val_every}th conversation (in order) is held out");
    ChatCorpus { name, template, layout, train, val, train_records, val_records, split_rule, context: None }
}

/// Conversations holding this many turns in all are said to be prepared, before they are.
const LONG_INPUT_TURNS: usize = 10_000;

/// The conversations as examples (not yet fitted to the context) and what `data.json` records.
pub fn examples(
    tok: &Tokenizer,
    c: &ChatCorpus,
    log: &dyn Fn(&str),
) -> anyhow::Result<(Vec<Example>, Vec<Example>, ChatInfo)> {
    let bound = c.context.map(|t| encode::Bound::of(tok, t));
    let turns: usize = c.train.iter().chain(&c.val).map(|v| v.messages.len()).sum();
    if turns >= LONG_INPUT_TURNS {
        log(&format!(
            "preparing {} conversations of {turns} turns: rendering each with the chat template and locating its \
             assistant turns{}",
            c.train.len() + c.val.len(),
            c.context.map_or(String::new(), |t| format!(" within the first {t} tokens"))
        ));
    }
    let split = |cs: &[Conversation], records: &[usize]| -> anyhow::Result<Vec<Example>> {
        use rayon::prelude::*;
        cs.par_iter()
            .enumerate()
            .map(|(i, conv)| encode::encode(tok, &c.template, conv, bound).with_context(|| c.record(records, i)))
            .collect()
    };
    let (train, val) = (split(&c.train, &c.train_records)?, split(&c.val, &c.val_records)?);
    ensure!(
        train.iter().any(|e| e.learned.iter().any(|r| !r.is_empty())),
        "the chat template renders none of the {} training conversations' assistant turns as text of their own, so \
         fine-tuning would learn no token (a loss of 0); use a template that writes each assistant turn (e.g. \
         chatml)",
        train.len()
    );
    let info = ChatInfo {
        template: c.template.clone(),
        layout: c.layout,
        train_conversations: train.len(),
        val_conversations: val.len(),
        truncated: 0,
        dropped_turns: 0,
        left_out: 0,
    };
    Ok((train, val, info))
}
