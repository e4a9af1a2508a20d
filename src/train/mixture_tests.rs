//! A mixture of two sources (a text file read whole, a gzip'd JSON-lines corpus streamed
//! through a preparation) trains, is stopped and resumes to the identical curve, and reports
//! each source's validation loss and bits per byte.

use super::tests::{quiet, tiny_cfg};
use super::{Outcome, Resumed, resume, start};
use crate::data::config::SourceSpec;
use crate::run::layout;
use crate::run::metrics::Metrics;
use crate::testutil::temp_dir;
use std::io::Write;
use std::path::Path;

/// JSON lines of 60 short documents of digits (unlike the text file's words), gzip'd.
fn write_jsonl_gz(path: &Path) {
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    for i in 0..60u64 {
        let text: String = (0..300).map(|j| char::from(b'0' + ((i * 7 + j * 3) % 10) as u8)).collect();
        writeln!(gz, "{}", serde_json::json!({ "id": i, "body": text })).unwrap();
    }
    gz.finish().unwrap();
}

fn mixture_cfg(root: &Path, steps: usize) -> crate::run::config::RunConfig {
    let mut c = tiny_cfg(root, steps);
    write_jsonl_gz(&root.join("digits.jsonl.gz"));
    c.data.sources = vec![
        SourceSpec { path: c.data.corpus.clone(), weight: 3.0, name: Some("words".into()), text_field: None },
        SourceSpec {
            path: root.join("digits.jsonl.gz").display().to_string(),
            weight: 1.0,
            name: Some("digits".into()),
            text_field: Some("body".into()),
        },
    ];
    c
}

#[test]
fn a_mixture_trains_resumes_identically_and_reports_each_source() {
    let root = temp_dir("mixture");
    let mut whole = mixture_cfg(&root, 12);
    whole.run.dir = root.join("whole");
    let mut cut = whole.clone();
    cut.run.dir = root.join("cut");
    let (t, o) = super::tests::run(whole);
    assert!(matches!(o, Outcome::Finished { .. }));
    let m = t.data.mixture.as_ref().expect("a mixture");
    assert_eq!(m.parts.iter().map(|p| p.weight).collect::<Vec<_>>(), vec![0.75, 0.25]);
    let mut t = start(cut, false, &quiet).unwrap();
    t.stop_after = Some(8);
    let mut p = super::progress::Progress::new(12, 0, true);
    assert_eq!(t.run(&mut p).unwrap(), Outcome::Stopped { step: 8 });
    drop(t);
    let Resumed::Trainer(mut t) = resume(&root.join("cut"), &quiet).unwrap() else { panic!("not finished yet") };
    assert!(matches!(t.run(&mut p).unwrap(), Outcome::Finished { .. }));
    let read = |d: &str| super::tests::records_without_timings(&root.join(d));
    assert_eq!(read("whole"), read("cut"), "every train and eval record, bit for bit");
    let evals = Metrics::read(&layout::metrics(&root.join("whole"))).unwrap().eval;
    let last = evals.last().unwrap();
    let names: Vec<&str> = last.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["words", "digits"]);
    // The overall loss is the token-weighted mean of the sources' (each on its windows).
    let n: usize = last.sources.iter().map(|s| s.val_tokens).sum();
    let mean = last.sources.iter().map(|s| s.val_loss * s.val_tokens as f64).sum::<f64>() / n as f64;
    assert!((mean - last.val_loss).abs() < 1e-9, "{mean} vs {}", last.val_loss);
    // Byte tokens: one token per byte, so bits per byte is the loss in bits.
    for s in &last.sources {
        let bpb = s.val_bpb.expect("text sources know their bytes");
        assert!((bpb - s.val_loss / std::f64::consts::LN_2).abs() < 1e-9, "{s:?}");
    }
}
