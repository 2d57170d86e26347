//! A table built once as data and rendered three ways (HTML, Markdown, the terminal), so the copies cannot
//! drift apart in their columns, units or labels.

use std::fmt::Write;

use nmb_stats::Estimate;

use crate::html::escape;

/// A column: its header and whether its cells are numbers (right-aligned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub header: String,
    pub numeric: bool,
}

/// A cell: its text and an optional detail (a confidence interval, a test's name) shown smaller in HTML and
/// after the text elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub detail: Option<String>,
    /// Shown on hover in HTML only (why a value is missing); other formats say it in the caption.
    pub title: Option<String>,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            ..Cell::default()
        }
    }

    pub fn with_detail(text: impl Into<String>, detail: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            detail: Some(detail.into()),
            ..Cell::default()
        }
    }

    /// A share as a percentage with its 95% CI as the detail; a dash without one.
    pub fn percent(e: Option<&Estimate>) -> Self {
        match e {
            Some(e) => Cell::with_detail(
                format!("{:.1}%", e.value * 100.0),
                format!("[{:.1}–{:.1}]", e.ci_low * 100.0, e.ci_high * 100.0),
            ),
            None => Cell::new("–"),
        }
    }

    /// A number that does not exist (a zero denominator): a dash, with `why` on hover.
    pub fn undefined(why: impl Into<String>) -> Self {
        Cell {
            text: "–".into(),
            title: Some(why.into()),
            ..Cell::default()
        }
    }

    /// Text and detail on one line.
    fn plain(&self) -> String {
        match &self.detail {
            Some(d) => format!("{} {d}", self.text),
            None => self.text.clone(),
        }
    }
}

/// Rows of cells under columns, with a caption saying how to read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub caption: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(caption: impl Into<String>, columns: &[(&str, bool)]) -> Self {
        Table {
            caption: caption.into(),
            columns: columns
                .iter()
                .map(|(h, numeric)| Column {
                    header: h.to_string(),
                    numeric: *numeric,
                })
                .collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// A caption paragraph and a `<table>`; every piece of text escaped.
    pub fn html(&self) -> String {
        let mut h = format!(
            "<p class=\"muted\">{}</p><table><tr>",
            escape(&self.caption)
        );
        for c in &self.columns {
            let _ = write!(h, "<th>{}</th>", escape(&c.header));
        }
        h.push_str("</tr>");
        for row in &self.rows {
            h.push_str("<tr>");
            for (cell, col) in row.iter().zip(&self.columns) {
                let class = if col.numeric { " class=\"num\"" } else { "" };
                let title = cell
                    .title
                    .as_ref()
                    .map_or(String::new(), |t| format!(" title=\"{}\"", escape(t)));
                let _ = write!(h, "<td{class}{title}>{}", escape(&cell.text));
                if let Some(d) = &cell.detail {
                    let _ = write!(h, "<br><span class=\"ci\">{}</span>", escape(d));
                }
                h.push_str("</td>");
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
        h
    }

    /// The caption, then a pipe table; `|` and line breaks in cells are escaped.
    pub fn markdown(&self) -> String {
        let mut m = format!("{}\n\n|", self.caption);
        for c in &self.columns {
            let _ = write!(m, " {} |", md_cell(&c.header));
        }
        m.push_str("\n|");
        for c in &self.columns {
            m.push_str(if c.numeric { "---:|" } else { "---|" });
        }
        m.push('\n');
        for row in &self.rows {
            m.push('|');
            for cell in row {
                let _ = write!(m, " {} |", md_cell(&cell.plain()));
            }
            m.push('\n');
        }
        m
    }

    /// Aligned columns for a terminal, the caption first.
    pub fn text(&self) -> String {
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(Cell::plain).collect())
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|t| t.chars().count())
                    .chain([c.header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |texts: Vec<&str>| {
            let parts: Vec<String> = texts
                .iter()
                .zip(&self.columns)
                .zip(&widths)
                .map(|((t, c), w)| {
                    let pad = " ".repeat(w - t.chars().count());
                    if c.numeric {
                        format!("{pad}{t}")
                    } else {
                        format!("{t}{pad}")
                    }
                })
                .collect();
            parts.join("  ").trim_end().to_string()
        };
        let mut out = format!("{}\n\n", self.caption);
        out.push_str(&line(
            self.columns.iter().map(|c| c.header.as_str()).collect(),
        ));
        out.push('\n');
        for row in &cells {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
            out.push('\n');
        }
        out
    }
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new("How to read <it>.", &[("model", false), ("p", true)]);
        t.push(vec![
            Cell::new("a|b <x>"),
            Cell::with_detail("0.031", "(exact)"),
        ]);
        t.push(vec![Cell::new("long model name"), Cell::new("1.000")]);
        t
    }

    #[test]
    fn one_table_three_renderings_with_the_same_cells() {
        let t = table();
        let html = t.html();
        assert!(html.contains("<td>a|b &lt;x&gt;</td>"), "{html}");
        assert!(html.contains("<td class=\"num\">0.031<br><span class=\"ci\">(exact)</span></td>"));
        assert!(html.contains("How to read &lt;it&gt;."));
        let md = t.markdown();
        assert!(md.contains("| a\\|b <x> | 0.031 (exact) |"), "{md}");
        assert!(md.contains("|---|---:|"));
        let mut undefined = Table::new("c", &[("p", true)]);
        undefined.push(vec![Cell::undefined("undefined: no \"x\" <y>")]);
        assert!(undefined
            .html()
            .contains("<td class=\"num\" title=\"undefined: no &quot;x&quot; &lt;y&gt;\">–</td>"));
        assert!(undefined.markdown().contains("| – |"));
        let text = t.text();
        let lines: Vec<&str> = text.lines().collect();
        // Widths 15 and 13, two spaces between; the numeric column is right-aligned.
        assert_eq!(lines[2], format!("model{}p", " ".repeat(10 + 2 + 12)));
        assert_eq!(
            lines[3],
            format!("a|b <x>{}0.031 (exact)", " ".repeat(8 + 2))
        );
        assert_eq!(
            lines[4],
            format!("long model name{}1.000", " ".repeat(2 + 8))
        );
    }
}
