//! Summary statistics of plain `f64` series, shared by the probes, the sweep aggregation and
//! the benchmark, and Welch's test of whether two series' means differ beyond their noise.

/// Arithmetic mean; NaN for an empty series.
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Arithmetic mean of an iterator's values; `None` when it has none.
pub fn mean_of(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.into_iter().collect();
    (!v.is_empty()).then(|| mean(&v))
}

/// Population mean and standard deviation (divisor n, as the papers' "mean ± std" over seeds).
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    let m = mean(xs);
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
    (m, v.sqrt())
}

/// Coefficient of variation `std/mean` (population std, as [`mean_std`]); 0 for an empty
/// series or one whose mean is not positive (an expert load of all zeros).
pub fn coefficient_of_variation(xs: &[f64]) -> f64 {
    let (m, sd) = mean_std(xs);
    if m > 0.0 { sd / m } else { 0.0 }
}

/// Sample standard deviation (divisor n − 1, Bessel's correction); NaN for fewer than two
/// values.
pub fn sample_std(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// Median (mean of the two middle values for an even count); NaN for an empty series.
pub fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Smallest and largest value; `(∞, −∞)` for an empty series.
pub fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)))
}

/// Welch's unequal-variance t-test of two samples' means: the difference `mean(a) − mean(b)`,
/// `t = diff / √(s_a²/n_a + s_b²/n_b)`, the Welch–Satterthwaite degrees of freedom and the
/// two-sided p-value from Student's t.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welch {
    pub diff: f64,
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

/// Welch's test of `a` against `b`; `None` unless each has two values or more. Two samples
/// without any spread are told apart exactly (p = 0 when their means differ, 1 when not).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let diff = mean(a) - mean(b);
    let (va, vb) = (sample_std(a).powi(2) / na, sample_std(b).powi(2) / nb);
    let se2 = va + vb;
    if se2 == 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch { diff, t: diff.signum() * f64::INFINITY, df: f64::INFINITY, p });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Some(Welch { diff, t, df, p: student_t_two_sided(t, df) })
}

/// `P(|T| ≥ |t|)` for Student's t with `df` degrees of freedom: `I_{df/(df + t²)}(df/2, ½)`.
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The regularised incomplete beta function `I_x(a, b)`, by its continued fraction (Lentz's
/// method), on the side where it converges fast.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of `I_x(a, b)` (Numerical Recipes' `betacf`).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    d = 1.0 / if d.abs() < TINY { TINY } else { d };
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for aa in [m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))] {
            d = 1.0 + aa * d;
            d = 1.0 / if d.abs() < TINY { TINY } else { d };
            c = 1.0 + aa / c;
            c = if c.abs() < TINY { TINY } else { c };
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine coefficients: 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let sum = G.iter().skip(1).enumerate().fold(G[0], |s, (i, g)| s + g / (x + i as f64 + 1.0));
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: an even series has CV 0; [3, 1] has mean 2, std 1, CV 0.5; all zeros 0.
    #[test]
    fn coefficient_of_variation_by_hand() {
        assert_eq!(coefficient_of_variation(&[2.0, 2.0]), 0.0);
        assert!((coefficient_of_variation(&[3.0, 1.0]) - 0.5).abs() < 1e-15);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, population std 2.
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean_std(&xs), (5.0, 2.0));
        // Sample std: √(32 / 7).
        assert_eq!(sample_std(&xs), (32.0f64 / 7.0).sqrt());
        assert!(sample_std(&[1.0]).is_nan());
        assert_eq!(median(&xs), 4.5);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(min_max(&xs), (2.0, 9.0));
        assert!(median(&[]).is_nan());
    }

    /// Against scipy.stats 1.17.1: `ttest_ind(a, b, equal_var=False)` and `2·t.sf(t, df)`.
    #[test]
    fn welch_and_student_t_match_scipy() {
        let w = welch(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((w.t + 3.674_234_614_174_767).abs() < 1e-12 && (w.df - 4.0).abs() < 1e-12, "{w:?}");
        assert!((w.p - 0.021_311_641_128_756_713).abs() < 1e-12, "{w:?}");
        let w = welch(&[2.0150, 2.0508], &[2.2631, 2.3281]).unwrap();
        assert!((w.t + 7.080_219_565_927_252).abs() < 1e-9 && (w.df - 1.555_570_327_365_052).abs() < 1e-9);
        assert!((w.p - 0.036_245_348_075_476_81).abs() < 1e-9, "{w:?}");
        let cases = [
            (2.776445, 4.0, 0.050_000_005_382_091_56),
            (12.7062, 1.0, 0.050_000_018_560_710_4),
            (2.228139, 10.0, 0.049_999_987_452_882_54),
            (1.0, 3.5, 0.381_337_253_563_445_3),
            (0.5, 1.2, 0.693_248_687_165_321_8),
        ];
        for (t, df, p) in cases {
            assert!((student_t_two_sided(t, df) - p).abs() < 1e-12, "t {t}, df {df}");
        }
        assert_eq!(student_t_two_sided(0.0, 3.0), 1.0);
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
        assert_eq!(welch(&[1.0, 1.0], &[2.0, 2.0]).unwrap().p, 0.0);
    }
}
