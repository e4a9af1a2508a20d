//! The BHyT paper's speed claims as ratios, for `normlab bench speed` to put its measurements
//! beside. Each is "`faster`'s speed over `slower`'s" as the paper states or tabulates it.

use serde::{Deserialize, Serialize};

/// Which speed a claim compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Train,
    Forward,
    /// Generation with this many new tokens.
    Generate(usize),
}

/// One claim as the paper makes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Stated {
    pub source: String,
    pub faster: &'static str,
    pub slower: &'static str,
    pub metric: Metric,
    /// `faster`'s speed over `slower`'s in the paper.
    pub paper: f64,
}

/// D.4 Table 8 (Table 3 is its 128 column): generation tokens/s of Llama-1B with 512-token
/// inputs, at 128, 512 and 1024 new tokens; the recipe each row is here.
const TABLE8: &[(&str, [f64; 3])] = &[
    ("pre-rms", [50.5, 38.0, 30.1]),
    ("peri-rms", [46.6, 34.5, 27.0]),
    ("lns-rms", [50.6, 37.4, 29.5]),
    ("dyt", [55.6, 40.2, 32.3]),
];
const TABLE8_BHYT: [f64; 3] = [53.5, 39.4, 31.2];
const TABLE8_LENGTHS: [usize; 3] = [128, 512, 1024];

/// Every claim, in the order the report lists them.
pub fn stated() -> Vec<Stated> {
    let claim =
        |source: &str, faster, slower, metric, paper| Stated { source: source.into(), faster, slower, metric, paper };
    let mut c = vec![
        claim("§4.3: 7.7 % faster forward computation than RMSNorm", "bhyt", "pre-rms", Metric::Forward, 1.077),
        claim("§4.3: roughly a 10 % speedup during training", "bhyt", "pre-rms", Metric::Train, 1.10),
        claim("§4.3, Fig. 4: ≈ 17.7 % faster than Peri-LN", "bhyt", "peri-rms", Metric::Forward, 1.177),
        claim("Table 5: steps/s 0.381 vs 0.346", "rmsnorm-approx", "pre-rms", Metric::Train, 0.381 / 0.346),
        claim("Table 5: steps/s 0.385 vs 0.335", "bhyt", "bhyt-star", Metric::Train, 0.385 / 0.335),
    ];
    for (i, &n) in TABLE8_LENGTHS.iter().enumerate() {
        for (recipe, row) in TABLE8 {
            let source = format!("Table 8 ({n} new): {} vs {} tokens/s", TABLE8_BHYT[i], row[i]);
            c.push(claim(&source, "bhyt", recipe, Metric::Generate(n), TABLE8_BHYT[i] / row[i]));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_ratios_are_its_numbers() {
        let c = stated();
        // Table 3's percentages relative to BHyT: RMSNorm −5.6 %, Peri-LN −12.9 %, DyT +3.9 %.
        let at =
            |slower: &str| c.iter().find(|x| x.slower == slower && x.metric == Metric::Generate(128)).unwrap().paper;
        assert!((1.0 / at("pre-rms") - (1.0 - 0.056)).abs() < 0.001);
        assert!((1.0 / at("peri-rms") - (1.0 - 0.129)).abs() < 0.001);
        assert!((1.0 / at("dyt") - (1.0 + 0.039)).abs() < 0.001);
        // Table 5's text: approximation speeds RMSNorm by ≈ 10.1 % and BHyT* by ≈ 14.9 %.
        let t5: Vec<f64> = c.iter().filter(|x| x.source.starts_with("Table 5")).map(|x| x.paper).collect();
        assert!((t5[0] - 1.101).abs() < 0.001 && (t5[1] - 1.149).abs() < 0.001, "{t5:?}");
        assert_eq!(c.len(), 5 + 3 * 4);
    }
}
