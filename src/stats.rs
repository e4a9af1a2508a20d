//! Summary statistics of plain `f64` series, shared by the probes, the sweep aggregation and
//! the benchmark.

/// Arithmetic mean; NaN for an empty series.
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Population mean and standard deviation (divisor n, as the papers' "mean ± std" over seeds).
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    let m = mean(xs);
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
    (m, v.sqrt())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
