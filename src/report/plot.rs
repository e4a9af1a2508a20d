//! Line and scatter charts as PNG and SVG with plotters, fonts rendered in pure Rust
//! (ab_glyph with the Ubuntu font that `epaint_default_fonts` carries): no system font
//! libraries needed.
//!
//! The legend sits in its own column right of the plot, so it never covers data. A chart can
//! clip a far outlier off its y range (drawn as ▲ on the top edge with its value), so that one
//! point does not squeeze every other line flat. Several charts can share one figure as small
//! multiples ([`draw_grid`]).

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// One line (or set of points) of a chart.
#[derive(Clone, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Colour index into the palette.
    pub color: usize,
    pub dashed: bool,
    /// Points only (scatter), no line.
    pub scatter: bool,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Markers (×) drawn at the top of the plot at these x (diverged runs), with their colour.
    pub top_marks: Vec<(f64, usize)>,
    /// Tick positions of a log x axis, labelled alike (`1e-3`, `3e-3`, …); decades when empty.
    pub x_ticks: Vec<f64>,
    /// Cap the y range at Q3 + 3·IQR of the values when a point lies beyond it.
    pub clip_outliers: bool,
}

impl Chart {
    /// A chart with no marks, default ticks and no clipping.
    pub fn new(title: impl Into<String>, x_label: &str, y_label: &str, series: Vec<Series>) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series,
            top_marks: Vec::new(),
            x_ticks: Vec::new(),
            clip_outliers: false,
        }
    }

    pub fn log(mut self, x: bool, y: bool) -> Self {
        self.log_x = x;
        self.log_y = y;
        self
    }
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const SIZE: (u32, u32) = (960, 540);
/// Width of the legend column.
const LEGEND_W: u32 = 230;

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
    });
}

/// Writes `stem.png` and `stem.svg` of one chart; returns the SVG text (for inlining in HTML).
pub fn draw(chart: &Chart, stem: &Path) -> anyhow::Result<String> {
    draw_with(stem, SIZE, &Layout::One(chart))
}

/// Small multiples: `charts` in a grid of `cols` columns, one figure; panels carry no legend
/// (their title says what they show, the caption the line styles).
pub fn draw_grid(charts: &[Chart], cols: usize, stem: &Path) -> anyhow::Result<String> {
    let rows = charts.len().div_ceil(cols.max(1)).max(1);
    draw_with(stem, (SIZE.0, 300 * rows as u32), &Layout::Grid(charts, rows, cols.max(1)))
}

/// What one figure holds.
enum Layout<'a> {
    One(&'a Chart),
    /// Charts, rows, columns.
    Grid(&'a [Chart], usize, usize),
}

impl Layout<'_> {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
        match self {
            Layout::One(c) => render(c, root, true),
            Layout::Grid(charts, rows, cols) => {
                // One legend for every panel: the series of the panel that names the most.
                let named = |c: &Chart| c.series.iter().filter(|s| !s.name.is_empty()).count();
                let fullest = charts.iter().max_by_key(|c| named(c)).filter(|c| named(c) > 0);
                let (grid, legend_area) = split_legend(root, fullest.is_some());
                for (chart, area) in charts.iter().zip(grid.split_evenly((*rows, *cols))) {
                    render(chart, &area, false)?;
                }
                if let (Some(area), Some(c)) = (legend_area, fullest) {
                    let series: Vec<&Series> = c.series.iter().filter(|s| !s.name.is_empty()).collect();
                    draw_legend(&area, &series).map_err(|e| anyhow!("{e:?}"))?;
                }
                Ok(())
            }
        }
    }
}

fn draw_with(stem: &Path, size: (u32, u32), layout: &Layout<'_>) -> anyhow::Result<String> {
    register_font();
    let png = stem.with_extension("png");
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        layout.paint(&root)?;
        root.present().map_err(|e| anyhow!("{png:?}: {e:?}"))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        layout.paint(&root)?;
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    crate::io::write_atomic(&stem.with_extension("svg"), svg.as_bytes())?;
    Ok(svg)
}

fn range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let v: Vec<f64> = values.filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
    if v.is_empty() {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let (a, b) = if log {
        let (lo, hi) = if lo == hi { (lo / 2.0, hi * 2.0) } else { (lo, hi) };
        (lo / 1.3, hi * 1.3)
    } else {
        let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 * hi.abs().max(1.0) };
        (lo - pad, hi + pad)
    };
    // Values at the ends of f64 (1e308, 5e-324) can pad to infinity or zero.
    let usable = a.is_finite() && b.is_finite() && a < b && (!log || a > 0.0);
    match (usable, log) {
        (true, _) => (a, b),
        (false, true) => (0.1, 10.0),
        (false, false) => (0.0, 1.0),
    }
}

/// Tukey's upper fence Q3 + 1.5·IQR of `values` when some value lies above it, else `None`.
pub fn outlier_cap(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 4 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let (q1, q3) = (q(0.25), q(0.75));
    let cap = q3 + 1.5 * (q3 - q1).max(1e-9 * q3.abs());
    (v[v.len() - 1] > cap).then_some(cap)
}

/// Ticks of a log axis inside `lo..hi`: powers of ten over three decades or more, 1, 2, 5 ×
/// 10^k over one or two, every 1…9 × 10^k within a decade (so a narrow range still has labels).
/// A range that is not positive and finite (a linear axis, an empty series) has none.
fn decade_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades >= 3.0 {
        &[1.0]
    } else if decades >= 1.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    };
    let mut t = Vec::new();
    for k in (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32) {
        for &m in mantissas {
            // Dividing by an exact power of ten rounds once: 3e-3 is the literal 3e-3.
            let v = if k < 0 { m / 10f64.powi(-k) } else { m * 10f64.powi(k) };
            if (lo..=hi).contains(&v) {
                t.push(v);
            }
        }
    }
    t
}

/// A chart's axis ranges, outlier cap and x ticks: everything drawn is placed by these.
pub struct Axes {
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub cap: Option<f64>,
    pub x_ticks: Vec<f64>,
}

/// The axes of `c`, from its points (non-finite ones, and non-positive ones on a log axis, are
/// left out; no points gives a default range).
pub fn axes(c: &Chart) -> Axes {
    let pts = || c.series.iter().flat_map(|s| s.points.iter());
    let x = range(pts().map(|p| p.0).chain(c.top_marks.iter().map(|m| m.0)), c.log_x);
    let ys: Vec<f64> = pts().map(|p| p.1).collect();
    let cap = if c.clip_outliers { outlier_cap(&ys) } else { None };
    let mut y = range(ys.iter().copied().filter(|y| cap.is_none_or(|cap| *y <= cap)), c.log_y);
    if let Some(cap) = cap {
        y.1 = y.1.max(cap);
    }
    let x_ticks = match (c.x_ticks.is_empty(), c.log_x) {
        (true, true) => decade_ticks(x.0, x.1),
        (true, false) => Vec::new(),
        (false, _) => c.x_ticks.clone(),
    };
    Axes { x, y, cap, x_ticks }
}

fn render<DB: DrawingBackend>(c: &Chart, root: &DrawingArea<DB, Shift>, legend: bool) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{x:?}");
    let named: Vec<&Series> = c.series.iter().filter(|s| !s.name.is_empty()).collect();
    let (plot, legend_area) = split_legend(root, legend && !named.is_empty());
    let Axes { x: xr, y: yr, cap, x_ticks } = axes(c);
    let mut b = ChartBuilder::on(&plot);
    // Compact (no legend: a panel of a grid) or full size.
    let (title_px, label_px, area) = if legend { (22, 14, (45, 70)) } else { (16, 12, (32, 52)) };
    b.caption(&c.title, ("sans-serif", title_px)).margin(10).x_label_area_size(area.0).y_label_area_size(area.1);
    // A log axis over three decades or more (and a learning-rate axis) labels every tick as a
    // power: 1e1 … 1e6.
    let x_exp = !c.x_ticks.is_empty() || (c.log_x && xr.1 / xr.0 >= 1e3);
    let y_exp = c.log_y && yr.1 / yr.0 >= 1e3;
    let label = |exp: bool, v: f64| if exp { format!("{v:e}") } else { tick(v) };
    macro_rules! body {
        ($chart:expr) => {{
            let mut ch = $chart;
            ch.configure_mesh()
                .x_label_formatter(&|v: &f64| label(x_exp, *v))
                .y_label_formatter(&|v: &f64| label(y_exp, *v))
                .x_desc(c.x_label.as_str())
                .y_desc(c.y_label.as_str())
                .label_style(("sans-serif", label_px))
                .axis_desc_style(("sans-serif", label_px + 2))
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(e)?;
            draw_all(&mut ch, c, cap, yr.1, label_px)?;
        }};
    }
    let log_x = || (xr.0..xr.1).log_scale().with_key_points(x_ticks.clone());
    let log_y = || (yr.0..yr.1).log_scale().with_key_points(decade_ticks(yr.0, yr.1));
    match (c.log_x, c.log_y) {
        (true, true) => body!(b.build_cartesian_2d(log_x(), log_y()).map_err(e)?),
        (true, false) => body!(b.build_cartesian_2d(log_x(), yr.0..yr.1).map_err(e)?),
        (false, true) => body!(b.build_cartesian_2d(xr.0..xr.1, log_y()).map_err(e)?),
        (false, false) => body!(b.build_cartesian_2d(xr.0..xr.1, yr.0..yr.1).map_err(e)?),
    }
    if let Some(area) = legend_area {
        draw_legend(&area, &named).map_err(e)?;
    }
    Ok(())
}

/// The plot area and, with `legend`, the legend column to its right.
fn split_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    legend: bool,
) -> (DrawingArea<DB, Shift>, Option<DrawingArea<DB, Shift>>) {
    if !legend {
        return (root.clone(), None);
    }
    let w = root.dim_in_pixel().0;
    let (a, b) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    (a, Some(b))
}

/// A point of a series, `(x, y)`.
type Point = (f64, f64);

/// Every series of `c` on the built chart: lines (dashed or solid) or scatter dots; a point
/// above `cap` as a marker on the top edge `top` with its value beside it; then `c`'s crosses
/// on the top edge.
fn draw_all<DB, CT>(
    ch: &mut ChartContext<'_, DB, CT>,
    c: &Chart,
    cap: Option<f64>,
    top: f64,
    label_px: u32,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{x:?}");
    for s in &c.series {
        let col = color(s.color);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!c.log_x || *x > 0.0) && (!c.log_y || *y > 0.0))
            .collect();
        let (inside, above): (Vec<Point>, Vec<Point>) = pts.iter().partition(|p| cap.is_none_or(|cap| p.1 <= cap));
        if s.scatter {
            ch.draw_series(inside.iter().map(|&p| Circle::new(p, 2, col.mix(0.5).filled()))).map_err(e)?;
        } else {
            let style = ShapeStyle { color: col.to_rgba(), filled: false, stroke_width: if s.dashed { 1 } else { 2 } };
            // An outlier's segment is drawn to the top edge.
            let line: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x, cap.map_or(y, |_| y.min(top)))).collect();
            if s.dashed {
                ch.draw_series(DashedLineSeries::new(line, 6, 4, style)).map_err(e)?;
            } else {
                ch.draw_series(LineSeries::new(line, style)).map_err(e)?;
            }
            ch.draw_series(inside.iter().map(|&p| Circle::new(p, 2, col.filled()))).map_err(e)?;
        }
        for &(x, y) in &above {
            ch.draw_series(std::iter::once(TriangleMarker::new((x, top), 6, col.filled()))).map_err(e)?;
            // The value, printed right of the marker.
            let font = ("sans-serif", label_px).into_font().color(&col);
            ch.draw_series(std::iter::once(EmptyElement::at((x, top)) + Text::new(format!("{y:.3}"), (9, -2), font)))
                .map_err(e)?;
        }
    }
    ch.draw_series(c.top_marks.iter().map(|&(x, ci)| Cross::new((x, top), 6, color(ci).stroke_width(2)))).map_err(e)?;
    Ok(())
}

/// The legend column: a line (or dot) sample and the series name, one row each.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[&Series],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let row = (area.dim_in_pixel().1 as i32 - 80).clamp(0, 22 * series.len() as i32) / series.len().max(1) as i32;
    for (i, s) in series.iter().enumerate() {
        let y = 50 + i as i32 * row.max(12);
        let col = color(s.color);
        if s.scatter {
            area.draw(&Circle::new((18, y), 4, col.filled()))?;
        } else {
            area.draw(&PathElement::new(vec![(6, y), (30, y)], col.stroke_width(if s.dashed { 1 } else { 3 })))?;
        }
        let name: String =
            if s.name.chars().count() > 30 { s.name.chars().take(29).chain(['…']).collect() } else { s.name.clone() };
        area.draw(&Text::new(name, (36, y - 7), ("sans-serif", 13).into_font()))?;
    }
    Ok(())
}

/// Compact tick labels: integers without decimals, small and large values in exponent form.
fn tick(v: f64) -> String {
    let a = v.abs();
    if v == v.round() && a < 1e5 {
        format!("{v:.0}")
    } else if a != 0.0 && !(1e-2..1e4).contains(&a) {
        format!("{v:.0e}")
    } else {
        format!("{}", (v * 1000.0).round() / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_far_outlier_is_capped_and_ordinary_spread_is_not() {
        // Seven LR-curve values and bhyt's 4.45; quartiles by nearest rank (indices 2 and 5 of
        // 0..=7): Q1 2.56, Q3 2.70, fence 2.70 + 1.5·0.14 = 2.91.
        let v = [2.50, 2.52, 2.56, 2.60, 2.64, 2.70, 2.72, 4.45];
        let cap = outlier_cap(&v).unwrap();
        assert!((cap - 2.91).abs() < 1e-9, "{cap}");
        assert_eq!(outlier_cap(&[2.5, 2.6, 2.7, 2.8, 2.9]), None);
    }

    #[test]
    fn decade_ticks_cover_the_range() {
        assert_eq!(decade_ticks(0.8e-3, 0.12), [1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1]);
        assert_eq!(decade_ticks(0.9e-6, 2e-2), [1e-6, 1e-5, 1e-4, 1e-3, 1e-2]);
        assert_eq!(decade_ticks(2.5e-3, 7.5e-3), [3e-3, 4e-3, 5e-3, 6e-3, 7e-3]);
    }

    #[test]
    fn decade_ticks_of_an_empty_or_linear_range_are_none() {
        // log10(0) = -inf would start the decade loop at i32::MIN.
        for (lo, hi) in [(0.0, 1.0), (-1.0, 1.0), (f64::NAN, 1.0), (1.0, f64::INFINITY), (2.0, 1.0)] {
            assert!(decade_ticks(lo, hi).is_empty(), "{lo}..{hi}");
        }
        assert_eq!(decade_ticks(3.0, 3.0), [3.0], "a single point");
    }

    #[test]
    fn empty_single_point_and_all_nan_series_draw_on_every_axis_kind() {
        let dir = std::env::temp_dir().join(format!("normlab-plot-edge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let series = |points: Vec<(f64, f64)>| Series { name: "s".into(), points, ..Default::default() };
        let cases = [
            vec![],
            vec![series(vec![])],
            vec![series(vec![(3.0, 2.5)])],
            vec![series(vec![(f64::NAN, f64::NAN), (1.0, f64::NAN)])],
            vec![series(vec![(0.0, 0.0), (0.0, 0.0)])],
            vec![series(vec![(-1e308, 1e308), (1e308, -1e308), (5e-324, 5e-324)])],
        ];
        for (i, s) in cases.into_iter().enumerate() {
            for (lx, ly) in [(false, false), (true, false), (false, true), (true, true)] {
                let c = Chart::new("edge", "x", "y", s.clone()).log(lx, ly);
                draw(&c, &dir.join(format!("c{i}-{lx}-{ly}"))).unwrap();
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
