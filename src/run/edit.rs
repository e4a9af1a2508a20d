//! `--set key=value` edits of a config's TOML table, and where in the user's file a config
//! error is (its line, or the dotted key when the table exists nowhere on disk).

use anyhow::{bail, ensure};

/// Sets the dotted `key` of `table` to `value` (a preset name under a table becomes an
/// overlay on that preset, as with `--set`).
pub fn set_value(table: &mut toml::Table, key: &str, value: toml::Value) {
    let doc = key.rsplit('.').fold(value, |v, part| {
        let mut t = toml::Table::new();
        t.insert(part.trim().trim_matches('"').to_string(), v);
        toml::Value::Table(t)
    });
    if let toml::Value::Table(doc) = doc {
        merge(table, doc);
    }
}

/// `a.b.c=value`: parsed as the TOML line `a.b.c = value` (quoted key parts allowed:
/// `sweep.axes."optim.lr"=[1e-3, 3e-3]`), or with the value as a bare string if that fails
/// (`model.recipe=peri`), then merged into `table`.
pub fn apply_set(table: &mut toml::Table, set: &str) -> anyhow::Result<()> {
    let Some((key, raw)) = set.split_once('=') else {
        bail!("--set `{}` is not key=value; e.g. --set optim.lr=1e-3", clip(set));
    };
    let key = key.trim();
    ensure!(!key.is_empty(), "--set `{}`: empty key", clip(set));
    let quoted = toml::Value::String(raw.trim().to_string()).to_string();
    let doc: toml::Table = toml::from_str(&format!("{key} = {raw}"))
        .or_else(|_| toml::from_str(&format!("{key} = {quoted}")))
        .map_err(|_| {
            anyhow::anyhow!("--set `{}`: `{}` is not a valid key; use dotted names like optim.lr", clip(set), clip(key))
        })?;
    merge(table, doc);
    replace_budget(table, key);
    Ok(())
}

/// Text a user gave, shortened for a message: every word of more than [`CLIP`] characters
/// cut to its start and its length (a 300-digit value is not printed whole).
pub fn clip(text: &str) -> String {
    text.split(' ')
        .map(|w| match w.char_indices().nth(CLIP) {
            Some((at, _)) => format!("{}… ({} characters)", &w[..at], w.chars().count()),
            None => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The longest word [`clip`] leaves whole.
const CLIP: usize = 40;

/// Every float of `table` that f32, which the model computes in, cannot hold: finite past its
/// largest finite value, or nonzero below its smallest normal one; the first as an error naming
/// its key. (`inf` and `nan` as written are left to the fields' own checks.)
pub fn check_f32_range(table: &toml::Table) -> anyhow::Result<()> {
    fn walk(prefix: &str, v: &toml::Value) -> anyhow::Result<()> {
        match v {
            toml::Value::Float(x) => {
                let a = x.abs();
                ensure!(
                    a.is_nan()
                        || a.is_infinite()
                        || a == 0.0
                        || (a >= f32::MIN_POSITIVE as f64 && a <= f32::MAX as f64),
                    "{prefix} = {x:e} is outside what f32 holds (magnitudes {:e} to {:e}, or 0), and the model computes \
                     in f32; give a value in that range",
                    f32::MIN_POSITIVE,
                    f32::MAX
                );
                Ok(())
            }
            toml::Value::Table(t) => t
                .iter()
                .try_for_each(|(k, v)| walk(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v)),
            toml::Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| walk(&format!("{prefix}[{i}]"), v)),
            _ => Ok(()),
        }
    }
    table.iter().try_for_each(|(k, v)| walk(k, v))
}

/// The three ways to give a run's length; one `--set` of any of them replaces the others the
/// config file gave (`--set train.steps=200` on a config with `tokens_per_param = 20`).
const BUDGET_KEYS: [&str; 3] = ["steps", "tokens", "tokens_per_param"];

fn replace_budget(table: &mut toml::Table, key: &str) {
    let Some(given) = key.strip_prefix("train.").filter(|k| BUDGET_KEYS.contains(k)) else {
        return;
    };
    if let Some(toml::Value::Table(train)) = table.get_mut("train") {
        train.retain(|k, _| k == given || !BUDGET_KEYS.contains(&k));
    }
}

/// `top`'s keys written over `base`'s, table by table (a fine-tuning config over its parent's):
/// a run length `top` gives replaces every run length `base` gave.
pub fn overlay(base: &mut toml::Table, top: &toml::Table) {
    let given = top.get("train").and_then(|t| t.as_table()).into_iter().flat_map(|t| t.keys());
    for key in given.filter(|k| BUDGET_KEYS.contains(&k.as_str())).collect::<Vec<_>>() {
        replace_budget(base, &format!("train.{key}"));
    }
    merge(base, top.clone());
}

fn merge(dst: &mut toml::Table, src: toml::Table) {
    for (k, v) in src {
        match (dst.get_mut(&k), v) {
            (Some(toml::Value::Table(d)), toml::Value::Table(s)) => merge(d, s),
            // `model.recipe = "peri"` then `--set model.recipe.norm=rmsnorm`: the preset name
            // becomes an overlay on that preset.
            (Some(toml::Value::String(name)), toml::Value::Table(s)) => {
                let mut t = toml::Table::new();
                t.insert("preset".into(), toml::Value::String(name.clone()));
                merge(&mut t, s);
                dst.insert(k, toml::Value::Table(t));
            }
            (_, v) => {
                dst.insert(k, v);
            }
        }
    }
}

/// A config that does not deserialize: where (` (line 3: `…`)` or ` (at `model.x`)`) and why,
/// in one line.
pub(super) struct ParseError {
    pub(super) place: String,
    pub(super) message: String,
}

/// Where the error `e` in `merged` (a table written out as TOML) is: the line of `original`,
/// the user's file, that holds the same key when there is one, else the dotted key.
pub(super) fn describe_error(e: &toml::de::Error, merged: &str, message: &str, original: Option<&str>) -> String {
    let Some(span) = e.span() else { return String::new() };
    let line = merged[..span.start.min(merged.len())].matches('\n').count() + 1;
    let shown = merged.lines().nth(line - 1).unwrap_or("").trim();
    let section = merged
        .lines()
        .take(line)
        .filter_map(|l| l.trim().strip_prefix('['))
        .last()
        .map(|h| h.trim_end_matches(']').to_string())
        .unwrap_or_default();
    // A nested table's error points at its header and names the field last: "… in `norm`".
    let inner = message.rsplit_once(" in `").map(|(_, k)| k.trim_end_matches('`'));
    let key = match (shown.starts_with('['), inner) {
        (true, Some(k)) => format!("{section}.{k}"),
        (true, None) => section.clone(),
        (false, _) => {
            let k = shown.split('=').next().unwrap_or("").trim().trim_matches('"');
            if section.is_empty() { k.to_string() } else { format!("{section}.{k}") }
        }
    };
    match original.and_then(|t| find_line(t, &key)) {
        Some((n, text)) => format!(" (line {n}: `{text}`)"),
        None if !key.is_empty() => format!(" (at `{key}`)"),
        None => format!(" (`{shown}`)"),
    }
}

/// The line of `text` (number and content) that sets the dotted `key`, or else the nearest
/// enclosing key (an inline table holding it).
fn find_line(text: &str, key: &str) -> Option<(usize, String)> {
    let mut section = String::new();
    let mut best: Option<(usize, usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if let Some(h) = l.strip_prefix('[') {
            section = h.trim_start_matches('[').trim_end_matches(']').trim().replace('"', "");
            let depth = section.len();
            let inside = key == section || key.starts_with(&format!("{section}."));
            if inside && best.as_ref().is_none_or(|b| depth > b.1) {
                best = Some((i + 1, depth, l.to_string()));
            }
            continue;
        }
        let Some((k, _)) = l.split_once('=') else { continue };
        let k = k.trim().replace('"', "");
        let full = if section.is_empty() { k } else { format!("{section}.{k}") };
        if full == key {
            return Some((i + 1, l.to_string()));
        }
        if key.starts_with(&format!("{full}.")) && best.as_ref().is_none_or(|b| full.len() > b.1) {
            best = Some((i + 1, full.len(), l.to_string()));
        }
    }
    best.map(|(n, _, l)| (n, l))
}
