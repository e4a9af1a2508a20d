//! `sweep.group_by`: the config keys whose values name a method. A learning rate is tuned,
//! and seeds are summarised, per group: with `["model.recipe", "model.n_layers"]` every
//! (recipe, depth) pair gets its own LR*.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Keys that always name methods when a sweep varies them.
pub const METHOD_AXES: [&str; 1] = ["optim.name"];

/// Keys whose values are repeats of one method: summarised over, never a group.
pub const SEED_AXES: [&str; 2] = ["train.seed", "train.sampler_seed"];

/// A run's axis values by key (`RunResult::axes`).
pub type Axes = BTreeMap<String, serde_json::Value>;

/// One key (`"model.recipe"`) or several, in order. Written as a string or a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OneOrMany", into = "OneOrMany")]
pub struct GroupBy(Vec<String>);

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl TryFrom<OneOrMany> for GroupBy {
    type Error = String;

    fn try_from(v: OneOrMany) -> Result<Self, String> {
        let keys = match v {
            OneOrMany::One(k) => vec![k],
            OneOrMany::Many(ks) => ks,
        };
        GroupBy::new(keys)
    }
}

impl From<GroupBy> for OneOrMany {
    fn from(g: GroupBy) -> Self {
        match <[String; 1]>::try_from(g.0) {
            Ok([k]) => OneOrMany::One(k),
            Err(ks) => OneOrMany::Many(ks),
        }
    }
}

impl Default for GroupBy {
    fn default() -> Self {
        GroupBy(vec!["model.recipe".into()])
    }
}

impl GroupBy {
    /// At least one key, none empty or repeated.
    pub fn new(keys: Vec<String>) -> Result<Self, String> {
        if keys.is_empty() {
            return Err("sweep.group_by is an empty list; give at least one key, e.g. \"model.recipe\"".into());
        }
        for (i, k) in keys.iter().enumerate() {
            if k.trim().is_empty() || keys[..i].contains(k) {
                return Err(format!("sweep.group_by has an empty or repeated key `{k}`"));
            }
        }
        Ok(GroupBy(keys))
    }

    pub fn keys(&self) -> &[String] {
        &self.0
    }

    /// These keys, every [`METHOD_AXES`] key the grid varies (an optimizer swept as an axis
    /// names methods, so each (recipe, optimizer) gets its own LR* and the report ranks the
    /// recipes per optimizer), then every other key the grid varies but `tuned` and the seeds
    /// ([`SEED_AXES`]): runs that differ in a corpus, a depth or any other setting are never
    /// pooled as if they were seeds of one method; each value is a group of its own. An axis
    /// of several keys set together (`"a+b"`) is named by its first key, and by as many of the
    /// next as its values need to be told apart ([`naming_keys`]).
    pub fn with_method_axes(mut self, axes: &[(String, Vec<toml::Value>)], tuned: &str) -> Self {
        let varied = |key: &str| axes.iter().any(|(k, vs)| k.split('+').any(|p| p == key) && vs.len() > 1);
        for key in METHOD_AXES {
            if varied(key) && !self.0.iter().any(|k| k == key) {
                self.0.push(key.to_string());
            }
        }
        for (k, vs) in axes.iter().filter(|(_, vs)| vs.len() > 1) {
            let parts: Vec<&str> = k.split('+').collect();
            let repeats_or_tuned = parts.iter().any(|p| *p == tuned || SEED_AXES.contains(p));
            let grouped = parts.iter().any(|p| self.0.iter().any(|g| g.split('+').any(|gp| gp == *p)));
            if !repeats_or_tuned && !grouped {
                self.0.extend(naming_keys(&parts, vs).into_iter().map(str::to_string));
            }
        }
        self
    }

    /// The method a run belongs to, from its axes: the first key's value as written
    /// (`kitenorm`), each further key as `name=value` with the key's last part
    /// (`kitenorm, n_layers=8`).
    pub fn label(&self, axes: &Axes) -> String {
        let mut parts = vec![axis_label(axes.get(&self.0[0]))];
        for k in &self.0[1..] {
            parts.push(format!("{}={}", short_key(k), axis_label(axes.get(k))));
        }
        parts.join(", ")
    }

    /// Whether the run's axes give every key a value.
    pub fn covers(&self, axes: &Axes) -> bool {
        self.0.iter().all(|k| axes.contains_key(k))
    }
}

/// The keys that name the methods of a linked axis (`parts`, with its `values`: one list of a
/// value per key each): the first, then each next key whose values differ, until no two values
/// share a name (`[[0.01, "per-layer"], [0.01, "pooled"]]` needs both keys).
fn naming_keys<'a>(parts: &[&'a str], values: &[toml::Value]) -> Vec<&'a str> {
    let rows: Vec<&[toml::Value]> = values
        .iter()
        .map(|v| match v {
            toml::Value::Array(a) => a.as_slice(),
            one => std::slice::from_ref(one),
        })
        .collect();
    let distinct = |chosen: &[usize]| {
        let names: Vec<Vec<Option<&toml::Value>>> =
            rows.iter().map(|r| chosen.iter().map(|&i| r.get(i)).collect()).collect();
        names.iter().enumerate().all(|(i, n)| !names[..i].contains(n))
    };
    let mut chosen = vec![0];
    for i in 1..parts.len() {
        if distinct(&chosen) {
            break;
        }
        if rows.iter().any(|r| r.get(i) != rows[0].get(i)) {
            chosen.push(i);
        }
    }
    chosen.into_iter().map(|i| parts[i]).collect()
}

/// A key's last part (`n_layers`), or its section where the last part is `name`
/// (`optim.name` → `optim`).
fn short_key(k: &str) -> &str {
    let mut parts = k.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some("name"), Some(section)) => section,
        (Some(last), _) => last,
        _ => k,
    }
}

/// An axis value as a method name: strings as they are, numbers as written, `(base)` when
/// the run does not vary that key.
pub fn axis_label(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        // A recipe table: its name, else its fields as the run name writes them.
        Some(serde_json::Value::Object(o)) => match o.get("name") {
            Some(serde_json::Value::String(n)) => n.clone(),
            _ => o.iter().map(|(k, v)| format!("{k}-{}", axis_label(Some(v)))).collect::<Vec<_>>().join("+"),
        },
        Some(other) => other.to_string(),
        None => "(base)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::GroupBy;

    #[test]
    fn one_key_or_several_read_and_label_runs() {
        let one: GroupBy = serde_json::from_str("\"model.recipe\"").unwrap();
        assert_eq!(one, GroupBy::default());
        assert_eq!(serde_json::to_string(&one).unwrap(), "\"model.recipe\"", "a single key stays a string");
        let two: GroupBy = serde_json::from_str(r#"["model.recipe", "model.n_layers"]"#).unwrap();
        let axes: super::Axes =
            serde_json::from_str(r#"{"model.recipe": "peri", "model.n_layers": 8, "optim.lr": 0.01}"#).unwrap();
        let axes = &axes;
        assert_eq!(one.label(axes), "peri");
        assert_eq!(two.label(axes), "peri, n_layers=8");
        assert!(two.covers(axes));
        assert!(serde_json::from_str::<GroupBy>("[]").is_err());
        assert!(serde_json::from_str::<GroupBy>(r#"["a", "a"]"#).is_err());
    }
}
