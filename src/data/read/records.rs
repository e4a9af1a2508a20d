//! A file's records as JSON values (task files, conversations): JSON lines (`.jsonl`), a JSON array (`.json`),
//! parquet (`.parquet`, each row as a JSON object, lists and structs nested as the hub's
//! datasets write them) or plain text (`.txt`: the whole file one `{"text": …}` record). A
//! damaged file is named with its line or row.

use anyhow::{Context, bail};
use serde_json::Value;
use std::path::Path;

/// Every record of `path`, at most `limit` (the first ones, as lm-eval's `--limit`).
pub fn records(path: &Path, limit: Option<usize>) -> anyhow::Result<Vec<Value>> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
    let limit = limit.unwrap_or(usize::MAX);
    match ext.as_str() {
        "jsonl" => jsonl(path, limit),
        "json" => json_array(path, limit),
        "parquet" => parquet(path, limit),
        "txt" => {
            let t = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {} as UTF-8 text", path.display()))?;
            Ok(vec![serde_json::json!({ "text": t })])
        }
        _ => bail!("{}: give a task file as .jsonl, .json, .parquet or .txt", path.display()),
    }
}

/// The file's text, a leading byte-order mark dropped (as `data prepare` reads files).
fn read(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {} as UTF-8 text", path.display()))?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

fn jsonl(path: &Path, limit: usize) -> anyhow::Result<Vec<Value>> {
    read(path)?
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .take(limit)
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}: not a JSON record", path.display(), i + 1))
        })
        .collect()
}

fn json_array(path: &Path, limit: usize) -> anyhow::Result<Vec<Value>> {
    let v: Value = serde_json::from_str(&read(path)?).with_context(|| format!("{} is not JSON", path.display()))?;
    match v {
        Value::Array(a) => Ok(a.into_iter().take(limit).collect()),
        _ => bail!("{} is not a JSON array of records; give one, or JSON lines (.jsonl)", path.display()),
    }
}

fn parquet(path: &Path, limit: usize) -> anyhow::Result<Vec<Value>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let damaged =
        |e: parquet::errors::ParquetError| anyhow::anyhow!("{} is not a readable parquet file ({e})", path.display());
    let reader = crate::guard::catch(|| SerializedFileReader::new(f)).map_err(anyhow::Error::msg)?.map_err(damaged)?;
    let rows = crate::guard::catch(|| reader.get_row_iter(None)).map_err(anyhow::Error::msg)?.map_err(damaged)?;
    let mut out = Vec::new();
    for (i, row) in rows.take(limit).enumerate() {
        let row = row.map_err(|e| anyhow::anyhow!("{}: row {}: {e}", path.display(), i + 1))?;
        out.push(row.to_json_value());
    }
    Ok(out)
}
