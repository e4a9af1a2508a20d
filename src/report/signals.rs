//! The optimizer-side signals as figures: each bounded norm's saturation against depth (DyT,
//! BHyT, Derf: the fraction of arguments where the squashing function passes almost no
//! gradient), and the output logits' largest log-partition over training (what a z-loss
//! controls). Each appears only when some run recorded it.

use super::data::RunData;
use super::figures::{Figure, fig, line, over_probes};
use super::plot::Chart;

/// The figures of `runs` (best runs of a sweep, or one run), file names tagged with `tag`,
/// captions with `at`.
pub fn figures(dir: &std::path::Path, runs: &[RunData], tag: &str, at: &str) -> anyhow::Result<Vec<Figure>> {
    let mut figs = Vec::new();
    let saturation: Vec<_> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let pts = RunData::per_layer(r.last_probe()?, |s| s.saturation);
            (!pts.is_empty()).then(|| line(r.legend(), pts, i, false))
        })
        .collect();
    if !saturation.is_empty() {
        figs.push(fig(
            dir,
            &format!("saturation{tag}"),
            format!(
                "Saturated fraction of each bounded input norm's arguments (slope below 2 % of its slope at 0: \
                 |u| > 2.65 for DyT's and BHyT's tanh, > 1.98 for Derf's erf), at the last probe{at}."
            ),
            Chart::new("Bounded-norm saturation vs depth", "sublayer l", "saturated fraction", saturation),
        )?);
    }
    let log_z = over_probes(runs, |p| p.forward.output_logits.as_ref().map(|o| o.log_z_max));
    if !log_z.is_empty() {
        figs.push(fig(
            dir,
            &format!("output_log_z{tag}"),
            format!("Largest log-partition log Z of the output logits over the probe batch, at each probe{at}."),
            Chart::new("Output logits: largest log Z", "step", "max log Z", log_z),
        )?);
    }
    Ok(figs)
}
