//! Data: splits hold out whole documents, tokenizers round-trip (GPT-2 against its published
//! ids), token files round-trip and are reused, windows are shifted by one.

use super::config::{DataConfig, TokenizerKind};
use super::corpus;
use super::document::Document;
use super::sampler::Sampler;
use super::windows::{validation_starts, windows};
use super::{Dataset, TokenFile, Tokenizer, sotu};
use crate::testutil::{temp_dir, write_tiny_corpus};
use std::cell::RefCell;
use std::path::Path;

fn doc(name: &str, text: &str) -> Document {
    Document { name: name.into(), text: text.into() }
}

#[test]
fn sotu_holds_out_years_ending_in_zero() {
    let docs = [
        "1790_george_washington_n",
        "1791_george_washington_n",
        "1800_john_adams_f",
        "1953_harry_s_truman_d",
        "2020_donald_j_trump_r",
    ]
    .iter()
    .map(|n| doc(n, "text"))
    .collect();
    let c = sotu::split(docs);
    let val: Vec<&str> = c.val.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(val, ["1790_george_washington_n", "1800_john_adams_f", "2020_donald_j_trump_r"]);
    assert_eq!(c.train.len(), 2);
}

#[test]
fn the_built_in_corpus_is_the_233_addresses() {
    // Unpacked from the shipped archive on first use.
    let cfg = DataConfig::default();
    let c = corpus::load(&cfg).expect("the built-in corpus");
    assert_eq!(c.train.len() + c.val.len(), 233);
    assert_eq!(c.val.len(), 24, "1790, 1800, …, 2020");
    let (tr, va) = c.sizes();
    assert!((10_600_000..10_900_000).contains(&(tr + va)), "≈10.7 M characters, got {}", tr + va);
    assert!(c.val[0].name.starts_with("1790") && c.val[0].text.starts_with("Fellow-Citizens of the Senate"));
}

#[test]
fn a_single_text_file_holds_out_its_tail_at_a_line_break() {
    let text = "line one\nline two\nline three\nline four\nline five\n";
    let (a, b) = corpus::split_tail(text, 0.3);
    assert_eq!(format!("{a}{b}"), text);
    assert!(a.ends_with('\n') && !b.is_empty());
    assert_eq!(b, "line five\n");
}

#[test]
fn directories_and_jsonl_split_by_whole_documents() {
    let root = temp_dir("docs");
    let dir = root.join("texts");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..12 {
        std::fs::write(dir.join(format!("{i:02}.txt")), format!("document {i}\n")).unwrap();
    }
    std::fs::write(dir.join(".hidden"), "skip me").unwrap();
    std::fs::write(dir.join("sub/extra.txt"), "nested").unwrap();
    let cfg =
        DataConfig { corpus: dir.display().to_string(), cache_dir: Some(root.join("cache")), ..Default::default() };
    let c = corpus::load(&cfg).unwrap();
    assert_eq!(c.train.len() + c.val.len(), 13, "12 files + 1 nested, hidden skipped");
    assert_eq!(c.val.len(), 1, "every 10th document");
    assert!(c.val[0].text.starts_with("document 9\n"), "{:?}", c.val[0]);

    let jl = root.join("d.jsonl");
    std::fs::write(&jl, "{\"body\": \"first\"}\n\n{\"body\": \"second\"}\n").unwrap();
    let cfg = DataConfig { corpus: jl.display().to_string(), text_field: "body".into(), ..Default::default() };
    let docs = corpus::read_documents(&jl, &cfg).unwrap();
    assert_eq!(docs.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(), ["first", "second"]);
    let cfg = DataConfig { text_field: "text".into(), ..cfg };
    let e = corpus::read_documents(&jl, &cfg).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("data.text_field"), "{e}");
}

#[test]
fn bad_corpora_get_clear_errors() {
    let root = temp_dir("badcorpus");
    let load = |path: &std::path::Path| {
        let cfg = DataConfig { corpus: path.display().to_string(), ..Default::default() };
        format!("{:#}", corpus::load(&cfg).unwrap_err())
    };
    assert!(load(&root.join("nope.txt")).contains("does not exist"));
    std::fs::write(root.join("empty.txt"), "  \n").unwrap();
    assert!(load(&root.join("empty.txt")).contains("contains no text"));
    std::fs::write(root.join("bin.txt"), [0x66, 0xff, 0xfe]).unwrap();
    assert!(load(&root.join("bin.txt")).contains("not UTF-8"));
}

#[test]
fn tokenizers_round_trip_and_gpt2_matches_its_published_ids() {
    let text = "Fellow-Citizens: the Union is strong — naïve café.";
    let byte = Tokenizer::fixed(TokenizerKind::Byte).unwrap();
    let ids = byte.encode(text).unwrap();
    assert_eq!(ids.len(), text.len());
    assert_eq!(byte.decode(&ids).unwrap(), text);
    let gpt2 = Tokenizer::fixed(TokenizerKind::Gpt2).unwrap();
    // GPT-2's encoding of "Hello world" is [15496, 995] (OpenAI's tokenizer, r50k_base).
    assert_eq!(gpt2.encode("Hello world").unwrap(), [15496, 995]);
    assert_eq!(gpt2.vocab_size(), 50257);
    assert_eq!(gpt2.decode(&gpt2.encode(text).unwrap()).unwrap(), text);
}

#[test]
fn bpe_trains_on_the_training_split_and_reloads_identically() {
    let root = temp_dir("bpe");
    write_tiny_corpus(&root.join("c.txt"), 2000);
    let text = std::fs::read_to_string(root.join("c.txt")).unwrap();
    let bpe = Tokenizer::train_bpe(&[doc("c", &text)], 400).unwrap();
    assert!(bpe.vocab_size() <= 400 && bpe.vocab_size() > 256, "{}", bpe.vocab_size());
    let sample = "The council has approved the public debt. Unseen wörds too.";
    let ids = bpe.encode(sample).unwrap();
    assert!(ids.len() < sample.len(), "merges shorten the sequence");
    assert_eq!(bpe.decode(&ids).unwrap(), sample);
    std::fs::write(root.join("tok.json"), bpe.to_json().unwrap().unwrap()).unwrap();
    let again = Tokenizer::load_bpe(&root.join("tok.json")).unwrap();
    assert_eq!(again.encode(sample).unwrap(), ids);
    assert_eq!(again.fingerprint().unwrap(), bpe.fingerprint().unwrap());
}

#[test]
fn token_files_round_trip_in_both_widths_and_reject_truncation() {
    let root = temp_dir("tokfile");
    for (name, toks) in [("small", vec![0u32, 7, 65535]), ("wide", vec![0u32, 70000, 3])] {
        let p = root.join(name);
        TokenFile::write(&p, &toks).unwrap();
        let f = TokenFile::open(&p).unwrap();
        assert_eq!((0..f.len()).map(|i| f.get(i)).collect::<Vec<_>>(), toks);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 24 + toks.len() * if name == "small" { 2 } else { 4 });
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(TokenFile::open(&p).err().unwrap().to_string().contains("truncated"));
        // Same size, one token changed: caught by the CRC-32 over the token bytes.
        let mut changed = bytes.clone();
        changed[24] ^= 0x5a;
        std::fs::write(&p, &changed).unwrap();
        assert!(TokenFile::open(&p).err().unwrap().to_string().contains("checksum"));
    }
    // A file written by Python (struct and zlib.crc32), the fuzz seed: "Hello world\n".
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/token_file/val.tok");
    let f = TokenFile::open(&seed).unwrap();
    assert_eq!(f.iter().map(|t| t as u8 as char).collect::<String>(), "Hello world\n");
    // The checksum is the IEEE CRC-32 (zlib's): its standard check value.
    let mut c = flate2::Crc::new();
    c.update(b"123456789");
    assert_eq!(c.sum(), 0xCBF4_3926);
}

#[test]
fn the_token_cache_is_reused_and_keyed_by_tokenizer() {
    let root = temp_dir("cache");
    write_tiny_corpus(&root.join("c.txt"), 500);
    let cfg = DataConfig {
        corpus: root.join("c.txt").display().to_string(),
        cache_dir: Some(root.join("cache")),
        ..Default::default()
    };
    let logs = RefCell::new(Vec::new());
    let log = |m: &str| logs.borrow_mut().push(m.to_string());
    let a = Dataset::prepare(&cfg, None, &log).unwrap();
    assert_eq!(logs.borrow().len(), 2, "tokenized both splits: {:?}", logs.borrow());
    let b = Dataset::prepare(&cfg, None, &log).unwrap();
    assert_eq!(logs.borrow().len(), 2, "second run reads the cache");
    assert_eq!(a.info.train_token_file, b.info.train_token_file);
    let text = std::fs::read_to_string(root.join("c.txt")).unwrap();
    assert_eq!(a.train.len() + a.val.len(), text.len() + 4, "bytes plus two separators");
    let g = Dataset::prepare(&DataConfig { tokenizer: TokenizerKind::Gpt2, ..cfg.clone() }, None, &log).unwrap();
    assert_ne!(g.info.train_token_file, a.info.train_token_file);
    assert!(g.train.len() < a.train.len());
    let bpe = Dataset::prepare(&DataConfig { tokenizer: TokenizerKind::Bpe, bpe_vocab_size: 300, ..cfg }, None, &log)
        .unwrap();
    assert!(bpe.info.tokenizer.starts_with("bpe-") && bpe.info.vocab_size <= 300);
}

#[test]
fn windows_are_shifted_by_one_and_the_sampler_resumes() {
    let toks: Vec<u32> = (0..1000).map(|i| (i % 251) as u32).collect();
    let f = TokenFile::from_tokens(&toks);
    let mut s = Sampler::new(7);
    let b = s.next_batch(&f, 4, 16);
    for r in 0..4 {
        let (x, y) = (&b.inputs[r * 16..(r + 1) * 16], &b.targets[r * 16..(r + 1) * 16]);
        assert_eq!(&x[1..], &y[..15]);
        assert_eq!((x[0] + 1) % 251, y[0]);
    }
    let mid = s.state();
    let next = s.next_batch(&f, 4, 16);
    assert_eq!(Sampler::from_state(mid).next_batch(&f, 4, 16), next);
    let starts = validation_starts(1000, 16, 5);
    assert_eq!(starts, [0, 245, 491, 737, 983], "⌊i · 983 / 4⌋");
    assert!(starts.iter().all(|&s| s + 17 <= 1000));
    assert_eq!(windows(&f, &[983], 16).targets.last(), Some(&((999 % 251) as i64)));
}
