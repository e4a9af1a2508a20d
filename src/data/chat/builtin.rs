//! `instructions`: the built-in conversations for fine-tuning on 2 cores, built from what ships
//! with normlab and honest about it. Nothing in it was written by a person as an instruction
//! and none of it is a chat assistant's data; it is a supervised task a small model can learn,
//! with answers the pretraining on the built-in corpus never trained on:
//!
//! - *spell out*: "Write this in words: 3.5 kg" → "three point five kilograms", from the
//!   text-normalisation generator (`textnorm-en`, seeded by `data.pairs_seed`);
//! - *continue*: "Continue this passage from the 1990 State of the Union address: …" → the
//!   address's next sentence, from the addresses pretraining holds out for validation (the
//!   years ending in 0: never a training batch of a `sotu` run);
//! - *two turns*: a spell-out, then "And this one: …" → its answer (both answers learned).
//!
//! `data.pairs_train` conversations in all, a third of each kind, in a seeded order; every
//! `data.val_every`-th is held out as with any conversation file.

use super::{Conversation, Message, Role};
use crate::data::config::DataConfig;
use crate::data::document::Document;
use crate::rng::SplitMix64;

/// `data.corpus` of the built-in conversations (`data.task = "chat"`).
pub const NAME: &str = "instructions";

fn turn(role: Role, content: String) -> Message {
    Message { role, content }
}

/// Sentences of `docs` with the address each comes from: pieces ending in `. ` of 30 to 120
/// characters, each with the one that follows it.
fn sentence_pairs(docs: &[Document]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for d in docs {
        let year = d.name.chars().take(4).collect::<String>();
        let text = d.text.split_whitespace().collect::<Vec<_>>().join(" ");
        let s: Vec<&str> = text.split_inclusive(". ").map(str::trim).collect();
        let fits = |x: &str| (30..=120).contains(&x.len());
        for w in s.windows(2).filter(|w| fits(w[0]) && fits(w[1])) {
            out.push((year.clone(), w[0].to_string(), w[1].to_string()));
        }
    }
    out
}

/// The built-in conversations, in their seeded order.
pub fn conversations(cfg: &DataConfig) -> anyhow::Result<Vec<Conversation>> {
    let n = cfg.pairs_train;
    let (pairs, _) = crate::data::pairs::english::splits(cfg.pairs_seed, n, 1);
    let held_out = crate::data::sotu::split(crate::data::sotu::load(&cfg.cache_dir())?).val;
    let passages = sentence_pairs(&held_out);
    let mut rng = SplitMix64::new(cfg.pairs_seed ^ 0x1257);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let p = &pairs[i % pairs.len()];
        let spell = |q: &str| format!("Write this in words: {q}");
        let messages = match i % 3 {
            0 => vec![turn(Role::User, spell(&p.source)), turn(Role::Assistant, p.target.clone())],
            1 => {
                let (year, first, next) = &passages[(rng.next_u64() % passages.len() as u64) as usize];
                let ask = format!("Continue this passage from the {year} State of the Union address: {first}");
                vec![turn(Role::User, ask), turn(Role::Assistant, next.clone())]
            }
            _ => {
                let q = &pairs[(rng.next_u64() % pairs.len() as u64) as usize];
                vec![
                    turn(Role::User, spell(&p.source)),
                    turn(Role::Assistant, p.target.clone()),
                    turn(Role::User, format!("And this one: {}", q.source)),
                    turn(Role::Assistant, q.target.clone()),
                ]
            }
        };
        out.push(Conversation::new(messages)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passages_are_consecutive_sentences_of_one_address() {
        let d = Document {
            name: "1990-Bush".into(),
            text: "Tonight I come to you to speak of the state of the union. We are strong\nand we are free today. \
                   Short. The economy has grown in every quarter of the year."
                .into(),
        };
        let p = sentence_pairs(&[d]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "1990");
        assert_eq!(p[0].1, "Tonight I come to you to speak of the state of the union.");
        assert_eq!(p[0].2, "We are strong and we are free today.");
    }
}
