//! Where in a written recipe a value is wrong: the path (`placement.sublayer.input`,
//! `placement.layers[1].skip`, `attention.softcap`) of the first value its section's type
//! refuses, so that the one error line names the field as written.

use super::spec::{AttentionSpec, EmbeddingSpec, InitSpec, LogitsSpec, PlacementSpec, ResidualSpec, SublayerSpec};
use serde::de::DeserializeOwned;
use toml::{Table, Value};

/// The path of the first value of `spec` (a whole recipe as a table) its type refuses.
pub fn first_refused(spec: &Table) -> Option<String> {
    spec.iter().find(|(k, v)| section_refuses(k, v)).map(|(key, value)| match value.as_table() {
        Some(t) => field_refused(key, t).unwrap_or_else(|| key.clone()),
        None => key.clone(),
    })
}

/// Whether section `key` refuses `value`.
fn section_refuses(key: &str, value: &Value) -> bool {
    match key {
        "placement" => refuses::<PlacementSpec>(value),
        "attention" => refuses::<AttentionSpec>(value),
        "residual" => refuses::<ResidualSpec>(value),
        "init" => refuses::<InitSpec>(value),
        "embedding" => refuses::<EmbeddingSpec>(value),
        "logits" => refuses::<LogitsSpec>(value),
        "name" | "about" => refuses::<String>(value),
        _ => true,
    }
}

fn refuses<T: DeserializeOwned>(value: &Value) -> bool {
    value.clone().try_into::<T>().is_err()
}

/// The first field of section `key` that its type refuses on its own (with the section's
/// `kind`), one level further inside the placement's sublayer and layers.
fn field_refused(key: &str, section: &Table) -> Option<String> {
    let alone = |field: &str, v: &Value| {
        let mut one = Table::new();
        if let Some(kind) = section.get("kind") {
            one.insert("kind".into(), kind.clone());
        }
        one.insert(field.into(), v.clone());
        Value::Table(one)
    };
    let (field, v) = section.iter().find(|(f, v)| *f != "kind" && section_refuses(key, &alone(f, v)))?;
    let inner = match (key, field.as_str(), v) {
        ("placement", "sublayer", Value::Table(s)) => sublayer_field(s).map(|f| format!(".{f}")),
        ("placement", "layers", Value::Array(entries)) => entries.iter().enumerate().find_map(|(i, e)| {
            let bad = e.as_table().map_or(Some(String::new()), |s| sublayer_field(s).map(|f| format!(".{f}")))?;
            Some(format!("[{i}]{bad}"))
        }),
        _ => None,
    };
    Some(format!("{key}.{field}{}", inner.unwrap_or_default()))
}

/// The first field of a sublayer table that [`SublayerSpec`] refuses on its own.
fn sublayer_field(s: &Table) -> Option<String> {
    s.iter()
        .find(|(f, v)| refuses::<SublayerSpec>(&Value::Table(Table::from_iter([((*f).clone(), (*v).clone())]))))
        .map(|(f, _)| f.clone())
}
