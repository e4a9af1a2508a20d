//! `normlab recipes`: every preset (or one, or a config's) with its equations and, with a
//! depth, its resolved plan; an imported run's record of what the import changed.

use crate::hf::import::{ImportRecord, record_path};
use crate::model::ModelConfig;
use crate::recipe::{Dims, PRESET_NAMES, equation, preset, resolve};
use anyhow::Context;
use std::path::PathBuf;

/// `normlab recipes`: every preset (or one, or a config's) with its equations and, with a
/// depth, its resolved plan.
pub fn recipes(
    name: Option<String>,
    config: Option<PathBuf>,
    layers: Option<usize>,
    d_model: Option<usize>,
) -> anyhow::Result<()> {
    let specs = if let Some(path) = config {
        if let Some(rec) = path.parent().map(record_path).filter(|p| p.is_file()) {
            let r: ImportRecord = crate::io::json::read(&rec)?;
            outln!("imported from {} ({}) as recipe {}", r.source.display(), r.model_type, r.recipe);
            outln!("  added (initialised): {}", if r.added.is_empty() { "nothing".into() } else { r.added.join(", ") });
            outln!(
                "  removed (dropped): {}\n",
                if r.removed.is_empty() { "nothing".into() } else { r.removed.join(", ") }
            );
        }
        let cfg = crate::run::RunConfig::load(Some(&path), &[])?;
        let (spec, _) = cfg.model.validate().with_context(|| format!("{}", path.display()))?;
        print_optimizer_groups(&cfg)?;
        if let Some(m) = &cfg.model.moe {
            outln!("mixture of experts ([model.moe]):");
            for line in m.describe(cfg.model.n_layers, cfg.model.d_ff(), cfg.model.ffn.info().label) {
                outln!("    {line}");
            }
            outln!();
        }
        vec![(spec, Some((cfg.model.n_layers, cfg.model.d_model)))]
    } else if let Some(n) = name {
        let spec =
            preset(&n).with_context(|| format!("unknown recipe `{n}`; presets are: {}", PRESET_NAMES.join(", ")))?;
        vec![(spec, None)]
    } else {
        let all: Vec<_> = PRESET_NAMES.iter().filter_map(|n| preset(n)).map(|s| (s, None)).collect();
        print_specs(all, layers, d_model)?;
        print_norm_kinds();
        print_other_kinds();
        outln!("\noptimizers (optim.name; hidden matrices: every 2-D weight inside the blocks):");
        for line in crate::train::optim::describe_names() {
            outln!("    {line}");
        }
        return Ok(());
    };
    print_specs(specs, layers, d_model)
}

/// Which optimizer the config's `[optim]` gives each parameter role of its model.
fn print_optimizer_groups(cfg: &crate::run::RunConfig) -> anyhow::Result<()> {
    let device = burn::tensor::Device::flex();
    let model = crate::model::Transformer::new(&cfg.model, crate::init::ParamSource::Seeded(cfg.train.seed), &device)?;
    let optim = crate::train::optim::settings(&cfg.optim, &model);
    outln!("optimizer {}:", cfg.optim.name);
    for line in crate::train::optim::describe_groups(&optim, &model, false) {
        outln!("    {line}");
    }
    outln!();
    Ok(())
}

/// Every norm kind a slot may name, with its formula and options (from [`crate::norm::KINDS`]).
fn print_norm_kinds() {
    outln!("norm kinds (any slot; `ln` is the recipe's base norm, `none` an empty slot):");
    for k in crate::norm::KINDS {
        let options: Vec<&str> = k.options.iter().map(|o| o.name()).collect();
        let options = if options.is_empty() { "no options".to_string() } else { options.join(", ") };
        outln!("    {:<15} {} ({options})", k.name, k.formula);
    }
}

/// Every residual kind (`[recipe.residual] kind`) and feed-forward kind (`model.ffn`), from
/// their tables.
fn print_other_kinds() {
    outln!("\nresidual kinds ([recipe.residual] kind; `sum` by default):");
    for k in crate::recipe::residual::KINDS {
        let options = if k.options.is_empty() { "no options".to_string() } else { k.options.join(", ") };
        outln!("    {:<15} {} ({options})", k.name, k.formula);
    }
    outln!("\nfeed-forward kinds (model.ffn; with [model.moe] the experts' kind):");
    for k in crate::model::ffn::kinds::KINDS {
        outln!("    {:<15} {}", k.name, k.formula);
    }
    outln!("\nMoE router kinds ([model.moe.router] kind):");
    for k in crate::model::ffn::moe::router::KINDS {
        outln!("    {:<15} {}", k.name, k.formula);
    }
    outln!("\nMoE balancing-loss forms ([model.moe] aux_form; `per-layer` by default):");
    for f in crate::model::ffn::moe::balance::AUX_FORMS {
        outln!("    {:<15} {}", f.name, f.formula);
    }
}

/// Each spec's equations and, with a depth, its resolved plan.
fn print_specs(
    specs: Vec<(crate::recipe::RecipeSpec, Option<(usize, usize)>)>,
    layers: Option<usize>,
    d_model: Option<usize>,
) -> anyhow::Result<()> {
    for (spec, cfg_dims) in specs {
        outln!("{} — {}", spec.name, spec.about);
        for line in equation::describe(&spec) {
            outln!("    {line}");
        }
        for note in crate::recipe::preset_notes(&spec) {
            outln!("    note: {note}");
        }
        if let Some(n_layers) = layers.or(cfg_dims.map(|c| c.0)) {
            let d_model = d_model.or(cfg_dims.map(|c| c.1)).unwrap_or(ModelConfig::default().d_model);
            let resolved = resolve(&spec, Dims { n_layers, d_model }, 1e-6)?;
            for line in equation::plan_lines(&resolved) {
                outln!("      {line}");
            }
            if let Some(w) = crate::recipe::theorem_3_6_warning(&resolved) {
                outln!("    warning: {w}");
            }
        }
        outln!();
    }
    Ok(())
}
