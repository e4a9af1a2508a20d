//! The preparation's pipeline: one thread reads and decompresses documents in order and hands
//! them on in numbered blocks of about a megabyte; one tokenizer thread per core takes blocks
//! as they come; the caller receives the tokenized blocks back in input order, so the output
//! is the same whatever the thread count or timing. Every queue is bounded: memory stays a few
//! blocks per thread.

use super::chunk::Tokenized;
use super::manifest::Split;
use crate::data::Tokenizer;
use crate::data::read::{self, CorpusFile};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

/// Text per block handed to a tokenizer thread.
const BLOCK_BYTES: usize = 1 << 20;

/// A document read, with its split decided.
pub struct Read {
    pub index: u64,
    pub split: Split,
    pub text: String,
}

/// Where reading starts (a resumed preparation's counters) and how documents split.
#[derive(Clone, Copy)]
pub struct Start {
    pub skip: u64,
    pub kept: u64,
    pub val_every: usize,
}

/// What the pipeline reads and how it tokenizes.
pub struct Input<'a> {
    pub files: &'a [CorpusFile],
    pub field: &'a str,
    pub start: Start,
    pub tokenizer: &'a Tokenizer,
    pub separator: &'a [u32],
    pub threads: usize,
}

/// Runs the pipeline, calling `each` on every tokenized document in input order; `each`
/// stopping with an error stops the threads.
pub fn run(input: &Input<'_>, each: &mut dyn FnMut(Tokenized) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let depth = 2 * input.threads;
    let (work_tx, work_rx) = sync_channel::<(u64, Vec<Read>)>(depth);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let (done_tx, done_rx) = sync_channel::<(u64, anyhow::Result<Vec<Tokenized>>)>(depth);
    std::thread::scope(|s| {
        let reader = s.spawn(move || read_blocks(input.files, input.field, input.start, &work_tx));
        for _ in 0..input.threads {
            let (rx, tx) = (Arc::clone(&work_rx), done_tx.clone());
            s.spawn(move || tokenize_blocks(input.tokenizer, input.separator, &rx, &tx));
        }
        // Only the tokenizer threads hold the two channels' other ends: when they stop, the
        // reader's next send fails and it stops too (an error or a signal in `each` ends the
        // whole pipeline, never leaves the reader waiting on a full queue).
        drop(work_rx);
        drop(done_tx);
        let ordered = in_order(&done_rx, each);
        drop(done_rx); // stops the tokenizer threads, and through them the reader
        let read = reader.join().expect("the reader thread does not panic");
        ordered.and(read)
    })
}

/// Hands the results to `each` in block order.
fn in_order(
    rx: &Receiver<(u64, anyhow::Result<Vec<Tokenized>>)>,
    each: &mut dyn FnMut(Tokenized) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (mut next, mut pending) = (0u64, BTreeMap::new());
    for (seq, block) in rx {
        pending.insert(seq, block);
        while let Some(block) = pending.remove(&next) {
            for d in block? {
                each(d)?;
            }
            next += 1;
        }
    }
    Ok(())
}

fn tokenize_blocks(
    tok: &Tokenizer,
    separator: &[u32],
    rx: &Mutex<Receiver<(u64, Vec<Read>)>>,
    tx: &SyncSender<(u64, anyhow::Result<Vec<Tokenized>>)>,
) {
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((seq, block)) = next else { return };
        let out = block.into_iter().map(|r| one(tok, separator, r)).collect();
        if tx.send((seq, out)).is_err() {
            return;
        }
    }
}

fn read_blocks(
    files: &[CorpusFile],
    field: &str,
    start: Start,
    tx: &SyncSender<(u64, Vec<Read>)>,
) -> anyhow::Result<()> {
    let (mut index, mut kept, mut seq) = (0u64, start.kept, 0u64);
    let (mut block, mut bytes) = (Vec::new(), 0usize);
    let mut on_doc = |text: &str| -> anyhow::Result<ControlFlow<()>> {
        let i = index;
        index += 1;
        if i < start.skip || text.trim().is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        kept += 1;
        let split = if kept.is_multiple_of(start.val_every as u64) { Split::Val } else { Split::Train };
        bytes += text.len();
        block.push(Read { index: i, split, text: text.to_string() });
        if bytes >= BLOCK_BYTES {
            bytes = 0;
            seq += 1;
            if tx.send((seq - 1, std::mem::take(&mut block))).is_err() {
                return Ok(ControlFlow::Break(())); // the consumer stopped
            }
        }
        Ok(ControlFlow::Continue(()))
    };
    read::for_each(files, field, &mut on_doc)?;
    if !block.is_empty() {
        let _ = tx.send((seq, block));
    }
    Ok(())
}

fn one(tok: &Tokenizer, separator: &[u32], r: Read) -> anyhow::Result<Tokenized> {
    let mut tokens = tok.encode(&r.text)?;
    tokens.extend_from_slice(separator);
    let mut sha = Sha256::new();
    sha.update((r.text.len() as u64).to_le_bytes());
    sha.update(r.text.as_bytes());
    Ok(Tokenized {
        index: r.index,
        split: r.split,
        text_bytes: r.text.len() as u64,
        text_sha_part: sha.finalize().into(),
        tokens,
    })
}
