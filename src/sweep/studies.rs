//! The papers' experiments as named studies (`normlab studies`): each a sweep file under
//! `configs/studies/`, a CPU miniature and, where a GPU is needed, the paper-scale version
//! (`NAME-full.toml`), compiled in. KiteNorm Fig. 1's paper scale is `normlab compare --full`,
//! Fig. 4's `normlab scaling --full`, the Normalization chapter's build `normlab textnorm`.

use super::Sweep;
use anyhow::Context;
use std::path::Path;

/// One study: what it reproduces and the sweep files that run it.
#[derive(Clone, Copy, Debug)]
pub struct Study {
    pub name: &'static str,
    /// The seed and figure or section it reproduces.
    pub figure: &'static str,
    /// The paper's claim the study tests.
    pub claim: &'static str,
    /// The miniature's path and text.
    pub mini: (&'static str, &'static str),
    /// The paper-scale version's, where it has its own file.
    pub full: Option<(&'static str, &'static str)>,
    /// Wall time of the miniature measured on a 2-core machine (`normlab studies NAME`),
    /// minutes; `None` where it has not been timed.
    pub minutes: Option<f64>,
}

const MINUTES_KITENORM_FIG1: Option<f64> = Some(3.5);
const MINUTES_KITENORM_FIG3: Option<f64> = Some(0.5);
const MINUTES_KITENORM_FIG9: Option<f64> = Some(0.3);
const MINUTES_KITENORM_FIG2: Option<f64> = Some(2.2);
const MINUTES_KITENORM_E2: Option<f64> = Some(0.8);
const MINUTES_KITENORM_E5: Option<f64> = Some(1.1);
const MINUTES_KITENORM_E6: Option<f64> = Some(0.6);
const MINUTES_PERILN_4_4_1: Option<f64> = Some(0.6);
const MINUTES_PERILN_FIG7: Option<f64> = Some(0.4);
const MINUTES_BHYT_DYT_C1: Option<f64> = Some(0.8);
const MINUTES_BHYT_TABLE5: Option<f64> = Some(0.3);
const MINUTES_KITENORM_FIG5: Option<f64> = Some(2.9);
const MINUTES_KITENORM_FIG5_STRESS: Option<f64> = Some(1.9);
const MINUTES_KITENORM_E1: Option<f64> = Some(6.5);
const MINUTES_KITENORM_E3: Option<f64> = Some(1.0);
const MINUTES_BHYT_LLAMA: Option<f64> = Some(9.3);
const MINUTES_BHYT_LAMBDA: Option<f64> = Some(9.7);
const MINUTES_PERILN_SPIKES: Option<f64> = Some(1.2);
const MINUTES_RESIDUAL_GATES: Option<f64> = Some(4.2);
const MINUTES_HYBRIDNORM: Option<f64> = Some(1.1);
const MINUTES_LOGIT_CONTROLS: Option<f64> = Some(1.9);
const MINUTES_NORM_FUNCTIONS: Option<f64> = Some(1.5);
const MINUTES_NGPT: Option<f64> = Some(0.9);
const MINUTES_DEEPSCALELM: Option<f64> = Some(6.4);
const MINUTES_SEEDNORM: Option<f64> = Some(1.1);
const MINUTES_ATTENTION_SINKS: Option<f64> = Some(3.8);
const MINUTES_STREAMS: Option<f64> = Some(6.2);
const MINUTES_ATTNRES: Option<f64> = Some(3.0);
const MINUTES_COMPLETEP: Option<f64> = Some(3.5);
const MINUTES_OPTIMIZER_NORMS: Option<f64> = Some(2.9);
const MINUTES_MUON_LOGITS: Option<f64> = Some(0.5);
const MINUTES_PERILN_SFT: Option<f64> = Some(1.8);
const MINUTES_BHYT_SFT: Option<f64> = Some(5.3);
const MINUTES_MOE_NORMS: Option<f64> = Some(4.3);
const MINUTES_MOE_BALANCE: Option<f64> = Some(7.3);
const MINUTES_OLMOE_QK_NORM: Option<f64> = Some(3.0);

/// Every study, in the order `normlab studies` lists them.
pub const STUDIES: &[Study] = &[
    Study {
        name: "kitenorm-fig1",
        figure: "KiteNorm Fig. 1",
        claim: "KiteNorm and LayerNorm-Scaling are the most robust to high learning rates at 48 layers; post-norm, KEEL and mix-norm are sensitive; KiteNorm wins over three seeds",
        mini: ("configs/studies/kitenorm-fig1.toml", include_str!("../../configs/studies/kitenorm-fig1.toml")),
        full: None,
        minutes: MINUTES_KITENORM_FIG1,
    },
    Study {
        name: "kitenorm-fig3",
        figure: "KiteNorm Fig. 3",
        claim: "vanilla post-norm (c = 1) at lr 1e-2 fails as z's variance grows and tokens align in the last attention sublayer; a smaller residual scale c avoids it",
        mini: ("configs/studies/kitenorm-fig3.toml", include_str!("../../configs/studies/kitenorm-fig3.toml")),
        full: Some((
            "configs/studies/kitenorm-fig3-full.toml",
            include_str!("../../configs/studies/kitenorm-fig3-full.toml"),
        )),
        minutes: MINUTES_KITENORM_FIG3,
    },
    Study {
        name: "kitenorm-fig9",
        figure: "KiteNorm Fig. 9 (E.4)",
        claim: "peri-norm is prone to rank collapse: τ(z_l) after the residual addition tends to 1 in attention sublayers after the first layer",
        mini: ("configs/studies/kitenorm-fig9.toml", include_str!("../../configs/studies/kitenorm-fig9.toml")),
        full: Some((
            "configs/studies/kitenorm-fig9-full.toml",
            include_str!("../../configs/studies/kitenorm-fig9-full.toml"),
        )),
        minutes: MINUTES_KITENORM_FIG9,
    },
    Study {
        name: "kitenorm-fig2",
        figure: "KiteNorm Fig. 2",
        claim: "at 1B, KiteNorm trains to a lower loss at 2e-3 and stays stable at 5e-3, where GPT-2 pre-norm diverges (warm-up 572 steps, WSD)",
        mini: ("configs/studies/kitenorm-fig2.toml", include_str!("../../configs/studies/kitenorm-fig2.toml")),
        full: Some((
            "configs/studies/kitenorm-fig2-full.toml",
            include_str!("../../configs/studies/kitenorm-fig2-full.toml"),
        )),
        minutes: MINUTES_KITENORM_FIG2,
    },
    Study {
        name: "kitenorm-fig5",
        figure: "KiteNorm Fig. 5 (§4.3, A.5)",
        claim: "removing the inner norm (residually scaled post-norm) degrades loss and stability; vector LayerNorm in place of scalarised LayerNorm is weaker, most at depth",
        mini: ("configs/studies/kitenorm-fig5.toml", include_str!("../../configs/studies/kitenorm-fig5.toml")),
        full: Some((
            "configs/studies/kitenorm-fig5-full.toml",
            include_str!("../../configs/studies/kitenorm-fig5-full.toml"),
        )),
        minutes: MINUTES_KITENORM_FIG5,
    },
    Study {
        name: "kitenorm-fig5-stress",
        figure: "KiteNorm Fig. 5 (§4.3), 96-layer stress test",
        claim: "at 96 layers and a high learning rate KiteNorm diverges without the variance regulariser and stays stable with it",
        mini: (
            "configs/studies/kitenorm-fig5-stress.toml",
            include_str!("../../configs/studies/kitenorm-fig5-stress.toml"),
        ),
        full: Some((
            "configs/studies/kitenorm-fig5-stress-full.toml",
            include_str!("../../configs/studies/kitenorm-fig5-stress-full.toml"),
        )),
        minutes: MINUTES_KITENORM_FIG5_STRESS,
    },
    Study {
        name: "kitenorm-e1",
        figure: "KiteNorm E.1 (Fig. 6)",
        claim: "unscaled pre-norm is less robust to high learning rates than GPT-2 pre-norm, and GPT-2's scale applied at run time is worse at depth",
        mini: ("configs/studies/kitenorm-e1.toml", include_str!("../../configs/studies/kitenorm-e1.toml")),
        full: Some((
            "configs/studies/kitenorm-e1-full.toml",
            include_str!("../../configs/studies/kitenorm-e1-full.toml"),
        )),
        minutes: MINUTES_KITENORM_E1,
    },
    Study {
        name: "kitenorm-e2",
        figure: "KiteNorm E.2",
        claim: "KEEL with a GLU beats KEEL with an MLP of the same parameter count",
        mini: ("configs/studies/kitenorm-e2.toml", include_str!("../../configs/studies/kitenorm-e2.toml")),
        full: Some((
            "configs/studies/kitenorm-e2-full.toml",
            include_str!("../../configs/studies/kitenorm-e2-full.toml"),
        )),
        minutes: MINUTES_KITENORM_E2,
    },
    Study {
        name: "kitenorm-e3",
        figure: "KiteNorm E.3 (Fig. 8)",
        claim: "GPT-2 style scaling of mix-norm's pre-norm suffix (1/√(2 L_pre) at init) clearly improves on vanilla mix-norm",
        mini: ("configs/studies/kitenorm-e3.toml", include_str!("../../configs/studies/kitenorm-e3.toml")),
        full: Some((
            "configs/studies/kitenorm-e3-full.toml",
            include_str!("../../configs/studies/kitenorm-e3-full.toml"),
        )),
        minutes: MINUTES_KITENORM_E3,
    },
    Study {
        name: "kitenorm-e5",
        figure: "KiteNorm E.5",
        claim: "LayerNorm-Scaling's lead over GPT-2 pre-norm vanishes at 96 layers",
        mini: ("configs/studies/kitenorm-e5.toml", include_str!("../../configs/studies/kitenorm-e5.toml")),
        full: Some((
            "configs/studies/kitenorm-e5-full.toml",
            include_str!("../../configs/studies/kitenorm-e5-full.toml"),
        )),
        minutes: MINUTES_KITENORM_E5,
    },
    Study {
        name: "kitenorm-e6",
        figure: "KiteNorm E.6",
        claim: "the ReLU variance regulariser does not improve GPT-2 pre-norm (it destabilises it)",
        mini: ("configs/studies/kitenorm-e6.toml", include_str!("../../configs/studies/kitenorm-e6.toml")),
        full: Some((
            "configs/studies/kitenorm-e6-full.toml",
            include_str!("../../configs/studies/kitenorm-e6-full.toml"),
        )),
        minutes: MINUTES_KITENORM_E6,
    },
    Study {
        name: "periln-4.4.1",
        figure: "the Peri-LN paper's §4.4.1",
        claim: "freezing Peri-LN's output-norm gain at 1 (without the embedding LN) costs little or nothing",
        mini: ("configs/studies/periln-4.4.1.toml", include_str!("../../configs/studies/periln-4.4.1.toml")),
        full: Some((
            "configs/studies/periln-4.4.1-full.toml",
            include_str!("../../configs/studies/periln-4.4.1-full.toml"),
        )),
        minutes: MINUTES_PERILN_4_4_1,
    },
    Study {
        name: "periln-fig7",
        figure: "the Peri-LN paper's Fig. 7",
        claim: "Peri-LN keeps a larger angular distance between consecutive layers than Pre-LN, and its output-norm scales grow with depth",
        mini: ("configs/studies/periln-fig7.toml", include_str!("../../configs/studies/periln-fig7.toml")),
        full: Some((
            "configs/studies/periln-fig7-full.toml",
            include_str!("../../configs/studies/periln-fig7-full.toml"),
        )),
        minutes: MINUTES_PERILN_FIG7,
    },
    Study {
        name: "periln-spikes",
        figure: "the Peri-LN paper's Fig. 3 and C.3",
        claim: "Pre-LN shows gradient-norm spikes at every learning rate; Peri-LN rarely does",
        mini: ("configs/studies/periln-spikes.toml", include_str!("../../configs/studies/periln-spikes.toml")),
        full: Some((
            "configs/studies/periln-spikes-full.toml",
            include_str!("../../configs/studies/periln-spikes-full.toml"),
        )),
        minutes: MINUTES_PERILN_SPIKES,
    },
    Study {
        name: "bhyt-dyt-c1",
        figure: "the BHyT paper's C.1 (DyT baseline)",
        claim: "DyT with the authors' α per model size trains, but below RMSNorm and BHyT",
        mini: ("configs/studies/bhyt-dyt-c1.toml", include_str!("../../configs/studies/bhyt-dyt-c1.toml")),
        full: Some((
            "configs/studies/bhyt-dyt-c1-full.toml",
            include_str!("../../configs/studies/bhyt-dyt-c1-full.toml"),
        )),
        minutes: MINUTES_BHYT_DYT_C1,
    },
    Study {
        name: "bhyt-table5",
        figure: "the BHyT paper's Table 5",
        claim: "approximating the FFN input's variance (RMSNorm-Approx, BHyT) speeds training with negligible loss against exact statistics (RMSNorm, BHyT*)",
        mini: ("configs/studies/bhyt-table5.toml", include_str!("../../configs/studies/bhyt-table5.toml")),
        full: Some((
            "configs/studies/bhyt-table5-full.toml",
            include_str!("../../configs/studies/bhyt-table5-full.toml"),
        )),
        minutes: MINUTES_BHYT_TABLE5,
    },
    Study {
        name: "bhyt-llama",
        figure: "the BHyT paper's §4.1 and C.3 (Llama-3.2-1B, Table 1)",
        claim: "with each method at its own tuned settings (C.3), BHyT reaches a lower loss than RMSNorm, Peri-LN, LNS and DyT",
        mini: ("configs/studies/bhyt-llama.toml", include_str!("../../configs/studies/bhyt-llama.toml")),
        full: Some((
            "configs/studies/bhyt-llama-full.toml",
            include_str!("../../configs/studies/bhyt-llama-full.toml"),
        )),
        minutes: MINUTES_BHYT_LLAMA,
    },
    Study {
        name: "bhyt-lambda",
        figure: "the BHyT paper's C.1 (λ₀ sweep)",
        claim: "BHyT's initial λ before attention is best at 2.0 of {1, …, 5} (C.3's choice)",
        mini: ("configs/studies/bhyt-lambda.toml", include_str!("../../configs/studies/bhyt-lambda.toml")),
        full: Some((
            "configs/studies/bhyt-lambda-full.toml",
            include_str!("../../configs/studies/bhyt-lambda-full.toml"),
        )),
        minutes: MINUTES_BHYT_LAMBDA,
    },
    Study {
        name: "residual-gates",
        figure: "ReZero (Bachlechner et al. 2020), SkipInit (De & Smith 2020), LayerScale (CaiT), Admin (Liu et al. 2020)",
        claim: "learnable residual gates train deep stacks (no norm at all for ReZero and SkipInit; Admin's ω on post-norm's skip) where post-norm fails",
        mini: ("configs/studies/residual-gates.toml", include_str!("../../configs/studies/residual-gates.toml")),
        full: Some((
            "configs/studies/residual-gates-full.toml",
            include_str!("../../configs/studies/residual-gates-full.toml"),
        )),
        minutes: MINUTES_RESIDUAL_GATES,
    },
    Study {
        name: "moe-norms",
        figure: "the normalization overview's open question on mixture-of-experts layers",
        claim: "which placement (post, pre, Peri-LN), and whether a norm on each expert's output, trains a MoE model best, and what each costs in load balance",
        mini: ("configs/studies/moe-norms.toml", include_str!("../../configs/studies/moe-norms.toml")),
        full: Some(("configs/studies/moe-norms-full.toml", include_str!("../../configs/studies/moe-norms-full.toml"))),
        minutes: MINUTES_MOE_NORMS,
    },
    Study {
        name: "moe-balance",
        figure: "Switch Transformer, transformers' load_balancing_loss_func, DeepSeek V3's auxiliary-loss-free balancing",
        claim: "which balancing (none, the per-layer or the pooled auxiliary loss, the auxiliary-loss-free bias) keeps every expert in use at the least cost in loss, under pre-norm and Peri-LN",
        mini: ("configs/studies/moe-balance.toml", include_str!("../../configs/studies/moe-balance.toml")),
        full: Some((
            "configs/studies/moe-balance-full.toml",
            include_str!("../../configs/studies/moe-balance-full.toml"),
        )),
        minutes: MINUTES_MOE_BALANCE,
    },
    Study {
        name: "olmoe-qk-norm",
        figure: "OLMoE (Muennighoff et al. 2024), its QK-Norm and router z-loss ablations",
        claim: "QK-norm keeps a mixture of experts stable at rates where it spikes without, and the router z-loss adds to it",
        mini: ("configs/studies/olmoe-qk-norm.toml", include_str!("../../configs/studies/olmoe-qk-norm.toml")),
        full: Some((
            "configs/studies/olmoe-qk-norm-full.toml",
            include_str!("../../configs/studies/olmoe-qk-norm-full.toml"),
        )),
        minutes: MINUTES_OLMOE_QK_NORM,
    },
    Study {
        name: "hybridnorm",
        figure: "HybridNorm (Zhuo et al. 2025)",
        claim: "HybridNorm reaches a lower loss than pre-norm and post-norm; HybridNorm* (first block pre-norm) lower still",
        mini: ("configs/studies/hybridnorm.toml", include_str!("../../configs/studies/hybridnorm.toml")),
        full: Some((
            "configs/studies/hybridnorm-full.toml",
            include_str!("../../configs/studies/hybridnorm-full.toml"),
        )),
        minutes: MINUTES_HYBRIDNORM,
    },
    Study {
        name: "logit-controls",
        figure: "Gemma 2 soft-capping, Megatron-LM QK L2-norm, Kimi K2 QK-clip, OLMo 2 QK-norm",
        claim: "each control keeps the largest attention logit bounded at learning rates where pre-norm's grows, without a worse loss",
        mini: ("configs/studies/logit-controls.toml", include_str!("../../configs/studies/logit-controls.toml")),
        full: Some((
            "configs/studies/logit-controls-full.toml",
            include_str!("../../configs/studies/logit-controls-full.toml"),
        )),
        minutes: MINUTES_LOGIT_CONTROLS,
    },
    Study {
        name: "attention-sinks",
        figure: "Gated attention (Qiu et al., NeurIPS 2025), gpt-oss attention sinks",
        claim: "a sigmoid gate after attention removes the attention sink (first-token attention) and the massive activations, and trains at least as well at high learning rates",
        mini: ("configs/studies/attention-sinks.toml", include_str!("../../configs/studies/attention-sinks.toml")),
        full: Some((
            "configs/studies/attention-sinks-full.toml",
            include_str!("../../configs/studies/attention-sinks-full.toml"),
        )),
        minutes: MINUTES_ATTENTION_SINKS,
    },
    Study {
        name: "streams",
        figure: "Hyper-Connections (Zhu et al., ICLR 2025), mHC (DeepSeek, 2025), mHC-lite (Yang & Gao, 2026)",
        claim: "unconstrained HC's composite residual mixing drifts from the identity with depth while mHC's and mHC-lite's stays at gain 1, and the streams train at least as well as pre-norm",
        mini: ("configs/studies/streams.toml", include_str!("../../configs/studies/streams.toml")),
        full: Some(("configs/studies/streams-full.toml", include_str!("../../configs/studies/streams-full.toml"))),
        minutes: MINUTES_STREAMS,
    },
    Study {
        name: "attnres",
        figure: "Attention Residuals (Kimi Team, 2026): Block AttnRes against a baseline with 1.25x the compute",
        claim: "Full and Block AttnRes reach a lower loss than pre-norm at equal compute, and Block AttnRes matches pre-norm trained 1.25 times as long",
        mini: ("configs/studies/attnres.toml", include_str!("../../configs/studies/attnres.toml")),
        full: Some(("configs/studies/attnres-full.toml", include_str!("../../configs/studies/attnres-full.toml"))),
        minutes: MINUTES_ATTNRES,
    },
    Study {
        name: "completep",
        figure: "CompleteP (Dey et al., NeurIPS 2025), Fig. 1 left: learning-rate transfer across depth",
        claim: "under CompleteP (α = 1) the best learning rate stays the same as depth grows, under standard parametrisation it moves",
        mini: ("configs/studies/completep.toml", include_str!("../../configs/studies/completep.toml")),
        full: Some(("configs/studies/completep-full.toml", include_str!("../../configs/studies/completep-full.toml"))),
        minutes: MINUTES_COMPLETEP,
    },
    Study {
        name: "norm-functions",
        figure: "Derf (Stronger Normalization-Free Transformers), Megatron-LM LayerNorm-1p, nanochat x0 mixing",
        claim: "Derf reaches a lower loss than LayerNorm and DyT; LayerNorm-1p equals LayerNorm without weight decay on gains",
        mini: ("configs/studies/norm-functions.toml", include_str!("../../configs/studies/norm-functions.toml")),
        full: Some((
            "configs/studies/norm-functions-full.toml",
            include_str!("../../configs/studies/norm-functions-full.toml"),
        )),
        minutes: MINUTES_NORM_FUNCTIONS,
    },
    Study {
        name: "ngpt",
        figure: "nGPT (Loshchilov et al. 2024): the steps to reach a loss",
        claim: "nGPT reaches the pre-norm baseline's loss in fewer steps (4 to 20 times fewer in the paper)",
        mini: ("configs/studies/ngpt.toml", include_str!("../../configs/studies/ngpt.toml")),
        full: Some(("configs/studies/ngpt-full.toml", include_str!("../../configs/studies/ngpt-full.toml"))),
        minutes: MINUTES_NGPT,
    },
    Study {
        name: "deepscalelm",
        figure: "DeepScaleLM (Kedia et al. 2024): hidden-state variance by depth and the loss of a deep stack",
        claim: "DeepScaleLM keeps unit hidden-state variance through depth where pre-LN's grows, and its deep model \
            trains to a lower loss",
        mini: ("configs/studies/deepscalelm.toml", include_str!("../../configs/studies/deepscalelm.toml")),
        full: Some((
            "configs/studies/deepscalelm-full.toml",
            include_str!("../../configs/studies/deepscalelm-full.toml"),
        )),
        minutes: MINUTES_DEEPSCALELM,
    },
    Study {
        name: "seednorm",
        figure: "SeeDNorm (Cai et al. 2025)",
        claim: "SeeDNorm reaches a lower loss than the RMSNorm it replaces",
        mini: ("configs/studies/seednorm.toml", include_str!("../../configs/studies/seednorm.toml")),
        full: Some(("configs/studies/seednorm-full.toml", include_str!("../../configs/studies/seednorm-full.toml"))),
        minutes: MINUTES_SEEDNORM,
    },
    Study {
        name: "optimizer-norms",
        figure: "Does your optimizer care how you normalize? (2026); Muon (Jordan et al. 2024, Moonlight)",
        claim: "the norms' ranking changes under Muon: Derf's gap to RMSNorm grows (a smaller α₀ narrows it) while DyT is unaffected, without divergence",
        mini: ("configs/studies/optimizer-norms.toml", include_str!("../../configs/studies/optimizer-norms.toml")),
        full: Some((
            "configs/studies/optimizer-norms-full.toml",
            include_str!("../../configs/studies/optimizer-norms-full.toml"),
        )),
        minutes: MINUTES_OPTIMIZER_NORMS,
    },
    Study {
        name: "muon-logits",
        figure: "Kimi K2 (MuonClip): attention logits under Muon",
        claim: "under Muon the largest attention logit grows with the learning rate; QK-clip keeps it at τ without a worse loss",
        mini: ("configs/studies/muon-logits.toml", include_str!("../../configs/studies/muon-logits.toml")),
        full: Some((
            "configs/studies/muon-logits-full.toml",
            include_str!("../../configs/studies/muon-logits-full.toml"),
        )),
        minutes: MINUTES_MUON_LOGITS,
    },
    Study {
        name: "periln-sft",
        figure: "Peri-LN Table 2, SFT Avg. (App. B.2)",
        claim: "Peri-LN's lead over Pre- and Post-LN holds after supervised fine-tuning, with a smaller spread over seeds",
        mini: ("configs/studies/periln-sft.toml", include_str!("../../configs/studies/periln-sft.toml")),
        full: Some((
            "configs/studies/periln-sft-full.toml",
            include_str!("../../configs/studies/periln-sft-full.toml"),
        )),
        minutes: MINUTES_PERILN_SFT,
    },
    Study {
        name: "bhyt-sft",
        figure: "BHyT Tables 2 and 4 (LoRA SFT, App. C.2)",
        claim: "BHyT's pretraining stability transfers to LoRA fine-tuning: the lowest SFT train and eval loss of the five methods",
        mini: ("configs/studies/bhyt-sft.toml", include_str!("../../configs/studies/bhyt-sft.toml")),
        full: Some(("configs/studies/bhyt-sft-full.toml", include_str!("../../configs/studies/bhyt-sft-full.toml"))),
        minutes: MINUTES_BHYT_SFT,
    },
];

/// The built-in studies that are commands of their own: (figure, claim, miniature, paper scale).
pub const COMMANDS: &[(&str, &str, &str, &str)] = &[
    (
        "KiteNorm Fig. 1",
        "the Fig. 1 protocol at paper scale (48 layers, LR grid to 5e-4, three seeds, 12207 steps, bf16)",
        "normlab studies kitenorm-fig1",
        "normlab compare --full",
    ),
    (
        "KiteNorm Fig. 4 / A.4",
        "KiteNorm's lead over GPT-2 pre-norm holds across depth, budget, batch and width",
        "normlab scaling --axis depth",
        "normlab scaling --axis depth --full",
    ),
    (
        "the BHyT paper's §4.3, Table 3 / D.4 Table 8 and Table 5 (speed)",
        "BHyT is 7.7 % faster in the forward pass and ≈ 10 % in training than RMSNorm, 17.7 % faster than Peri-LN; it generates faster than every normalisation baseline; the variance approximation speeds training by 10.1 % (RMSNorm) and 14.9 % (BHyT*)",
        "normlab bench speed",
        "normlab bench speed --dims llama1b --device vulkan --precision bf16",
    ),
    (
        "the Normalization chapter build",
        "Peri-LN keeps the gradient-norm CV below 1.2 where Pre-LN and Post-LN do not (text normalisation)",
        "normlab textnorm",
        "normlab textnorm --full",
    ),
];

/// The study named `name`.
pub fn find(name: &str) -> anyhow::Result<&'static Study> {
    STUDIES.iter().find(|s| s.name == name).with_context(|| {
        let known: Vec<&str> = STUDIES.iter().map(|s| s.name).collect();
        format!("unknown study `{name}`; `normlab studies` lists them: {}", known.join(", "))
    })
}

impl Sweep {
    /// Study `name`'s sweep: the miniature, or with `full` the paper-scale file.
    pub fn study(name: &str, full: bool, sets: &[String]) -> anyhow::Result<Self> {
        let s = find(name)?;
        let (path, text) = if full {
            s.full.with_context(|| {
                format!("study {name} has no file of its own at paper scale: run normlab compare --full")
            })?
        } else {
            s.mini
        };
        Self::parse(text, Path::new(path), sets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_study_file_is_listed_and_parses() {
        let mut listed: Vec<&str> =
            STUDIES.iter().flat_map(|s| [Some(s.mini.0), s.full.map(|f| f.0)]).flatten().collect();
        listed.sort();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/studies");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| format!("configs/studies/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        files.sort();
        assert_eq!(listed, files, "every file in configs/studies is a listed study and the reverse");
        let tasks = papers_task_files();
        let chats = tasks.join("conversations.jsonl");
        let chat = "{\"conversations\": [\"q\", \"a\"]}\n".repeat(4);
        std::fs::write(&chats, chat).unwrap();
        let with_tasks =
            [format!("eval.dir = \"{}\"", tasks.display()), format!("sweep.finetune.data = \"{}\"", chats.display())];
        for s in STUDIES {
            Sweep::study(s.name, false, &[]).unwrap_or_else(|e| panic!("{}: {e:#}", s.name));
            let Some((_, text)) = s.full else { continue };
            if text.contains("[sweep.finetune]") {
                // LIMA is refused until it is there, naming how to fetch it.
                let Err(e) = Sweep::study(s.name, true, &[]) else { panic!("{}: LIMA is missing", s.name) };
                assert!(format!("{e:#}").contains("tools/get_lima.py"), "{}: {e:#}", s.name);
            } else if text.contains("-table") {
                // A paper's task set is refused until its files are there, naming where they come from.
                let Err(e) = Sweep::study(s.name, true, &[]) else { panic!("{}: its task files are missing", s.name) };
                let e = format!("{e:#}");
                assert!(e.contains("data/tasks/") && e.contains("tools/get_tasks.py"), "{}: {e}", s.name);
            }
            Sweep::study(s.name, true, &with_tasks).unwrap_or_else(|e| panic!("{} --full: {e:#}", s.name));
        }
        assert!(find("nonesuch").is_err());
    }

    /// A directory holding every file of the papers' task sets: the layouts' fixtures
    /// (`tests/fixtures/tasks`) under `TASK/SPLIT.parquet`.
    fn papers_task_files() -> std::path::PathBuf {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tasks");
        let dir = std::env::temp_dir().join(format!("normlab-study-tasks-{}", std::process::id()));
        for suite in crate::tasks::papers::SUITES {
            for t in suite.tasks {
                for (split, fixture) in [(t.split, t.task.to_string()), (t.fewshot_split, format!("{}_dev", t.task))] {
                    let to = crate::tasks::papers::file(&dir, t.task, split);
                    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                    let from = fixtures.join(format!("{fixture}.parquet"));
                    let from = if from.is_file() { from } else { fixtures.join(format!("{}.parquet", t.task)) };
                    std::fs::copy(from, to).unwrap();
                }
            }
        }
        dir
    }

    #[test]
    fn paper_scale_budgets_are_d1s() {
        // Fig. 3 at 12 layers: 1.8e9 tokens of 128 × 2048 = 6866 steps; Fig. 2: 7325 steps with
        // 572 warm-up steps (D.1).
        let s = Sweep::study("kitenorm-fig3", true, &[]).unwrap();
        let cfg = s.run_config(&s.grid()[0]).unwrap();
        let counts = crate::model::base::params::ParamCounts { all: 1, non_embedding: 1 };
        assert_eq!(cfg.total_steps(counts).unwrap(), 6866);
        let s = Sweep::study("kitenorm-fig2", true, &[]).unwrap();
        let cfg = s.run_config(&s.grid()[0]).unwrap();
        assert_eq!(cfg.total_steps(counts).unwrap(), 7325);
        assert_eq!(cfg.schedule.warmup_steps(7325), 572);
        let full = Sweep::compare(true, &[], &[]).unwrap();
        let cfg = full.run_config(&full.grid()[0]).unwrap();
        assert_eq!((cfg.model.n_layers, cfg.total_steps(counts).unwrap()), (48, 12207));
        let lrs = full.section.axes.get("optim.lr").unwrap();
        assert!(lrs.iter().any(|v| v.as_float() == Some(5e-4)), "the grid reaches post-norm's LR*");
    }
}
