//! The one table of feed-forward kinds: for each kind the name a config writes (`model.ffn`),
//! its formula, the label the report prints, whether it has the gate projection `W_3`, and its
//! default width. The model's parameter count, the built block, the report and the export read
//! the row; adding a kind is its row here, its [`FfnKind`] variant and its block's forward in
//! [`crate::model::ffn::dense`] (see docs/recipes.md, "Adding a feed-forward kind").

use serde::{Deserialize, Serialize};

/// A feed-forward kind, as `model.ffn` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnKind {
    /// `W_2 (SiLU(x W_1) ⊙ x W_3)` (Shazeer 2020; KiteNorm Table 1).
    #[default]
    Glu,
    /// `W_2 GELU(x W_1)`, hidden size `d_mlp` (4·d).
    Mlp,
}

/// One feed-forward kind.
pub struct FfnKindInfo {
    /// The name a config writes (`"glu"`).
    pub name: &'static str,
    /// Its formula, with its source.
    pub formula: &'static str,
    /// How the report's setup line names it.
    pub label: &'static str,
    /// The `[d, d_ff]` input projections it has: 2 (`W_1`, `W_3`) for a gated unit, else 1.
    pub inputs: usize,
    /// Its hidden width when the config gives none, for hidden size `d`.
    pub default_width: fn(usize) -> usize,
}

/// Every feed-forward kind, in [`FfnKind`]'s order.
pub const KINDS: &[FfnKindInfo] = &[
    FfnKindInfo {
        name: "glu",
        formula: "W_2 (SiLU(x W_1) ⊙ x W_3), width d_glu (default ⌈8d/3⌉ to a multiple of 16) (Shazeer 2020)",
        label: "SiLU-GLU",
        inputs: 2,
        default_width: |d| (8 * d).div_ceil(3).div_ceil(16) * 16,
    },
    FfnKindInfo {
        name: "mlp",
        formula: "W_2 GELU(x W_1), width d_mlp (default 4d) (GPT-2)",
        label: "GELU-MLP",
        inputs: 1,
        default_width: |d| 4 * d,
    },
];

impl FfnKind {
    /// This kind's row of [`KINDS`].
    pub fn info(self) -> &'static FfnKindInfo {
        &KINDS[self as usize]
    }

    /// Whether the block has the gate projection `W_3`.
    pub fn gated(self) -> bool {
        self.info().inputs == 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row is the kind whose serde name it carries, and the defaults by hand: d = 256 gives
    /// ⌈2048/3⌉ = 683 → 688 for the GLU, 1024 for the MLP.
    #[test]
    fn each_row_is_its_kind() {
        for kind in [FfnKind::Glu, FfnKind::Mlp] {
            let named: FfnKind = serde_json::from_value(serde_json::json!(kind.info().name)).unwrap();
            assert_eq!(named, kind);
        }
        assert_eq!(KINDS.len(), 2);
        assert_eq!(((FfnKind::Glu.info().default_width)(256), (FfnKind::Mlp.info().default_width)(256)), (688, 1024));
        assert!(FfnKind::Glu.gated() && !FfnKind::Mlp.gated());
    }
}
