//! Line and scatter charts as PNG and SVG with plotters, fonts rendered in pure Rust
//! (ab_glyph with the Ubuntu font that `epaint_default_fonts` carries): no system font
//! libraries needed.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// One line (or set of points) of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Colour index into the palette.
    pub color: usize,
    pub dashed: bool,
    /// Points only (scatter), no line.
    pub scatter: bool,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Markers (×) drawn at the top of the plot at these x (diverged runs), with their colour.
    pub top_marks: Vec<(f64, usize)>,
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

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
    });
}

/// Writes `stem.png` and `stem.svg`; returns the SVG text (for inlining in HTML).
pub fn draw(chart: &Chart<'_>, stem: &Path) -> anyhow::Result<String> {
    register_font();
    let png = stem.with_extension("png");
    let svg_path = stem.with_extension("svg");
    {
        let root = BitMapBackend::new(&png, (900, 540)).into_drawing_area();
        render(chart, &root)?;
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 540)).into_drawing_area();
        render(chart, &root)?;
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    crate::io::write_atomic(&svg_path, svg.as_bytes())?;
    Ok(svg)
}

fn range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let v: Vec<f64> = values.filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
    if v.is_empty() {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    if log {
        let (lo, hi) = if lo == hi { (lo / 2.0, hi * 2.0) } else { (lo, hi) };
        (lo / 1.3, hi * 1.3)
    } else {
        let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 * hi.abs().max(1.0) };
        (lo - pad, hi + pad)
    }
}

fn render<DB: DrawingBackend>(c: &Chart<'_>, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{x:?}");
    root.fill(&WHITE).map_err(e)?;
    let pts = || c.series.iter().flat_map(|s| s.points.iter());
    let xr = range(pts().map(|p| p.0).chain(c.top_marks.iter().map(|m| m.0)), c.log_x);
    let yr = range(pts().map(|p| p.1), c.log_y);
    let mut b = ChartBuilder::on(root);
    b.caption(c.title, ("sans-serif", 22)).margin(12).x_label_area_size(45).y_label_area_size(70);
    macro_rules! body {
        ($chart:expr) => {{
            let mut ch = $chart;
            ch.configure_mesh()
                .x_label_formatter(&|v: &f64| tick(*v))
                .y_label_formatter(&|v: &f64| tick(*v))
                .x_desc(c.x_label)
                .y_desc(c.y_label)
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(e)?;
            for s in &c.series {
                let col = color(s.color);
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (!c.log_x || *x > 0.0) && (!c.log_y || *y > 0.0))
                    .collect();
                if s.scatter {
                    ch.draw_series(pts.iter().map(|&p| Circle::new(p, 2, col.mix(0.5).filled())))
                        .map_err(e)?
                        .label(&s.name)
                        .legend(move |(x, y)| Circle::new((x + 10, y), 4, col.filled()));
                    continue;
                }
                let style =
                    ShapeStyle { color: col.to_rgba(), filled: false, stroke_width: if s.dashed { 1 } else { 2 } };
                let anno = if s.dashed {
                    ch.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style)).map_err(e)?
                } else {
                    ch.draw_series(LineSeries::new(pts.clone(), style)).map_err(e)?
                };
                if !s.name.is_empty() {
                    anno.label(&s.name)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
                }
                ch.draw_series(pts.iter().map(|&p| Circle::new(p, 2, col.filled()))).map_err(e)?;
            }
            let top = yr.1;
            ch.draw_series(c.top_marks.iter().map(|&(x, ci)| Cross::new((x, top), 6, color(ci).stroke_width(2))))
                .map_err(e)?;
            if c.series.iter().any(|s| !s.name.is_empty()) {
                ch.configure_series_labels()
                    .label_font(("sans-serif", 14))
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.4))
                    .position(SeriesLabelPosition::UpperRight)
                    .draw()
                    .map_err(e)?;
            }
        }};
    }
    match (c.log_x, c.log_y) {
        (true, true) => body!(b.build_cartesian_2d((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale()).map_err(e)?),
        (true, false) => body!(b.build_cartesian_2d((xr.0..xr.1).log_scale(), yr.0..yr.1).map_err(e)?),
        (false, true) => body!(b.build_cartesian_2d(xr.0..xr.1, (yr.0..yr.1).log_scale()).map_err(e)?),
        (false, false) => body!(b.build_cartesian_2d(xr.0..xr.1, yr.0..yr.1).map_err(e)?),
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
