//! JSON lines (one object per line) and JSON arrays of objects, streamed: the string field
//! `field` of each record is one document.

use super::decompress::{self, failed};
use super::files::CorpusFile;
use super::files::OnText;
use anyhow::{anyhow, bail};
use serde_json::Value;
use std::io::BufRead;
use std::ops::ControlFlow;

/// Whether the file's first non-blank byte is `[`.
pub fn starts_array(file: &CorpusFile) -> anyhow::Result<bool> {
    let mut r = decompress::open(file)?;
    loop {
        let buf = r.fill_buf().map_err(|e| failed(file, Some(1), e))?;
        if buf.is_empty() {
            return Ok(false);
        }
        match buf.iter().position(|c| !c.is_ascii_whitespace()) {
            Some(i) => return Ok(buf[i] == b'['),
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// The text of `record`'s field, or an error naming where it is missing.
fn text_of<'a>(record: &'a Value, field: &str, file: &CorpusFile, what: &str) -> anyhow::Result<&'a str> {
    record.get(field).and_then(Value::as_str).ok_or_else(|| {
        anyhow!(
            "{} {what}: no string field `{field}`; set data.text_field to the field that holds the text",
            file.path.display()
        )
    })
}

/// JSON lines; blank lines are skipped.
pub fn lines(file: &CorpusFile, field: &str, f: &mut OnText<'_>) -> anyhow::Result<ControlFlow<()>> {
    let mut r = decompress::open(file)?;
    let mut line = String::new();
    for n in 1.. {
        line.clear();
        let read = r.read_line(&mut line).map_err(|e| failed(file, Some(n), e))?;
        if read == 0 {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => match decompress::damage_after(file, r, n) {
                Some(damage) => return Err(damage),
                None => {
                    bail!("{} line {n}: not valid JSON ({e}); each line must be one JSON object", file.path.display())
                }
            },
        };
        if f(text_of(&v, field, file, &format!("line {n}"))?)?.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// A JSON array of records, read element by element.
pub fn array(file: &CorpusFile, field: &str, f: &mut OnText<'_>) -> anyhow::Result<ControlFlow<()>> {
    use serde::de::Deserializer;
    let reader = decompress::open(file)?;
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut visitor = Elements { file, field, f, flow: ControlFlow::Continue(()), error: None };
    let parsed = (&mut de).deserialize_seq(&mut visitor);
    if let Some(e) = visitor.error {
        return Err(e);
    }
    if let Err(e) = parsed {
        bail!("{}: not a valid JSON array of records ({e}); give a JSON array or JSON lines", file.path.display());
    }
    Ok(visitor.flow)
}

/// A serde visitor that hands each array element to the callback as it is parsed.
struct Elements<'f, 'g> {
    file: &'f CorpusFile,
    field: &'f str,
    f: &'f mut OnText<'g>,
    flow: ControlFlow<()>,
    /// The callback's own error (kept whole, not as a serde message).
    error: Option<anyhow::Error>,
}

impl<'de> serde::de::Visitor<'de> for &mut Elements<'_, '_> {
    type Value = ();

    fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
        out.write_str("a JSON array of records")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut n = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            n += 1;
            let step = text_of(&v, self.field, self.file, &format!("element {n}")).and_then(|t| (self.f)(t));
            match step {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => {
                    self.flow = ControlFlow::Break(());
                    // The rest is not read: stop here without an error of our own.
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    return Ok(());
                }
                Err(e) => {
                    self.error = Some(e);
                    return Err(serde::de::Error::custom("stopped"));
                }
            }
        }
        Ok(())
    }
}
