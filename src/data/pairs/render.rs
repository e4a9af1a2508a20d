//! Pairs as token sequences: `source <sep> target <end>`, the target (with `<end>`) the one
//! learned range, so that only it is learned and scored.
//!
//! `<sep>` and `<end>` are the ASCII control characters US (U+001F) and RS (U+001E): one token
//! in every tokenizer normlab has (one byte; GPT-2's and the trained BPE's byte alphabets hold
//! every byte), and never part of a pair (pair files that contain them are refused). The
//! source with `<sep>` and the target are encoded separately and `<end>` is appended as its own
//! token: exactly the tokens the model sees when it decodes from the prompt `source <sep>`.

use super::Pair;
use crate::data::Tokenizer;
use anyhow::{Context, ensure};

pub const SEP: char = '\u{1F}';
pub const END: char = '\u{1E}';

pub use crate::data::example::{Example, batch};

/// The text a pair is rendered to (token files, BPE training).
pub fn text(p: &Pair) -> String {
    format!("{}{SEP}{}{END}", p.source, p.target)
}

/// The prompt a model decodes a target from.
pub fn prompt(tok: &Tokenizer, source: &str) -> anyhow::Result<Vec<u32>> {
    tok.encode(&format!("{source}{SEP}"))
}

/// The id of `<end>`, which must be a single token.
pub fn end_id(tok: &Tokenizer) -> anyhow::Result<u32> {
    let ids = tok.encode(&END.to_string())?;
    ensure!(
        ids.len() == 1,
        "the tokenizer splits the end marker U+001E into {} tokens; use a byte-level tokenizer",
        ids.len()
    );
    Ok(ids[0])
}

/// Encodes a pair.
pub fn encode(tok: &Tokenizer, p: &Pair, end: u32) -> anyhow::Result<Example> {
    let mut tokens = prompt(tok, &p.source)?;
    let start = tokens.len();
    tokens.extend(tok.encode(&p.target)?);
    tokens.push(end);
    let learned = std::iter::once(start..tokens.len()).collect();
    Ok(Example { tokens, learned })
}

/// Encodes many pairs in parallel, in order.
pub fn encode_all(tok: &Tokenizer, pairs: &[Pair], end: u32) -> anyhow::Result<Vec<Example>> {
    use rayon::prelude::*;
    pairs
        .par_iter()
        .map(|p| encode(tok, p, end).with_context(|| format!("cannot encode the pair `{}`", p.source)))
        .collect()
}

/// Refuses a pair that contains a marker character.
pub fn check_markers(p: &Pair) -> anyhow::Result<()> {
    ensure!(
        !(p.source.contains([SEP, END]) || p.target.contains([SEP, END])),
        "the pair contains U+001E or U+001F, which normlab reserves as its end and separator markers; remove them"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::TokenizerKind;

    #[test]
    fn prompt_tokens_and_padding_are_masked_and_targets_are_the_next_tokens() {
        let tok = Tokenizer::fixed(TokenizerKind::Byte).unwrap();
        let end = end_id(&tok).unwrap();
        assert_eq!(end, 0x1E);
        let a = encode(&tok, &Pair { source: "1".into(), target: "one".into(), category: None }, end).unwrap();
        // "1" US "o" "n" "e" RS: the target starts at index 2.
        assert_eq!(a.tokens, vec![b'1' as u32, 0x1F, b'o' as u32, b'n' as u32, b'e' as u32, 0x1E]);
        assert_eq!(a.learned, vec![2..6]);
        let b = encode(&tok, &Pair { source: "22".into(), target: "x".into(), category: None }, end).unwrap();
        let bt = batch(&[&a, &b], end);
        assert_eq!((bt.batch, bt.seq_len), (2, 5));
        // Row a: inputs 1 US o n e; targets: predicting US is prompt (−1), then o n e RS.
        assert_eq!(&bt.targets[..5], &[-1, b'o' as i64, b'n' as i64, b'e' as i64, 0x1E]);
        // Row b: "22" US "x" RS → inputs 2 2 US x + pad; targets −1 −1 x RS −1.
        assert_eq!(&bt.inputs[5..], &[b'2' as i64, b'2' as i64, 0x1F, b'x' as i64, 0x1E]);
        assert_eq!(&bt.targets[5..], &[-1, -1, b'x' as i64, 0x1E, -1]);
    }

    #[test]
    fn markers_inside_a_pair_are_refused() {
        assert!(check_markers(&Pair { source: "a\u{1F}b".into(), target: "c".into(), category: None }).is_err());
        assert!(check_markers(&Pair { source: "a".into(), target: "c".into(), category: None }).is_ok());
    }
}
