//! Every example config in configs/ parses and its recipe resolves.

use normlab::model::ModelConfig;

#[test]
fn every_example_config_validates() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cfg: ModelConfig = table["model"].clone().try_into().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (_, r) = cfg.validate().unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert_eq!(r.sublayers.len(), 2 * cfg.n_layers);
        n += 1;
    }
    assert!(n >= 3);
}

#[test]
fn custom_recipe_config_resolves_to_what_it_says() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/custom-scaled-sandwich.toml");
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cfg: ModelConfig = table["model"].clone().try_into().unwrap();
    let (_, r) = cfg.validate().unwrap();
    // L = 16, tail 0.25: layers 13..=16 get an output norm and c = 1/√k.
    assert!(r.sublayers[23].output.is_none() && r.sublayers[24].output.is_some());
    assert_eq!(r.sublayers[24].layer, 13);
    assert!((r.sublayers[31].residual - 0.25).abs() < 1e-12, "1/√16");
    assert!((r.sublayers[0].residual - 1.0).abs() < 1e-12);
}
