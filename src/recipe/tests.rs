//! Structure tests: every preset resolves to exactly what KiteNorm Table 2 (and the Peri-LN
//! and BHyT papers) specify. Expected numbers are written out by hand (1/√24 for L = 12, …), not taken from
//! the code.

use super::*;
use crate::norm::{BhytDenominator, NormKind};

const EPS: f64 = 1e-6;

fn resolve(name: &str, l: usize) -> ResolvedRecipe {
    super::resolve(&preset(name).unwrap(), dims(l), EPS).unwrap()
}

/// `L` layers of the default width, d = 128.
fn dims(n_layers: usize) -> Dims {
    Dims { n_layers, d_model: 128 }
}

fn ln() -> Option<NormKind> {
    Some(NormKind::LayerNorm { gain: true, shift: true, eps: EPS })
}

fn ln0() -> Option<NormKind> {
    Some(NormKind::LayerNorm { gain: true, shift: false, eps: EPS })
}

fn sln() -> Option<NormKind> {
    Some(NormKind::ScalarLayerNorm { shift: true, eps: EPS })
}

fn rms() -> Option<NormKind> {
    Some(NormKind::RmsNorm { gain: true, eps: EPS })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12 * b.abs().max(1.0)
}

/// Asserts every sublayer of `r` has these parts.
fn all_sublayers(
    r: &ResolvedRecipe,
    input: Option<NormKind>,
    output: Option<NormKind>,
    outer: Option<NormKind>,
    skip: f64,
    residual: f64,
) {
    for s in &r.sublayers {
        assert_eq!((&s.input, &s.output, &s.outer), (&input, &output, &outer), "{} sublayer {}", r.name, s.index);
        assert!(
            close(s.skip, skip) && close(s.residual, residual),
            "{} sublayer {}: a = {}, c = {}",
            r.name,
            s.index,
            s.skip,
            s.residual
        );
    }
}

#[test]
fn post_pre_gpt2_lns_match_table_2() {
    let r = resolve("post", 12);
    assert_eq!(r.sublayers.len(), 24);
    all_sublayers(&r, None, None, ln(), 1.0, 1.0);
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (None, None));

    let r = resolve("pre", 12);
    all_sublayers(&r, ln(), None, None, 1.0, 1.0);
    assert_eq!(r.logits.norm, ln());
    assert!(r.sublayers.iter().all(|s| s.init_out == 1.0 && s.init_in == 1.0));

    let r = resolve("gpt2-pre", 12);
    all_sublayers(&r, ln(), None, None, 1.0, 1.0);
    assert_eq!(r.logits.norm, ln());
    // 1/√(2L) = 1/√24 = 0.2041241452…
    assert!(r.sublayers.iter().all(|s| close(s.init_out, 0.204_124_145_231_931_5) && s.init_in == 1.0));

    let r = resolve("lns", 12);
    all_sublayers(&r, ln(), None, None, 1.0, 1.0);
    for s in &r.sublayers {
        assert!(close(s.input_scale, 1.0 / (s.layer as f64).sqrt()), "k^-1/2 at layer {}", s.layer);
    }
    assert!(close(r.sublayers[6].input_scale, 0.5), "layer 4 → 4^-1/2 = 0.5");
    assert_eq!(r.logits.norm, ln(), "LNS final norm is a plain LN");
    assert!(r.sublayers.iter().all(|s| s.init_out == 1.0));
}

#[test]
fn peri_has_input_output_embedding_and_final_norms() {
    let r = resolve("peri", 6);
    all_sublayers(&r, ln(), ln(), None, 1.0, 1.0);
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (ln(), ln()));
}

/// The papers' baselines as they train them, with RMSNorm (γ, no centring, no shift): the BHyT
/// paper's RMSNorm (Llama-3.2: pre-norm, final RMSNorm), LNS (k^-1/2 after each input RMSNorm, the
/// final one unscaled) and Peri-LN (the Peri-LN paper §3: RMSNorm around each module, on the
/// embedding and at the end).
#[test]
fn rms_forms_of_the_papers_baselines() {
    let r = resolve("pre-rms", 16);
    all_sublayers(&r, rms(), None, None, 1.0, 1.0);
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (None, rms()));
    assert!(r.sublayers.iter().all(|s| s.input_scale == 1.0 && s.init_out == 1.0 && s.init_in == 1.0));

    let r = resolve("lns-rms", 16);
    all_sublayers(&r, rms(), None, None, 1.0, 1.0);
    assert!(close(r.sublayers[31].input_scale, 0.25), "layer 16 → 16^-1/2 = 0.25");
    assert!(close(r.sublayers[17].input_scale, 1.0 / 3.0), "layer 9 → 9^-1/2 = 1/3");
    assert_eq!(r.logits.norm, rms());

    let r = resolve("peri-rms", 16);
    all_sublayers(&r, rms(), rms(), None, 1.0, 1.0);
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (rms(), rms()));
    assert!(r.sublayers.iter().all(|s| s.outer.is_none()));
}

#[test]
fn peri_norm_matches_table_2() {
    // KiteNorm Table 2: X_{l+1} = X_l + LN(F_l(LN(X_l))), no final output LayerNorm, standard
    // LayerNorm with shift, skip and residual scales 1, no init scaling; no embedding LN (the
    // table names none, unlike the Peri-LN paper's Peri-LN).
    for l in [12, 48] {
        let r = resolve("peri-norm", l);
        assert_eq!(r.sublayers.len(), 2 * l);
        all_sublayers(&r, ln(), ln(), None, 1.0, 1.0);
        assert!(r.sublayers.iter().all(|s| s.input_scale == 1.0 && s.init_out == 1.0 && s.init_in == 1.0));
        assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (None, None));
        assert_eq!(r.logits.regularizer, 0.0);
    }
}

#[test]
fn mix_with_12_layers_has_3_post_layers_and_scaled_pre_suffix() {
    let r = resolve("mix", 12);
    for s in &r.sublayers {
        if s.layer <= 3 {
            assert_eq!((&s.input, &s.outer), (&None, &ln()), "layer {} is post-norm", s.layer);
            assert_eq!(s.init_out, 1.0);
        } else {
            assert_eq!((&s.input, &s.outer), (&ln(), &None), "layer {} is pre-norm", s.layer);
            assert!(close(s.init_out, 1.0 / 18f64.sqrt()), "1/√(2·L_pre) = 1/√18");
        }
    }
    assert_eq!(r.logits.norm, ln());
    // L = 3: ⌊0.75⌋ = 0 post layers, all pre with 1/√6.
    let r = resolve("mix", 3);
    assert!(r.sublayers.iter().all(|s| s.input == ln() && s.outer.is_none() && close(s.init_out, 1.0 / 6f64.sqrt())));
}

#[test]
fn keel_has_skip_2l_after_layer_1_and_no_outer_norm_after_sublayer_1() {
    let r = resolve("keel", 12);
    for s in &r.sublayers {
        assert_eq!(s.input, ln0(), "KEEL LN has no shift");
        let want_skip = if s.layer == 1 { 1.0 } else { 24.0 };
        assert_eq!(s.skip, want_skip, "sublayer {}", s.index);
        assert_eq!(s.residual, 1.0);
        let want_outer = if s.index == 1 { None } else { ln0() };
        assert_eq!(s.outer, want_outer, "sublayer {}", s.index);
        assert_eq!(s.init_out, 1.0);
    }
    assert_eq!(r.logits.norm, None);
}

#[test]
fn kitenorm_and_ablations_match_table_2_and_section_4_3() {
    let r = resolve("kitenorm", 12);
    all_sublayers(&r, sln(), None, sln(), 1.0, 1.0 / 24.0);
    assert_eq!((r.logits.norm.clone(), r.logits.regularizer), (None, 1.0), "no final norm; λ = 1");
    assert!(r.sublayers.iter().all(|s| s.init_out == 1.0));

    let r = resolve("kitenorm-no-inner", 12);
    all_sublayers(&r, None, None, sln(), 1.0, 1.0 / 24.0);
    assert_eq!(r.logits.regularizer, 1.0);
    let r = resolve("kitenorm-vector-ln", 12);
    all_sublayers(&r, ln(), None, ln(), 1.0, 1.0 / 24.0);
    let r = resolve("kitenorm-no-reg", 12);
    all_sublayers(&r, sln(), None, sln(), 1.0, 1.0 / 24.0);
    assert_eq!(r.logits.regularizer, 0.0);
}

#[test]
fn dyt_and_bhyt_use_their_paper_defaults() {
    let r = resolve("dyt-plain", 4);
    all_sublayers(&r, Some(NormKind::Dyt { alpha: 0.5 }), None, None, 1.0, 1.0);
    assert_eq!(r.logits.norm, Some(NormKind::Dyt { alpha: 0.5 }));
    assert_eq!(r.embedding.scale, None);

    let star = |lambda| Some(NormKind::BhytStar { lambda, p: 0.99, denominator: BhytDenominator::Std, eps: EPS });
    let r = resolve("bhyt-star", 4);
    for s in &r.sublayers {
        let want = if s.branch == Branch::Attn { star(2.0) } else { star(1.0) };
        assert_eq!(s.input, want, "the BHyT paper's C.3: λ_attn = 2, λ_mlp = 1");
    }
    assert_eq!(r.logits.norm, star(1.0));
    let r = resolve("bhyt", 4);
    for s in &r.sublayers {
        let lambda = if s.branch == Branch::Attn { 2.0 } else { 1.0 };
        assert_eq!(s.input, Some(NormKind::Bhyt { lambda, p: 0.99, eps: EPS }));
    }
}

/// The DyT authors' LLaMA table (Zhu et al. 2025): α₀ attention / FFN / final = 0.8 / 0.2 / 0.2
/// at 7B (d = 4096), 0.6 / 0.15 / 0.15 at 13B (d = 5120), 0.2 / 0.05 / 0.05 at 34B and 70B
/// (d = 8192); narrower models take the first row. Embedding scale e₀ = √d.
#[test]
fn dyt_follows_the_authors_llama_recipe_by_width() {
    for (d, attn, other) in [(128, 0.8, 0.2), (4096, 0.8, 0.2), (5120, 0.6, 0.15), (8192, 0.2, 0.05)] {
        let r = super::resolve(&preset("dyt").unwrap(), Dims { n_layers: 3, d_model: d }, EPS).unwrap();
        for s in &r.sublayers {
            let alpha = if s.branch == Branch::Attn { attn } else { other };
            assert_eq!(s.input, Some(NormKind::Dyt { alpha }), "d = {d}, {s:?}");
            assert_eq!((s.output.clone(), s.outer.clone()), (None, None));
        }
        assert_eq!(r.logits.norm, Some(NormKind::Dyt { alpha: other }), "d = {d}");
        assert_eq!(r.embedding.scale, Some((d as f64).sqrt()));
        assert_eq!(r.embedding.norm, None);
    }
    // Any recipe can carry the embedding scale, and a config can remove the preset's.
    assert_eq!(from_toml("[recipe]\npreset = \"pre\"\nembedding_scale = 2.5\n").unwrap().embedding.scale, Some(2.5));
    assert_eq!(from_toml("[recipe]\npreset = \"dyt\"\nembedding_scale = \"none\"\n").unwrap().embedding.scale, None);
}

/// KiteNorm's scalar slots follow the base norm: scalarised RMSNorm (γ′ only) under
/// `norm = "rmsnorm"`, which has no shift to ask for.
#[test]
fn scalar_slots_follow_the_base_norm() {
    let r = from_toml("[recipe]\npreset = \"kitenorm\"\nnorm = \"rmsnorm\"\n").unwrap();
    let srms = Some(NormKind::ScalarRmsNorm { eps: EPS });
    all_sublayers(&r, srms.clone(), None, srms, 1.0, 1.0 / 24.0);
    let e = err(
        "[recipe]\npreset = \"kitenorm\"\nnorm = \"rmsnorm\"\n[recipe.sublayer]\ninput = { kind = \"scalar-ln\", shift = true }\n",
    );
    assert!(e.contains("no shift"), "{e}");
    let r = from_toml("[recipe]\npreset = \"kitenorm\"\n[recipe.sublayer]\ninput = \"scalar-rms\"\n").unwrap();
    assert_eq!(r.sublayers[0].input, Some(NormKind::ScalarRmsNorm { eps: EPS }));
    assert_eq!(r.sublayers[0].outer, sln(), "LayerNorm base: the outer slot stays scalarised LayerNorm");
}

#[test]
fn qk_norm_is_per_head_or_full_width() {
    assert_eq!(resolve("olmo2", 2).attention.qk_norm, QkNorm::Full, "OLMo 2 normalises q, k over the full width");
    assert_eq!(resolve("pre", 2).attention.qk_norm, QkNorm::None);
    assert_eq!(from_toml("[recipe]\npreset = \"pre\"\nqk_norm = \"head\"\n").unwrap().attention.qk_norm, QkNorm::Head);
    assert_eq!(from_toml("[recipe]\npreset = \"pre\"\nqk_norm = true\n").unwrap().attention.qk_norm, QkNorm::Head);
    assert_eq!(from_toml("[recipe]\npreset = \"olmo2\"\nqk_norm = false\n").unwrap().attention.qk_norm, QkNorm::None);
    let e = err("[recipe]\npreset = \"pre\"\nqk_norm = \"both\"\n");
    assert!(e.contains("\"none\", \"head\", \"full\", \"l2\" or \"unit-l2\""), "{e}");
}

#[test]
fn olmo2_and_deepnorm() {
    let r = resolve("olmo2", 4);
    all_sublayers(&r, None, rms(), None, 1.0, 1.0);
    assert_eq!(r.logits.norm, rms());

    let r = resolve("deepnorm", 12);
    // α = (2L)^¼ = 24^¼ = 2.2133638…, β = (8L)^−¼ = 96^−¼ = 0.3194715…
    all_sublayers(&r, None, None, ln(), 2.213_363_839_400_643, 1.0);
    assert!(
        r.sublayers
            .iter()
            .all(|s| close(s.init_in, 0.319_471_552_123_136_2) && close(s.init_out, 0.319_471_552_123_136_2))
    );
    assert_eq!(r.logits.norm, None);
}

#[test]
fn every_preset_resolves_and_prints_equations() {
    for name in PRESET_NAMES {
        let spec = preset(name).unwrap();
        assert_eq!(&spec.name, name);
        for l in [1, 2, 3, 12, 48] {
            let resolved = super::resolve(&spec, dims(l), EPS);
            if *name == "deepscalelm" && l == 1 {
                // β² = k_β/L = 1 leaves no skip: refused, naming the scale.
                let e = format!("{:#}", resolved.expect_err("deepscalelm at L = 1"));
                assert!(e.contains("`skip`: `sqrt(1 - k_beta/L)` = 0"), "{e}");
                continue;
            }
            resolved.unwrap_or_else(|e| panic!("{name} at L = {l}: {e:#}"));
        }
        let lines = equation::describe(&spec);
        // A stream recipe prints its read and write instead of the one-stream sum.
        let step = match spec.residual.kind() {
            "hc" | "mhc" | "mhc-lite" => "H[k] ← ",
            "attn-res" => "x_l = Σ_s α_s·V_s",
            _ => "X_{l+1} =",
        };
        assert!(lines.iter().any(|l| l.contains(step)), "{name}: {lines:?}");
    }
    let pre = equation::describe(&preset("pre").unwrap()).join("\n");
    assert!(pre.contains("X_{l+1} = X_l + F_l(LN(X_l))"), "{pre}");
    let kite = equation::describe(&preset("kitenorm").unwrap()).join("\n");
    assert!(kite.contains("X_{l+1} = sLN(X_l + (1/(2*L))·F_l(sLN(X_l)))"), "{kite}");
}

/// Parses `[recipe]` TOML the way a config file would.
fn from_toml(src: &str) -> anyhow::Result<ResolvedRecipe> {
    #[derive(serde::Deserialize)]
    struct Wrapper {
        recipe: RecipeConfig,
    }
    let w: Wrapper = toml::from_str(src)?;
    super::resolve(&w.recipe.spec()?, dims(12), EPS)
}

fn err(src: &str) -> String {
    format!("{:#}", from_toml(src).expect_err("should be rejected"))
}

#[test]
fn custom_recipes_compose_in_a_config_file() {
    // KiteNorm Table 2's peri-norm: no embedding or final norm.
    let r = from_toml("[recipe]\npreset = \"peri\"\nembedding_norm = \"none\"\nfinal_norm = \"none\"\n").unwrap();
    assert_eq!((r.embedding.norm, r.logits.norm), (None, None));
    assert_eq!(r.name, "peri*", "a changed preset is marked");
    // The Peri-LN paper: RMSNorm, output gain frozen at 1.
    let r = from_toml(
        "[recipe]\npreset = \"peri\"\nnorm = \"rmsnorm\"\n[recipe.sublayer]\noutput = { kind = \"ln\", \
        gain = false }\n",
    )
    .unwrap();
    assert_eq!(r.sublayers[0].output, Some(NormKind::RmsNorm { gain: false, eps: EPS }));
    assert_eq!(r.sublayers[0].input, rms());
    // From scratch: a sandwich with an expression-valued residual scale on the last 4 layers.
    let r = from_toml(
        "[recipe]\nname = \"mine\"\nfinal_norm = \"rmsnorm\"\n[recipe.sublayer]\ninput = \
            \"ln\"\n[[recipe.layers]]\nrange = \"L-3..=L\"\nresidual = \"1/sqrt(k)\"\n",
    )
    .unwrap();
    assert_eq!(r.name, "mine");
    assert_eq!(r.sublayers[23].residual, 1.0 / 12f64.sqrt());
    assert_eq!(r.sublayers[0].residual, 1.0);
    assert_eq!(r.sublayers[16].residual, 1.0 / 9f64.sqrt(), "layer 9 = L − 3 is the first overridden");
    assert_eq!(r.sublayers[15].residual, 1.0);
}

#[test]
fn malformed_recipes_are_rejected_naming_the_field() {
    let e = err("[recipe]\npreset = \"pre\"\n[recipe.placement.sublayer]\ninput = \"groupnorm\"\n");
    assert!(e.contains("unknown norm kind `groupnorm`") && e.contains("`placement.sublayer.input`"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\n[recipe.placement.sublayer]\nresidual = -0.5\n");
    assert!(e.contains("`residual`: -0.5 must be a positive"), "{e}");
    let e = err("[recipe]\npreset = \"mix\"\nplacement = { params = { mix_ratio = 1.5 } }\n");
    assert!(e.contains("params.mix_ratio = 1.5 is outside [0, 1]"), "{e}");
    let e = err(
        "[recipe]\npreset = \"bhyt-star\"\n[recipe.placement.sublayer]\ninput = { kind = \"bhyt-star\", lambda = 0.0 }\n",
    );
    assert!(e.contains("`lambda` = 0 must be > 0"), "{e}");
    let e = err("[recipe]\npreset = \"dyt\"\n[recipe.placement.sublayer]\ninput = { kind = \"dyt\", alpah = 0.5 }\n");
    assert!(e.contains("alpah"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\nresidual_scale = 2\n");
    assert!(e.contains("residual_scale"), "{e}");
    let e = err("recipe = \"kite\"\n");
    assert!(e.contains("unknown recipe `kite`") && e.contains("kitenorm"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\n[recipe.placement.sublayer]\ninput = { kind = \"dyt\", lambda = 2.0 }\n");
    assert!(e.contains("`dyt` has no option `lambda`"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\n[[recipe.placement.layers]]\nrange = \"1..=20\"\nskip = 2\n");
    assert!(e.contains("layers[0].range") && e.contains("outside the layers 1..=12"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\n[recipe.placement.sublayer]\nskip = \"2*Q\"\n");
    assert!(e.contains("unknown name `Q`"), "{e}");
    let e = err(
        "[recipe]\npreset = \"pre\"\n[[recipe.placement.layers]]\nsublayers = \"ffn\"\ninput = { kind = \"bhyt\" }\nrange = \
            \"1..=L\"\n",
    );
    assert!(e.contains("layer 1: the FFN input norm is bhyt") && e.contains("must be bhyt too"), "{e}");
    let e = err("[recipe]\npreset = \"pre\"\n[recipe.placement.sublayer]\nouter = { kind = \"bhyt-star\", p = 1.0 }\n");
    assert!(e.contains("`p` = 1 must lie in (0, 1)"), "{e}");
}

/// The schemes of the field's training stacks, by hand from their papers and code.
#[test]
fn gated_recipes_by_hand() {
    use super::{Gate, GateOn, GateOwner, GateShape};
    let scalar = |init, per| {
        Some(Gate {
            shape: GateShape::Scalar,
            init,
            per,
            on: GateOn::Branch,
            stored: init,
            factor: 1.0,
            profile: false,
        })
    };
    // ReZero: no norm anywhere, one α per layer shared by both sublayers, α₀ = 0.
    let r = resolve("rezero", 6);
    all_sublayers(&r, None, None, None, 1.0, 1.0);
    assert!(r.sublayers.iter().all(|s| s.gate == scalar(0.0, GateOwner::Layer)));
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (None, None));
    // SkipInit: the same, one α per sublayer.
    assert!(resolve("skipinit", 6).sublayers.iter().all(|s| s.gate == scalar(0.0, GateOwner::Sublayer)));
    // LayerScale: CaiT's λ₀ is 0.1 up to depth 18, 1e-5 up to 24, 1e-6 beyond.
    for (l, want) in [(12, 0.1), (18, 0.1), (19, 1e-5), (24, 1e-5), (25, 1e-6), (36, 1e-6)] {
        let r = resolve("layerscale", l);
        all_sublayers(&r, ln(), None, None, 1.0, 1.0);
        let (shape, per, on) = (GateShape::Channel, GateOwner::Sublayer, GateOn::Branch);
        let g = Gate { shape, init: want, per, on, stored: want, factor: 1.0, profile: false };
        assert!(r.sublayers.iter().all(|s| s.gate == Some(g)), "L = {l}: λ₀ = {want}");
    }
    // A gate shared by a layer must be the same in both its sublayers.
    let e = err("[recipe]\npreset = \"rezero\"\n[[recipe.layers]]\nrange = \"2\"\nsublayers = \"ffn\"\n\
        gate = { shape = \"scalar\", init = 1, per = \"layer\" }\n");
    assert!(e.contains("layer 2") && e.contains("same gate"), "{e}");
}

/// Admin and nGPT, by hand from admin-torch's `calculate_init` and NVIDIA's nGPT `model.py`.
#[test]
fn residual_update_recipes_by_hand() {
    use super::GateOn;
    // Admin: post-LN, ω on the skip; N = 2L: ω₀ = √(13/ln 13 − 1) = 2.017009… at L = 6,
    // √(25/ln 25 − 1) = 2.601286… at L = 12 (computed by hand in Python).
    for (l, want) in [(6, 2.017009218686578), (12, 2.6012855825524324)] {
        let r = resolve("admin", l);
        all_sublayers(&r, None, None, ln(), 1.0, 1.0);
        for s in &r.sublayers {
            let g = s.gate.unwrap();
            assert_eq!((g.on, g.shape, g.factor), (GateOn::Skip, GateShape::Channel, 1.0));
            assert!((g.init - want).abs() < 1e-12, "L = {l}: ω₀ = {} vs {want}", g.init);
        }
    }
    // nGPT at d = 128: unit-L2 output and outer norms, α used at 0.05, stored from 1/√128,
    // so each stored step moves α 0.05·√128 = 0.5657 times as far.
    let r = resolve("ngpt", 4);
    all_sublayers(&r, None, Some(NormKind::L2), Some(NormKind::L2), 1.0, 1.0);
    for s in &r.sublayers {
        let g = s.gate.unwrap();
        assert_eq!((g.on, g.init), (GateOn::Interpolate, 0.05));
        assert!((g.stored - 0.08838834764831843).abs() < 1e-15 && (g.factor - 0.5656854249492381).abs() < 1e-12);
    }
    let h = r.residual.hypersphere().unwrap();
    assert!((h.sqk.stored - 0.08838834764831843).abs() < 1e-15 && (h.sqk.init() - 1.0).abs() < 1e-12);
    assert_eq!((r.embedding.norm.clone(), r.logits.norm.clone()), (None, None));
    // nGPT normalises q and k itself: QK-norm alongside it is refused.
    let e = err("[recipe]\npreset = \"ngpt\"\n[recipe.attention]\nqk_norm = \"head\"\n");
    assert!(e.contains("remove `attention.qk_norm`"), "{e}");
    // An interpolating gate is the step a = 1 − |g|, c = |g|: a skip scale beside it is refused.
    let e = err("[recipe]\npreset = \"ngpt\"\n[recipe.sublayer]\nskip = 2\n");
    assert!(e.contains("interpolating gate"), "{e}");
}

#[test]
fn admin_profile_starts_its_gates_at_one_for_the_pass() {
    let r = resolve("admin-profile", 6);
    for s in &r.sublayers {
        let g = s.gate.unwrap();
        assert!(g.profile && g.init == 1.0 && g.on == super::GateOn::Skip);
    }
    // The pass sets skip gates only.
    let e = err(
        "[recipe]\npreset = \"layerscale\"\n[recipe.sublayer]\ngate = { shape = \"channel\", init = 0.1, profile = true }\n",
    );
    assert!(e.contains("`profile` sets Admin's ω, one per sublayer on its skip"), "{e}");
    let e = err(
        "[recipe]\npreset = \"admin-profile\"\n[recipe.sublayer]\ngate = { shape = \"channel\", init = 1, on = \"skip\", per = \"layer\", profile = true }\n",
    );
    assert!(e.contains("one per sublayer"), "{e}");
}

#[test]
fn deepscalelm_by_hand() {
    // L = 4: β² = 1/4, λ² = 3/4 on every sublayer; pre-LN with a final LN; r₀ the authors' 0.221.
    let r = resolve("deepscalelm", 4);
    all_sublayers(&r, ln(), None, None, 0.75f64.sqrt(), 0.5);
    assert_eq!(r.init.moment_control().map(|m| m.r0), Some(0.221));
    // Its initialisation replaces init scales, needs pre-norm sublayers and a correlation.
    let e = err("[recipe]\npreset = \"deepscalelm\"\n[recipe.sublayer]\ninit_out = 0.5\n");
    assert!(e.contains("init_in/init_out"), "{e}");
    let e = err("[recipe]\npreset = \"deepscalelm\"\n[recipe.sublayer]\ninput = \"none\"\n");
    assert!(e.contains("input norm on every sublayer"), "{e}");
    let e = err("[recipe]\npreset = \"deepscalelm\"\n[recipe.init]\nr0 = 0\n");
    assert!(e.contains("`init.r0` = 0 must lie in (0, 1]"), "{e}");
    let e = err("[recipe]\npreset = \"ngpt\"\ninit = { kind = \"moment-control\" }\n");
    assert!(e.contains("residual kind `hypersphere`") && e.contains("use one or the other"), "{e}");
}

#[test]
fn hybridnorm_places_its_norms_as_its_configuration_does() {
    let rms = || Some(NormKind::RmsNorm { gain: true, eps: EPS });
    // HybridNorm: no norm before attention, the attention sum normalised (which the FFN both
    // reads and adds to), q, k, v normalised per head; final RMSNorm.
    let r = resolve("hybridnorm", 4);
    for s in &r.sublayers {
        let (outer, input) = if s.branch == Branch::Attn { (rms(), None) } else { (None, None) };
        assert_eq!((&s.input, &s.output, &s.outer), (&input, &None, &outer), "sublayer {}", s.index);
    }
    // The authors' code normalises q, k and v per head (one d_head gain shared by the heads).
    assert_eq!((r.attention.qk_norm, r.attention.v_norm, r.logits.norm.clone()), (QkNorm::Head, QkNorm::Head, rms()));
    // HybridNorm*: the first block pre-norm in both sublayers, the rest as HybridNorm.
    let r = resolve("hybridnorm-star", 4);
    assert_eq!((&r.sublayers[0].input, &r.sublayers[0].outer), (&rms(), &None));
    assert_eq!((&r.sublayers[1].input, &r.sublayers[1].outer), (&rms(), &None));
    assert_eq!((&r.sublayers[2].input, &r.sublayers[2].outer), (&None, &rms()));
    assert_eq!((&r.sublayers[3].input, &r.sublayers[3].outer), (&None, &None));
}

#[test]
fn logit_controls_and_new_norm_kinds_by_hand() {
    let r = resolve("softcap", 4);
    assert_eq!((r.attention.softcap, r.logits.softcap), (Some(50.0), Some(30.0)), "Gemma 2's caps");
    assert_eq!(resolve("qk-l2", 4).attention.qk_norm, QkNorm::L2);
    assert_eq!(resolve("qk-clip", 4).attention.qk_clip, Some(super::QkClip { tau: 100.0, alpha: 0.5 }), "Kimi K2");
    assert!(err("[recipe]\npreset = \"qk-clip\"\nattention = { qk_norm = \"head\" }\n").contains("undoes"));
    let e = err("[recipe]\npreset = \"softcap\"\nattention = { softcap = -1.0 }\n");
    assert!(e.contains("`attention.softcap` = -1 must be a positive"), "{e}");
    // A value norm is RMSNorm per head or over the full width: the L2 forms are no value of its type.
    let e = err("[recipe]\npreset = \"hybridnorm\"\nattention = { v_norm = \"l2\" }\n");
    assert!(e.contains("`attention.v_norm`") && e.contains("unknown variant `l2`"), "{e}");
    let x0 = resolve("x0-mix", 4);
    assert_eq!(x0.residual.x0_mix(), Some(super::X0Mix { residual: 1.0, x0: 0.0 }), "nanochat's λ_r₀ = 1, λ₀₀ = 0");
    let weightless = Some(NormKind::RmsNorm { gain: false, eps: EPS });
    all_sublayers(&x0, weightless.clone(), None, None, 1.0, 1.0);
    assert_eq!((x0.embedding.norm.clone(), x0.logits.norm.clone()), (weightless.clone(), weightless));
    let p = resolve("pre-1p", 4);
    all_sublayers(&p, Some(NormKind::LayerNorm1p { shift: true, eps: EPS }), None, None, 1.0, 1.0);
    let d = resolve("derf", 4);
    all_sublayers(&d, Some(NormKind::Derf { alpha: 1.0, offset: 0.0 }), None, None, 1.0, 1.0);
    assert!(close(d.embedding.scale.unwrap(), 128f64.sqrt()), "the Derf patch's shared_scale √d");
    assert!(err("[recipe]\nsublayer = { input = { kind = \"derf\", lambda = 1.0 } }\n").contains("no option `lambda`"));
    // Sandwich-LN (CogView, Gemma 2) is peri's sublayers and final norm without its embedding norm.
    let (s, p) = (resolve("sandwich", 4), resolve("peri", 4));
    assert_eq!((s.sublayers, s.embedding.norm, s.logits.norm), (p.sublayers, None, p.logits.norm));
}

/// Block AttnRes groups the 2L sublayers into N blocks of ⌈2L/N⌉: 24 sublayers in 8 blocks of
/// 3, in 5 blocks of 5 (the last of 4); more blocks than sublayers is the full form; no
/// `blocks` is the full form.
#[test]
fn attention_residual_blocks_cover_the_sublayers() {
    assert_eq!(resolve("attnres", 12).residual.attn_res(), Some(AttnRes { block: 1 }));
    assert_eq!(resolve("attnres-block", 12).residual.attn_res(), Some(AttnRes { block: 3 }));
    let with = |n: usize| from_toml(&format!("[recipe]\npreset = \"attnres\"\nattn_res = {{ blocks = {n} }}")).unwrap();
    assert_eq!(with(5).residual.attn_res(), Some(AttnRes { block: 5 }));
    assert_eq!(with(100).residual.attn_res(), Some(AttnRes { block: 1 }));
    assert_eq!(with(1).residual.attn_res(), Some(AttnRes { block: 24 }));
    assert!(err("[recipe]\npreset = \"attnres\"\nattn_res = { blocks = 0 }").contains("at least one block"));
}

/// Attention Residuals replace the residual sum: a second residual state, an outer norm or a
/// single-stream option is refused with the field named.
#[test]
fn attention_residuals_refuse_what_they_replace() {
    // One residual kind at a time: a second one replaces the first.
    let mhc = from_toml("[recipe]\npreset = \"attnres\"\nresidual = { kind = \"mhc\" }").unwrap();
    assert_eq!((mhc.residual.attn_res(), mhc.residual.streams().map(|s| s.n)), (None, Some(4)));
    let outer = err("[recipe]\npreset = \"attnres\"\n[recipe.placement]\nsublayer = { outer = \"ln\" }");
    assert!(outer.contains("residual kind `attn-res` replaces the residual sum"), "{outer}");
    let x0 = err("[recipe]\npreset = \"attnres\"\nresidual = { x0_mix = { residual = 1.0, x0 = 0.0 } }");
    assert!(x0.contains("unknown field `x0_mix` for residual kind `attn-res`") && x0.contains("kind `sum`"), "{x0}");
}

/// CompleteP at α = 1: every branch × L_base/L (2/12 for the 12-layer model here, 1 at the
/// base depth, 2 when shallower than it), nothing else of pre-rms changed; the options that
/// set their own scales are refused.
#[test]
fn completep_scales_every_branch_by_base_over_depth() {
    let (c, pre) = (resolve("completep", 12), resolve("pre-rms", 12));
    for (a, b) in c.sublayers.iter().zip(&pre.sublayers) {
        assert!(close(a.residual, 2.0 / 12.0), "sublayer {}: c = {}", a.index, a.residual);
        assert_eq!(SublayerPlan { residual: b.residual, ..a.clone() }, *b, "only c differs from pre-rms");
    }
    assert_eq!(c.init.completep().map(|p| (p.base_layers, p.multiplier)), Some((2, 6.0)));
    assert!(resolve("completep", 2).sublayers.iter().all(|s| s.residual == 1.0), "m = 1 at the base depth");
    assert!(resolve("completep", 1).sublayers.iter().all(|s| s.residual == 2.0));
    let zero = err("[recipe]\npreset = \"completep\"\ninit = { base_layers = 0 }");
    assert!(zero.contains("`init.base_layers` must be ≥ 1"), "{zero}");
    let streams = err("[recipe]\npreset = \"completep\"\nresidual = { kind = \"mhc\" }");
    assert!(streams.contains("init kind `completep` acts on a single residual stream"), "{streams}");
    let sphere = err("[recipe]\npreset = \"ngpt\"\ninit = { kind = \"completep\", base_layers = 2 }");
    assert!(sphere.contains("use one or the other"), "{sphere}");
    // Moment control and CompleteP are two kinds of one section: writing one replaces the other.
    let mc = from_toml("[recipe]\npreset = \"completep\"\ninit = { kind = \"moment-control\" }").unwrap();
    assert_eq!((mc.init.completep(), mc.init.moment_control().map(|m| m.r0)), (None, Some(0.221)));
    assert!(mc.sublayers.iter().all(|s| s.residual == 1.0), "no CompleteP scaling left");
}

/// GPAS acts after the residual addition: an outer norm there, or a residual state other than
/// one stream, is refused with the field named.
#[test]
fn gpas_refuses_an_outer_norm_and_other_residual_states() {
    assert!(resolve("gpas", 4).residual.gpas() && !resolve("pre-rms", 4).residual.gpas());
    let post = err("[recipe]\npreset = \"post\"\nresidual = { gpas = true }");
    assert!(post.contains("`residual.gpas` scales the sum after the residual addition"), "{post}");
    let hc = err("[recipe]\npreset = \"hc\"\nresidual = { gpas = true }");
    assert!(
        hc.contains("unknown field `gpas` for residual kind `hc`: `gpas` is an option of residual kind `sum`"),
        "{hc}"
    );
}

/// TaperNorm tapers the sublayer input norms only, under one schedule: its defaults when the
/// recipe names no `taper`; an output or final slot, a `taper` with no slot to schedule and
/// fractions out of range are refused with the field named.
#[test]
fn tapernorm_resolves_its_schedule_and_refuses_other_slots() {
    let t = resolve("tapernorm", 4);
    assert!(t.sublayers.iter().all(|s| matches!(s.input, Some(NormKind::TaperNorm { .. }))));
    assert!(matches!(t.logits.norm, Some(NormKind::RmsNorm { .. })), "the final norm stays");
    assert_eq!(t.taper, Some(crate::recipe::Taper { start: None, end: 0.5, decay: 0.99 }));
    let custom = from_toml("[recipe]\npreset = \"pre-rms\"\n[recipe.sublayer]\ninput = \"tapernorm\"").unwrap();
    assert_eq!(custom.taper, t.taper, "a tapernorm slot without `taper` takes the defaults");
    let out = err("[recipe]\npreset = \"peri-rms\"\n[recipe.sublayer]\noutput = \"tapernorm\"");
    assert!(out.contains("`tapernorm` replaces a pre-norm"), "{out}");
    let last = err("[recipe]\npreset = \"tapernorm\"\nfinal_norm = \"tapernorm\"");
    assert!(last.contains("the final norm anchors the scale"), "{last}");
    let none = err("[recipe]\npreset = \"pre-rms\"\ntaper = { end = 0.4 }");
    assert!(none.contains("the recipe has none"), "{none}");
    let late = err("[recipe]\npreset = \"tapernorm\"\ntaper = { start = 0.6, end = 0.5 }");
    assert!(late.contains("`taper.start` = 0.6 must lie in [0, taper.end)"), "{late}");
    let hc = err("[recipe]\npreset = \"hc\"\n[recipe.sublayer]\ninput = \"tapernorm\"");
    assert!(hc.contains("single residual stream"), "{hc}");
    // The printed equations state the schedule, the defaults' too.
    let o: RecipeOverlay = toml::from_str("preset = \"pre-rms\"\n[sublayer]\ninput = \"tapernorm\"").unwrap();
    let lines = equation::describe(&RecipeConfig::Custom(Box::new(o)).spec().unwrap()).join("\n");
    assert!(lines.contains("until the end of the LR warm-up") && lines.contains("to 0 at 0.5 of the run"), "{lines}");
}

/// Every preset written as a `[recipe]` table from scratch (no `preset`) and read back is the
/// preset itself: the sectioned form holds all of a recipe.
#[test]
fn every_preset_reads_back_from_its_table() {
    for name in PRESET_NAMES {
        let spec = preset(name).unwrap();
        let toml::Value::Table(t) = toml::Value::try_from(&spec).unwrap() else { panic!("{name}: not a table") };
        let read = RecipeOverlay::try_from(t.clone()).unwrap_or_else(|e| panic!("{name}: {e}\n{t}"));
        assert_eq!(RecipeConfig::Custom(Box::new(read)).spec().unwrap(), spec, "{name}");
        assert!(t.len() <= 8, "{name}: {} top-level fields", t.len());
    }
}

/// A config in the single-table form reads as the same recipe as its sectioned form, for a
/// change in every section (written by hand in both forms).
#[test]
fn the_single_table_form_reads_as_the_sectioned_one() {
    let pairs = [
        (
            "preset = \"peri\"\nnorm = \"rmsnorm\"\nembedding_norm = \"none\"\n[sublayer]\noutput = { kind = \"ln\", gain = false }",
            "preset = \"peri\"\n[placement]\nnorm = \"rmsnorm\"\nsublayer = { output = { kind = \"ln\", gain = false } }\n[embedding]\nnorm = \"none\"",
        ),
        (
            "preset = \"pre-rms\"\nqk_norm = \"head\"\nattn_softcap = 50.0\nfinal_softcap = 30.0",
            "preset = \"pre-rms\"\nattention = { qk_norm = \"head\", softcap = 50.0 }\nlogits = { softcap = 30.0 }",
        ),
        (
            "preset = \"pre-rms\"\nstreams = { n = 2, mixing = \"hc\", dynamic = false }",
            "preset = \"pre-rms\"\nresidual = { kind = \"hc\", n = 2, dynamic = false }",
        ),
        ("preset = \"x0-mix\"\ngpas = true", "preset = \"x0-mix\"\nresidual = { gpas = true }"),
        (
            "preset = \"pre\"\ncompletep = { base_layers = 3 }",
            "preset = \"pre\"\ninit = { kind = \"completep\", base_layers = 3 }",
        ),
        ("preset = \"gpt2-pre\"\nregularizer = 1.0", "preset = \"gpt2-pre\"\nlogits = { regularizer = 1.0 }"),
    ];
    for (flat, sectioned) in pairs {
        let (a, b) = (RecipeOverlay::parse(flat).unwrap(), RecipeOverlay::parse(sectioned).unwrap());
        assert_eq!(a, b, "{flat}");
        let spec = RecipeConfig::Custom(Box::new(a)).spec().unwrap();
        assert!(spec.name.ends_with('*'), "a changed preset is renamed: {}", spec.name);
    }
    // x0 mixing and GPAS together on one stream: the sum kind holds both.
    let both = RecipeConfig::Custom(Box::new(RecipeOverlay::parse(pairs[3].1).unwrap())).spec().unwrap();
    assert_eq!(
        both.residual,
        ResidualSpec::Sum(SumSpec { x0_mix: Some(X0Mix { residual: 1.0, x0: 0.0 }), gpas: true })
    );
}

/// The residual kinds table and the spec's variants name the same kinds, and each row's
/// options are exactly the fields its variant writes.
#[test]
fn the_residual_kinds_table_is_the_variants() {
    use super::residual::KINDS;
    let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
    assert_eq!(names, ["sum", "hc", "mhc", "mhc-lite", "attn-res", "hypersphere"]);
    for k in KINDS {
        let spec: ResidualSpec = toml::from_str(&format!("kind = \"{}\"", k.name)).unwrap();
        assert_eq!(spec.kind(), k.name);
        // Every option of the row is a field of the variant: written alone, each is read.
        let full = match &spec {
            ResidualSpec::Sum(_) => "x0_mix = {}\ngpas = true".to_string(),
            ResidualSpec::Hc(_) => "n = 2\ndynamic = false".into(),
            ResidualSpec::Mhc(_) => "n = 2\nsinkhorn_iters = 3".into(),
            ResidualSpec::MhcLite(_) => "n = 2".into(),
            ResidualSpec::AttnRes(_) => "blocks = 2".into(),
            ResidualSpec::Hypersphere(_) => {
                "sqk = { init = 1, scale = 1 }\nsuv = { init = 1, scale = 1 }\nsz = { init = 1, scale = 1 }".into()
            }
        };
        let t: toml::Table = toml::from_str(&full).unwrap();
        assert_eq!(t.keys().map(String::as_str).collect::<Vec<_>>(), k.options, "{}", k.name);
        assert!(toml::from_str::<ResidualSpec>(&format!("kind = \"{}\"\n{full}", k.name)).is_ok(), "{}", k.name);
    }
}
