//! `run.track`: the tracking server a run is also sent to, checked when the config is read.
//!
//! ```toml
//! [run]
//! track = "mlflow:http://127.0.0.1:5000"   # an MLflow tracking server (its REST API)
//! experiment = "norms"                     # its experiment (default "normlab")
//! ```

use serde::{Deserialize, Serialize};

/// Where runs are tracked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TrackTarget {
    /// An MLflow tracking server at this base URL (`http://host:port`, no trailing slash).
    Mlflow { url: String },
}

/// The experiment runs go to when `run.experiment` is not given.
pub const DEFAULT_EXPERIMENT: &str = "normlab";

impl TryFrom<String> for TrackTarget {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let Some(url) = s.strip_prefix("mlflow:") else {
            return Err(format!(
                "run.track = \"{s}\" names no tracker; give \"mlflow:http://HOST:PORT\" (an MLflow tracking server)"
            ));
        };
        if url.starts_with("https://") {
            return Err(format!(
                "run.track = \"{s}\": normlab speaks plain HTTP to the tracking server (it has no TLS); use an http:// \
                 URL on a trusted network, or an SSH tunnel to the server"
            ));
        }
        let rest = url.strip_prefix("http://").filter(|r| !r.is_empty() && !r.starts_with('/'));
        if rest.is_none() {
            return Err(format!("run.track = \"{s}\": the server's URL must be http://HOST:PORT"));
        }
        Ok(TrackTarget::Mlflow { url: url.trim_end_matches('/').to_string() })
    }
}

impl From<TrackTarget> for String {
    fn from(t: TrackTarget) -> String {
        match t {
            TrackTarget::Mlflow { url } => format!("mlflow:{url}"),
        }
    }
}

impl std::fmt::Display for TrackTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_http_mlflow_url_is_a_target() {
        let t = TrackTarget::try_from("mlflow:http://127.0.0.1:5000/".to_string()).unwrap();
        assert_eq!(t, TrackTarget::Mlflow { url: "http://127.0.0.1:5000".into() });
        assert_eq!(String::from(t), "mlflow:http://127.0.0.1:5000");
        for bad in ["wandb:x", "mlflow:https://h:1", "mlflow:http://", "mlflow:127.0.0.1:5000"] {
            assert!(TrackTarget::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }
}
