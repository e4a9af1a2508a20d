//! Typed JSON documents. Every JSON file normlab writes has one Rust type that both its writer
//! and its readers use, so renaming a field cannot silently break a reader.
//!
//! JSON has no NaN or ∞: `serde_json` writes non-finite floats as `null`. Fields that can hold
//! them (a loss that blew up, a CV over too few steps) read `null` back as NaN through
//! [`nan`], [`nan_vec`] and [`nan_pairs`].

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use std::path::Path;

/// Writes `value` as pretty JSON, atomically.
pub fn write<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    super::write_atomic(path, serde_json::to_string_pretty(value)?.as_bytes())
}

/// Reads a JSON file written by [`write`] into its type.
pub fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is corrupt or from another normlab version", path.display()))
}

/// An `f64` that was written as `null` because it was NaN or infinite.
pub fn nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// NaN: the value of a statistic a file written before it existed does not hold.
pub fn nan_default() -> f64 {
    f64::NAN
}

/// A list of `f64` any of which may have been written as `null`.
pub fn nan_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// Pairs of `f64` any of which may have been written as `null`.
pub fn nan_pairs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[f64; 2]>, D::Error> {
    let pairs = Vec::<[Option<f64>; 2]>::deserialize(d)?;
    Ok(pairs.into_iter().map(|p| p.map(|v| v.unwrap_or(f64::NAN))).collect())
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct R {
        #[serde(deserialize_with = "super::nan")]
        x: f64,
        #[serde(deserialize_with = "super::nan_vec")]
        v: Vec<f64>,
    }

    #[test]
    fn non_finite_values_come_back_as_nan() {
        let text = serde_json::to_string(&R { x: f64::INFINITY, v: vec![1.5, f64::NAN] }).unwrap();
        assert_eq!(text, r#"{"x":null,"v":[1.5,null]}"#);
        let r: R = serde_json::from_str(&text).unwrap();
        assert!(r.x.is_nan() && r.v[0] == 1.5 && r.v[1].is_nan());
    }
}
