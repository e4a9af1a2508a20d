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
    pub split_rule: String,
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
    /// The conversations rendered whole: what the corpus hash, the BPE trainer and the token
    /// files see.
    pub fn documents(&self) -> anyhow::Result<Corpus> {
        let docs = |cs: &[Conversation]| -> anyhow::Result<Vec<Document>> {
            cs.iter()
                .enumerate()
                .map(|(i, c)| {
                    Ok(Document { name: format!("conversation {i}"), text: self.template.render(&c.messages, false)? })
                })
                .collect()
        };
        Ok(Corpus {
            name: self.name.clone(),
            train: docs(&self.train)?,
            val: docs(&self.val)?,
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
        return Ok(split(all, cfg.val_every, name, template, ChatLayout::Messages));
    }
    let path = Path::new(&cfg.corpus);
    ensure!(
        path.is_file(),
        "the conversation file {} does not exist; give a .jsonl, .json or .parquet file of conversations",
        path.display()
    );
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
    Ok(split(all, cfg.val_every, name, template, layout))
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
    for (i, c) in all.into_iter().enumerate() {
        if (i + 1) % val_every == 0 { val.push(c) } else { train.push(c) }
    }
    if val.is_empty()
        && let Some(c) = train.pop()
    {
        val.push(c);
    }
    let split_rule = format!("every {val_every}th conversation (in order) is held out");
    ChatCorpus { name, template, layout, train, val, split_rule }
}

/// The conversations as examples (not yet fitted to the context) and what `data.json` records.
pub fn examples(tok: &Tokenizer, c: &ChatCorpus) -> anyhow::Result<(Vec<Example>, Vec<Example>, ChatInfo)> {
    let split = |cs: &[Conversation]| -> anyhow::Result<Vec<Example>> {
        use rayon::prelude::*;
        cs.par_iter()
            .enumerate()
            .map(|(i, conv)| encode::encode(tok, &c.template, conv).with_context(|| format!("conversation {}", i + 1)))
            .collect()
    };
    let (train, val) = (split(&c.train)?, split(&c.val)?);
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
