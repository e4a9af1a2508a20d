//! The token that marks where a document starts and ends in a run's training data, named as
//! BOS, EOS and PAD wherever a tool asks for them (the exported `tokenizer_config.json`, the
//! server's `/tokenizer_info`).
//!
//! normlab adds no special token to a vocabulary: a language-model run reads documents joined
//! by [`DOC_SEPARATOR`] ("\n\n"), so the token every document follows is the last token of the
//! separator's encoding (one BPE token "ĊĊ" where the BPE merged it, GPT-2's 628, the byte
//! "\n" for byte runs; a chat run's conversations are such documents too); a pairs run ends every target with `<end>` (U+001E). That token serves
//! as EOS (what ends a document), BOS (lm-evaluation-harness's prefix for an empty context:
//! what a document follows) and PAD (padding is masked, so any id does; this one keeps
//! batches within the vocabulary).

use super::Tokenizer;
use super::config::Task;
use super::dataset::DOC_SEPARATOR;
use anyhow::ensure;

/// A run's document-boundary token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    pub id: u32,
    /// Its text, as the tokenizer decodes it alone.
    pub text: String,
    /// Its entry in the vocabulary (`tokenizer.json`'s spelling, e.g. "ĊĊ" for "\n\n"), where
    /// the tokenizer has one.
    pub token: Option<String>,
    /// It is the whole document end (`<end>`, or the separator encoded as one token), not the
    /// last of several.
    pub whole: bool,
}

/// The boundary token of a run with tokenizer `tok` and task `task`.
pub fn boundary(tok: &Tokenizer, task: Task) -> anyhow::Result<Boundary> {
    let (id, whole) = match task {
        Task::Pairs => (super::pairs::render::end_id(tok)?, true),
        Task::Lm | Task::Chat => {
            let ids = tok.encode(DOC_SEPARATOR)?;
            ensure!(!ids.is_empty(), "the tokenizer encodes the document separator to no tokens");
            (ids[ids.len() - 1], ids.len() == 1)
        }
    };
    Ok(Boundary { id, text: tok.decode(&[id])?, token: tok.token_string(id), whole })
}
