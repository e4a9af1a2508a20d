//! A report's text, in its order (setup, table, what the table means, further tables under
//! their headings, findings, figures), as markdown and as a self-contained HTML page.

use super::figures::Figure;
use std::path::Path;

/// The text of a report page.
pub struct Page {
    pub title: String,
    pub setup: Option<String>,
    pub table: String,
    pub table_notes: Vec<String>,
    pub sections: Vec<(String, String)>,
    pub findings: Vec<String>,
}

const STYLE: &str = "body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}\
    table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
    th{background:#f4f4f4}figure{margin:2em 0}figcaption{color:#555;font-size:0.9em}\
    .note{color:#555;font-size:0.85em;margin:0.2em 0}";

impl Page {
    /// `report.md`: the text, then each figure's PNG and caption.
    pub fn markdown(&self, dir: &Path, figs: &[Figure]) -> String {
        let mut md = format!("# {}\n\n{}\n\n", self.title, dir.display());
        if let Some(p) = &self.setup {
            md += &format!("{p}\n\n");
        }
        md += &format!("{}\n", self.table);
        for p in &self.table_notes {
            md += &format!("_{p}_\n\n");
        }
        for (heading, t) in &self.sections {
            md += &format!("\n## {heading}\n\n{t}\n");
        }
        if !self.findings.is_empty() {
            md += "\n## Findings\n\n";
            for n in &self.findings {
                md += &format!("- {n}\n");
            }
        }
        md += "\n## Figures\n\n";
        for f in figs {
            md += &format!("![{}]({}.png)\n\n{}\n\n", f.stem, f.stem, f.caption);
        }
        md
    }

    /// `report.html`: the text with the figures inlined as SVG; `runs`: how many rows the
    /// results files hold (0 for a single run).
    pub fn html(&self, dir: &Path, figs: &[Figure], runs: usize) -> String {
        let t = html_escape(&self.title);
        let d = html_escape(&dir.display().to_string());
        let mut html = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head>\
                <body>\n<h1>{t}</h1>\n<p>{d}</p>\n"
        );
        if let Some(p) = &self.setup {
            html += &format!("<p>{}</p>\n", bold(p));
        }
        html += &md_table_to_html(&self.table);
        for p in &self.table_notes {
            html += &format!("<p class=\"note\">{}</p>\n", html_escape(p));
        }
        for (heading, t) in &self.sections {
            html += &format!("<h2>{}</h2>\n{}", html_escape(heading), md_table_to_html(t));
        }
        if !self.findings.is_empty() {
            html += "<h2>Findings</h2>\n<ul>\n";
            for n in &self.findings {
                html += &format!("<li>{}</li>\n", bold(n));
            }
            html += "</ul>\n";
        }
        html += "<h2>Figures</h2>\n";
        for f in figs {
            let caption = html_escape(&f.caption);
            html += &format!("<figure id=\"{}\">{}<figcaption>{caption}</figcaption></figure>\n", f.stem, f.svg);
        }
        if runs > 0 {
            html += &format!("<h2>All runs</h2>\n<p>{runs} runs; one row each in results.jsonl / results.csv.</p>\n");
        }
        html + "</body></html>\n"
    }
}

fn md_table_to_html(md: &str) -> String {
    let mut h = String::from("<table>\n");
    for (i, line) in md.lines().enumerate().filter(|(_, l)| !l.starts_with("|---")) {
        let tag = if i == 0 { "th" } else { "td" };
        h += "<tr>";
        for c in md_cells(line) {
            h += &format!("<{tag}>{}</{tag}>", html_escape(&c));
        }
        h += "</tr>\n";
    }
    h + "</table>\n"
}

/// The cells of a markdown table row; `\|` is a pipe inside a cell.
fn md_cells(line: &str) -> Vec<String> {
    let inner = line.trim().strip_prefix('|').unwrap_or(line).strip_suffix('|').unwrap_or(line);
    let (mut cells, mut cell) = (Vec::new(), String::new());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => cell.push(chars.next().unwrap_or('|')),
            '|' => cells.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    cells.push(cell);
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn bold(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in html_escape(s).split("**").enumerate() {
        out += &if i % 2 == 1 { format!("<b>{part}</b>") } else { part.to_string() };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::md_cells;

    #[test]
    fn markdown_cells_split_on_pipes_but_not_on_escaped_ones() {
        assert_eq!(md_cells("| a | b \\| c |  d|"), vec!["a", "b | c", "d"]);
        assert_eq!(md_cells("|x|"), vec!["x"]);
    }
}
