//! Every example config in configs/ (and configs/presets/) is a valid run config, and every
//! preset has one.

use normlab::recipe::PRESET_NAMES;
use normlab::run::RunConfig;
use std::path::{Path, PathBuf};

fn configs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    out.sort();
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("configs")
}

#[test]
fn every_example_config_validates() {
    let mut all = configs(&root());
    all.extend(configs(&root().join("presets")));
    all.extend(configs(&root().join("data")));
    all.extend(configs(&root().join("moe")));
    assert!(all.len() >= 16 + 5 + 4 + 5);
    for path in all {
        let cfg = RunConfig::load(Some(&path), &[]).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let cfg = cfg.check().unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert_eq!(cfg.recipe().sublayers.len(), 2 * cfg.model.n_layers);
    }
}

#[test]
fn every_preset_has_an_example_config() {
    for name in PRESET_NAMES {
        let path = root().join("presets").join(format!("{name}.toml"));
        let cfg = RunConfig::load(Some(&path), &[]).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert_eq!(cfg.model.validate().unwrap().0.name, *name);
    }
}

#[test]
fn the_quickstart_config_is_the_default() {
    let mut q = RunConfig::load(Some(&root().join("quickstart.toml")), &[]).unwrap();
    q.vocab_size_given = false;
    assert_eq!(q, RunConfig::default(), "configs/quickstart.toml documents the defaults");
}

#[test]
fn custom_recipe_config_resolves_to_what_it_says() {
    let cfg = RunConfig::load(Some(&root().join("custom-scaled-sandwich.toml")), &[]).unwrap();
    let (_, r) = cfg.model.validate().unwrap();
    // L = 16, tail 0.25: layers 13..=16 get an output norm and c = 1/√k.
    assert!(r.sublayers[23].output.is_none() && r.sublayers[24].output.is_some());
    assert_eq!(r.sublayers[24].layer, 13);
    assert!((r.sublayers[31].residual - 0.25).abs() < 1e-12, "1/√16");
    assert!((r.sublayers[0].residual - 1.0).abs() < 1e-12);
}
