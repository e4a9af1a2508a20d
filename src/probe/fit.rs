//! How well one series predicts another (BHyT's variance approximation against the exact
//! variance, the BHyT paper's Table 7 / D.3): RMSE, R² (1 − SS_res/SS_tot), Pearson r and Spearman ρ
//! (Pearson on ranks, ties averaged).

use crate::io::json::nan;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub n: usize,
    #[serde(deserialize_with = "nan")]
    pub rmse: f64,
    #[serde(deserialize_with = "nan")]
    pub r2: f64,
    #[serde(deserialize_with = "nan")]
    pub pearson: f64,
    #[serde(deserialize_with = "nan")]
    pub spearman: f64,
}

/// `approx` as a prediction of `exact`.
pub fn fit(approx: &[f64], exact: &[f64]) -> Fit {
    assert_eq!(approx.len(), exact.len());
    let n = exact.len();
    let mean = exact.iter().sum::<f64>() / n as f64;
    let ss_res: f64 = approx.iter().zip(exact).map(|(a, e)| (a - e).powi(2)).sum();
    let ss_tot: f64 = exact.iter().map(|e| (e - mean).powi(2)).sum();
    Fit {
        n,
        rmse: (ss_res / n as f64).sqrt(),
        r2: 1.0 - ss_res / ss_tot,
        pearson: pearson(approx, exact),
        spearman: pearson(&ranks(approx), &ranks(exact)),
    }
}

pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// 1-based ranks; tied values share the mean of their ranks.
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}
