//! `normlab scaling`'s ladders (KiteNorm A.4): which config key each axis moves and through
//! which values, for the CPU miniature and for the paper's settings (`--full`).

use super::config::Sweep;
use anyhow::ensure;
use std::path::Path;

/// What a scaling study varies; everything else stays at the base config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Transformer layers, at a fixed number of tokens per parameter.
    Depth,
    /// Hidden size d (and a Table-1 GLU width of 3d with `--full`), at fixed tokens per parameter.
    Width,
    /// Tokens per parameter, as multiples ¼, ½, 1, 2, 4, 6 of the base.
    Budget,
    /// Sequences per optimizer step, at a fixed token budget.
    Batch,
}

impl Axis {
    /// The config key the ladder sets.
    pub fn key(self) -> &'static str {
        match self {
            Axis::Depth => "model.n_layers",
            Axis::Width => "model",
            Axis::Budget => "train.tokens_per_param",
            Axis::Batch => "train.batch_size",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Axis::Depth => "depth",
            Axis::Width => "width",
            Axis::Budget => "budget",
            Axis::Batch => "batch",
        }
    }

    /// The ladder's values: the miniature's, or with `full` the paper's (A.4).
    pub fn ladder(self, full: bool) -> Vec<toml::Value> {
        let ints = |v: &[i64]| v.iter().map(|&x| toml::Value::Integer(x)).collect();
        let floats = |v: &[f64]| v.iter().map(|&x| toml::Value::Float(x)).collect();
        match (self, full) {
            (Axis::Depth, false) => ints(&[2, 4, 8, 16]),
            (Axis::Depth, true) => ints(&[3, 6, 12, 24, 48, 96]),
            (Axis::Width, false) => widths(&[32, 64, 128], None),
            (Axis::Width, true) => widths(&[256, 512, 1024], Some(3)),
            (Axis::Budget, false) => floats(&[0.0625, 0.125, 0.25, 0.5, 1.0, 1.5]),
            (Axis::Budget, true) => floats(&[5.0, 10.0, 20.0, 40.0, 80.0, 120.0]),
            (Axis::Batch, false) => ints(&[8, 16, 32, 64]),
            (Axis::Batch, true) => ints(&[128, 256, 512, 1024]),
        }
    }
}

/// `model` tables `{d_model = d}` (and `d_glu = glu·d`): width and GLU width move together.
fn widths(ds: &[i64], glu: Option<i64>) -> Vec<toml::Value> {
    ds.iter()
        .map(|&d| {
            let mut t = toml::Table::new();
            t.insert("d_model".into(), toml::Value::Integer(d));
            if let Some(g) = glu {
                t.insert("d_glu".into(), toml::Value::Integer(g * d));
            }
            toml::Value::Table(t)
        })
        .collect()
}

impl Sweep {
    /// `normlab scaling`'s study: the base (`configs/sweeps/scaling.toml`, or `scaling-full.toml`
    /// with `full`) with `axis`'s ladder between the recipes and the learning rates, grouped by
    /// recipe and ladder point; `recipes`, when given, replace the recipe axis. The sweep
    /// directory is `runs/scaling-<axis>` unless `sets` name another.
    pub fn scaling(axis: Axis, full: bool, recipes: &[String], sets: &[String]) -> anyhow::Result<Self> {
        const BASE: &str = include_str!("../../configs/sweeps/scaling.toml");
        const BASE_FULL: &str = include_str!("../../configs/sweeps/scaling-full.toml");
        let (text, name) =
            if full { (BASE_FULL, "configs/sweeps/scaling-full.toml") } else { (BASE, "configs/sweeps/scaling.toml") };
        ensure!(recipes.iter().all(|r| !r.trim().is_empty()), "--recipes has an empty name; give e.g. kitenorm,pre");
        let mut table: toml::Table = toml::from_str(text)?;
        let sweep = table.entry("sweep").or_insert_with(|| toml::Value::Table(Default::default()));
        if let Some(s) = sweep.as_table_mut() {
            let dir = s.get("dir").and_then(|d| d.as_str()).unwrap_or("runs/scaling").to_string();
            s.insert("dir".into(), toml::Value::String(format!("{dir}-{}", axis.name())));
            let keys = vec![toml::Value::String("model.recipe".into()), toml::Value::String(axis.key().into())];
            s.insert("group_by".into(), toml::Value::Array(keys));
            if let Some(axes) = s.get_mut("axes").and_then(|a| a.as_table_mut()) {
                let mut ordered = toml::Table::new();
                let recipe = if recipes.is_empty() {
                    axes.get("model.recipe").cloned()
                } else {
                    Some(toml::Value::Array(recipes.iter().map(|r| toml::Value::String(r.trim().into())).collect()))
                };
                ordered.extend(recipe.map(|r| ("model.recipe".to_string(), r)));
                ordered.insert(axis.key().into(), toml::Value::Array(axis.ladder(full)));
                ordered.extend(axes.iter().filter(|(k, _)| *k != "model.recipe").map(|(k, v)| (k.clone(), v.clone())));
                *axes = ordered;
            }
        }
        Self::parse(&toml::to_string(&table)?, Path::new(name), sets)
    }
}

#[cfg(test)]
mod tests {
    use super::Axis;
    use crate::sweep::Sweep;

    #[test]
    fn each_ladder_moves_its_key_between_the_recipes_and_the_rates() {
        let s = Sweep::scaling(Axis::Depth, false, &[], &[]).unwrap();
        let keys: Vec<&str> = s.section.axes.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["model.recipe", "model.n_layers", "optim.lr"]);
        assert_eq!(s.section.group_by.keys(), ["model.recipe", "model.n_layers"]);
        assert_eq!(s.section.dir, std::path::Path::new("runs/scaling-depth"));
        assert_eq!(s.grid().len(), 4 * 4 * 4, "4 recipes × 4 depths × 4 rates");
        let cpu = ["run.device=cpu".to_string()];
        let full = Sweep::scaling(Axis::Width, true, &["kitenorm".into()], &cpu).unwrap();
        let widths = full.section.axes.get("model").unwrap();
        assert_eq!(widths.len(), 3);
        assert_eq!(widths[0].get("d_glu").and_then(|v| v.as_integer()), Some(768), "Table 1's 3d at d = 256");
        // Every run's config is valid, the ladder's value in it.
        let cfg = full.run_config(&full.grid()[0]).unwrap();
        assert_eq!((cfg.model.d_model, cfg.model.d_glu), (256, Some(768)));
        let budget = Sweep::scaling(Axis::Budget, true, &[], &cpu).unwrap();
        let ratios: Vec<f64> =
            budget.section.axes.get("train.tokens_per_param").unwrap().iter().filter_map(|v| v.as_float()).collect();
        assert_eq!(ratios, [5.0, 10.0, 20.0, 40.0, 80.0, 120.0], "¼ … 6 × Chinchilla's 20");
    }
}
