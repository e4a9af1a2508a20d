//! Tasks scored end to end on a model whose every prediction is known by hand: with the token
//! embedding zero (pre-norm, byte vocabulary, no biases), every norm, sublayer and hidden state
//! gives 0, so every logit is 0: each byte has log-probability −ln 256 whatever came before,
//! and the arg-max is byte 0.

use super::item::{Item, Request, Scoring, Task, choice};
use crate::data::Tokenizer;
use crate::decode::Decoder;
use crate::init::ParamSource;
use crate::model::{ModelConfig, Transformer};
use crate::recipe::RecipeConfig;
use crate::testutil::cpu;

/// The uniform model: d 16, 2 layers, a zero token embedding.
fn uniform() -> Transformer {
    let cfg = ModelConfig {
        vocab_size: 256,
        d_model: 16,
        n_layers: 2,
        n_heads: 2,
        recipe: RecipeConfig::Preset("pre".into()),
        ..Default::default()
    };
    let zero = burn::tensor::TensorData::new(vec![0f32; 256 * 16], [256, 16]);
    let source = ParamSource::Overlay([("tok_emb".to_string(), zero)].into(), 1);
    Transformer::new(&cfg, source, &cpu()).unwrap()
}

const LN256: f64 = 5.545_177_444_479_562;

fn run(task: &Task, context: usize) -> super::TaskResult {
    let (m, device) = (uniform(), cpu());
    let d = Decoder { model: &m, device: &device, context, cache: true };
    super::evaluate(&d, &Tokenizer::Byte, b'\n'.into(), task).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * b.abs().max(1.0)
}

/// Choices "a", "abc", "abcde" after a space: log-likelihoods −2, −4 and −6 ln 256 (a byte a
/// token). `acc` takes the shortest (index 0); `acc_norm` divides by 1, 3 and 5 characters
/// (−2, −1.33 and −1.2 ln 256) and takes the longest. With answers 0 and 2: acc 1, 0 and
/// acc_norm 0, 1: both 0.5 with standard error √(0.5/2) = 0.5.
#[test]
fn multiple_choice_by_hand() {
    let choices: Vec<String> = ["a", "abc", "abcde"].map(String::from).to_vec();
    let task = Task {
        name: "t".into(),
        scoring: Scoring::MultipleChoice { acc_norm: true },
        items: vec![choice("Q:", &choices, 0, None), choice("R:", &choices, 2, None)],
    };
    let r = run(&task, 32);
    for item in &r.items {
        let want = [-2.0 * LN256, -4.0 * LN256, -6.0 * LN256];
        assert!(item.lls.iter().zip(want).all(|(g, w)| close(*g, w)), "{:?}", item.lls);
    }
    let (acc, norm) = (r.metrics["acc"], r.metrics["acc_norm"]);
    assert_eq!((acc.value, norm.value), (0.5, 0.5));
    assert!(close(acc.stderr.unwrap(), 0.5) && close(norm.stderr.unwrap(), 0.5));
    assert_eq!(r.chance, Some(1.0 / 3.0));
}

/// Winogrande's partial scoring: both options' contexts are scored on the same rest of the
/// sentence (" ran." → 5 bytes), so both give −5 ln 256 and `acc` takes the first.
#[test]
fn partial_scoring_by_hand() {
    let requests = ["The cat", "The dog"].map(|c| Request { context: c.into(), continuation: " ran.".into() }).to_vec();
    let item = Item::Choice { requests, lengths: vec!["The cat".into(), "The dog".into()], answer: 1, category: None };
    let task = Task { name: "w".into(), scoring: Scoring::MultipleChoice { acc_norm: false }, items: vec![item] };
    let r = run(&task, 32);
    assert!(r.items[0].lls.iter().all(|l| close(*l, -5.0 * LN256)));
    assert_eq!(r.metrics["acc"].value, 0.0);
}

/// A text of 100 bytes through windows of 16: every byte predicted once at −ln 256, so bits per
/// byte is 8; a cloze " word" (5 bytes) has perplexity 256⁵ and is not greedy (byte 0 is).
#[test]
fn bits_per_byte_and_cloze_by_hand() {
    let text: String = (0..100).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let task = Task { name: "x".into(), scoring: Scoring::Text, items: vec![Item::Text { text }] };
    let r = run(&task, 16);
    assert!(close(r.metrics["bits_per_byte"].value, 8.0), "{:?}", r.metrics);
    assert!(close(r.items[0].lls[0], -100.0 * LN256));
    let cloze = Item::Cloze { request: Request { context: "a".into(), continuation: " word".into() } };
    let task = Task { name: "c".into(), scoring: Scoring::Cloze, items: vec![cloze] };
    let r = run(&task, 16);
    assert!(close(r.metrics["perplexity"].value, 256f64.powi(5)));
    assert_eq!(r.metrics["acc"].value, 0.0);
}

/// A context longer than the window is cut from the left: with a window of 8, a 20-byte
/// context and a 3-byte continuation are scored as the last 9 bytes, the continuation's 3
/// tokens each at −ln 256.
#[test]
fn long_contexts_are_cut_from_the_left() {
    let task = Task {
        name: "l".into(),
        scoring: Scoring::MultipleChoice { acc_norm: false },
        items: vec![choice(&"z".repeat(20), &["ab".into(), "abcdefg".into()], 0, None)],
    };
    let r = run(&task, 8);
    assert!(close(r.items[0].lls[0], -3.0 * LN256) && close(r.items[0].lls[1], -8.0 * LN256), "{:?}", r.items[0].lls);
}
