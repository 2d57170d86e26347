//! nmb-table: a table as data, rendered four ways, and the HTML escaping of untrusted text.
//!
//! It owns [`Table`] (a caption, a header of [`Column`]s, rows of [`Cell`]s and a footnote) and its renderers:
//! aligned plain text for a terminal ([`Table::text`]), HTML ([`Table::html`]), a Markdown pipe table
//! ([`Table::markdown`]) and CSV ([`Table::csv`]). A report builds each of its tables once and renders that one
//! value into every format, so the formats cannot drift apart in their columns, units or labels. It also owns
//! [`escape`], the one function that makes text safe inside HTML, used for every piece of text a renderer
//! writes and by every page that writes HTML by hand, and [`terminal`], which makes text from outside inert
//! for a terminal (control characters escaped, long values cut to a bounded excerpt).
//!
//! It does not know what a table holds (scores, runs, reviews: the crates that build tables decide their
//! columns and how numbers are formatted), write files, or decide page layout around a table (headings,
//! sections, styles).

use std::fmt::Write;

pub mod terminal;

/// Escapes text for HTML: element content, attribute values in double or single quotes, and SVG/XML text.
///
/// `& < > " '` become entities, so text cannot close an element or a quoted attribute or open a tag;
/// control characters other than tab and line breaks (not allowed in HTML text) become U+FFFD. Not safe for
/// unquoted attribute values, `<script>` or `<style>` contents, or URLs whose scheme is untrusted.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A column: its header and whether its cells are numbers, which are right-aligned (`class="num"` in HTML,
/// `---:` in Markdown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub header: String,
    pub numeric: bool,
}

/// A cell: its text, and what may go with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    /// A confidence interval or a test's name: smaller below the text in HTML, after it elsewhere.
    pub detail: Option<String>,
    /// A second, longer remark (a corrected rate beside the measured one): below the detail in HTML, in
    /// parentheses after it elsewhere.
    pub note: Option<String>,
    /// Shown on hover in HTML only (why a value is missing); other formats say it in the caption.
    pub title: Option<String>,
    /// Greyed in HTML (a missing value, a price nobody gave); the same text elsewhere.
    pub muted: bool,
    /// Where the text links to in HTML and Markdown; a path or URL the caller built, never model output.
    pub link: Option<String>,
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

    /// Greyed text in HTML.
    pub fn muted(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            muted: true,
            ..Cell::default()
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

    /// A value with a 95% CI as the detail, `value [low–high]`, with `digits` decimals, each of the three
    /// multiplied by `scale` (100 for a share shown as a percentage) and followed in the text by `unit`.
    pub fn estimate(
        value: f64,
        low: f64,
        high: f64,
        scale: f64,
        digits: usize,
        unit: &str,
    ) -> Self {
        Cell::with_detail(
            format!("{:.digits$}{unit}", value * scale),
            format!("[{:.digits$}–{:.digits$}]", low * scale, high * scale),
        )
    }

    /// The same cell linking to `href`.
    pub fn linked(mut self, href: impl Into<String>) -> Self {
        self.link = Some(href.into());
        self
    }

    /// The same cell with `note` after its detail.
    pub fn noted(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// Text, detail and note on one line, for formats without markup.
    pub fn plain(&self) -> String {
        let mut s = self.text.clone();
        if let Some(d) = &self.detail {
            let _ = write!(s, " {d}");
        }
        if let Some(n) = &self.note {
            let _ = write!(s, " ({n})");
        }
        s
    }
}

/// Rows of cells under columns, with a caption saying how to read them (before the table) and a footnote
/// (after it); either may be empty, and then it is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub caption: String,
    pub footnote: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
    /// The `<table>` element's id and class in HTML, for a stylesheet, a test or a link to find it.
    pub id: Option<String>,
    pub class: Option<String>,
}

impl Table {
    /// A table with these `(header, numeric)` columns and no rows.
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
            ..Table::default()
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// A caption paragraph, a `<table>` and a footnote paragraph; every piece of text and every attribute
    /// escaped.
    pub fn html(&self) -> String {
        let mut h = String::new();
        if !self.caption.is_empty() {
            let _ = write!(h, "<p class=\"muted\">{}</p>", escape(&self.caption));
        }
        h.push_str("<table");
        for (name, value) in [("id", &self.id), ("class", &self.class)] {
            if let Some(v) = value {
                let _ = write!(h, " {name}=\"{}\"", escape(v));
            }
        }
        h.push_str("><tr>");
        for c in &self.columns {
            let _ = write!(h, "<th>{}</th>", escape(&c.header));
        }
        h.push_str("</tr>");
        for row in &self.rows {
            h.push_str("<tr>");
            for (cell, col) in row.iter().zip(&self.columns) {
                html_cell(&mut h, cell, col.numeric);
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
        if !self.footnote.is_empty() {
            let _ = write!(h, "<p class=\"muted\">{}</p>", escape(&self.footnote));
        }
        h
    }

    /// The caption, a pipe table and the footnote; `|` and line breaks in cells are escaped.
    pub fn markdown(&self) -> String {
        let mut m = String::new();
        if !self.caption.is_empty() {
            let _ = write!(m, "{}\n\n", self.caption);
        }
        m.push('|');
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
                let text = match &cell.link {
                    Some(href) => format!(
                        "[{}]({})",
                        md_cell(&cell.plain())
                            .replace('[', "\\[")
                            .replace(']', "\\]"),
                        href.replace(' ', "%20").replace(')', "%29")
                    ),
                    None => md_cell(&cell.plain()),
                };
                let _ = write!(m, " {text} |");
            }
            m.push('\n');
        }
        if !self.footnote.is_empty() {
            let _ = write!(m, "\n{}\n", self.footnote);
        }
        m
    }

    /// Aligned columns for a terminal, two spaces apart, numbers right-aligned; the caption first and the
    /// footnote last, each set off by a blank line. Cells are made [`terminal::inert`] (a cell is one line, and
    /// its text may come from a model or a file).
    pub fn text(&self) -> String {
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| terminal::inert(&c.plain()).into_owned())
                    .collect()
            })
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
                    let pad = " ".repeat(w.saturating_sub(t.chars().count()));
                    if c.numeric {
                        format!("{pad}{t}")
                    } else {
                        format!("{t}{pad}")
                    }
                })
                .collect();
            let mut l = parts.join("  ").trim_end().to_string();
            l.push('\n');
            l
        };
        let mut out = String::new();
        if !self.caption.is_empty() {
            let _ = write!(out, "{}\n\n", self.caption);
        }
        out.push_str(&line(
            self.columns.iter().map(|c| c.header.as_str()).collect(),
        ));
        for row in &cells {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        if !self.footnote.is_empty() {
            let _ = write!(out, "\n{}\n", self.footnote);
        }
        out
    }

    /// RFC 4180 CSV: the header, then one record per row, `\n` after each; a field is quoted when it holds a
    /// comma, a quote or a line break (quotes doubled), and a record of one empty field is written `""` so it
    /// is not read as a blank line. Caption and footnote are left out (CSV has no place for prose).
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let header: Vec<&str> = self.columns.iter().map(|c| c.header.as_str()).collect();
        csv_record(&mut out, &header);
        for row in &self.rows {
            let fields: Vec<String> = row.iter().map(Cell::plain).collect();
            csv_record(&mut out, &fields);
        }
        out
    }
}

fn html_cell(h: &mut String, cell: &Cell, numeric: bool) {
    h.push_str("<td");
    if numeric {
        h.push_str(" class=\"num\"");
    }
    if let Some(t) = &cell.title {
        let _ = write!(h, " title=\"{}\"", escape(t));
    }
    h.push('>');
    let text = escape(&cell.text);
    let text = match &cell.link {
        Some(href) => format!("<a href=\"{}\">{text}</a>", escape(href)),
        None => text,
    };
    if cell.muted {
        let _ = write!(h, "<span class=\"muted\">{text}</span>");
    } else {
        h.push_str(&text);
    }
    for small in [&cell.detail, &cell.note].into_iter().flatten() {
        let _ = write!(h, "<br><span class=\"ci\">{}</span>", escape(small));
    }
    h.push_str("</td>");
}

/// A Markdown table cell: no pipe or line break from any text can end the cell or the row.
fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn csv_record<S: AsRef<str>>(out: &mut String, fields: &[S]) {
    if let [only] = fields {
        if only.as_ref().is_empty() {
            out.push_str("\"\"\n");
            return;
        }
    }
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let f = f.as_ref();
        if f.contains([',', '"', '\n', '\r']) {
            let _ = write!(out, "\"{}\"", f.replace('"', "\"\""));
        } else {
            out.push_str(f);
        }
    }
    out.push('\n');
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
    fn terminal_cells_cannot_act_on_the_terminal() {
        let mut t = Table::new("", &[("id", false), ("answer", false)]);
        t.push(vec![
            Cell::new("c1\u{1b}[2J"),
            Cell::new("line\r\nfake: ok\u{9b}"),
        ]);
        let text = t.text();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("c1\\u{1b}[2J"), "{text}");
        assert!(text.contains("line\\r\\nfake: ok\\u{9b}"), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn escapes_every_special_character_for_content_and_quoted_attributes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        // Neither quote style can be closed from inside an attribute value.
        let attr = escape(r#"x" onmouseover="alert(1)' onload='alert(2)"#);
        assert!(!attr.contains('"') && !attr.contains('\''), "{attr}");
        // Entities are escaped again, not passed through.
        assert_eq!(escape("&lt;"), "&amp;lt;");
        // Control characters are not allowed in HTML text; tab and line breaks are.
        assert_eq!(escape("a\u{0}b\u{1b}c"), "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(escape("a\tb\nc\r"), "a\tb\nc\r");
        assert_eq!(escape("ünïcødé ✓"), "ünïcødé ✓");
    }

    #[test]
    fn html_escapes_every_text_and_attribute() {
        let t = table();
        let html = t.html();
        assert!(html.starts_with("<p class=\"muted\">How to read &lt;it&gt;.</p><table><tr>"));
        assert!(html.contains("<th>model</th><th>p</th>"), "{html}");
        assert!(html.contains("<td>a|b &lt;x&gt;</td>"), "{html}");
        assert!(html.contains("<td class=\"num\">0.031<br><span class=\"ci\">(exact)</span></td>"));
        let mut undefined = Table::new("", &[("p", true)]);
        undefined.id = Some("t\"1".into());
        undefined.class = Some("headline".into());
        undefined.footnote = "after <b>".into();
        undefined.push(vec![Cell::undefined("undefined: no \"x\" <y>")]);
        undefined.push(vec![Cell::muted("no <price>")]);
        undefined.push(vec![Cell::new("<run>").linked("/runs/a\"b?x=1&y=2")]);
        undefined.push(vec![Cell::with_detail("1", "[0–2]").noted("<note>")]);
        let html = undefined.html();
        assert!(
            html.starts_with("<table id=\"t&quot;1\" class=\"headline\"><tr>"),
            "{html}"
        );
        assert!(html
            .contains("<td class=\"num\" title=\"undefined: no &quot;x&quot; &lt;y&gt;\">–</td>"));
        assert!(
            html.contains("<td class=\"num\"><span class=\"muted\">no &lt;price&gt;</span></td>")
        );
        assert!(
            html.contains("<a href=\"/runs/a&quot;b?x=1&amp;y=2\">&lt;run&gt;</a>"),
            "{html}"
        );
        assert!(html.contains(
            "1<br><span class=\"ci\">[0–2]</span><br><span class=\"ci\">&lt;note&gt;</span></td>"
        ));
        assert!(html.ends_with("</table><p class=\"muted\">after &lt;b&gt;</p>"));
    }

    #[test]
    fn markdown_aligns_numbers_and_keeps_cells_whole() {
        let md = table().markdown();
        assert_eq!(
            md,
            "How to read <it>.\n\n| model | p |\n|---|---:|\n| a\\|b <x> | 0.031 (exact) |\n\
             | long model name | 1.000 |\n"
        );
        let mut t = Table::new("", &[("x", false)]);
        t.footnote = "Read me.".into();
        t.push(vec![Cell::new("two\nlines\r")]);
        t.push(vec![Cell::new("run [1]").linked("/runs/a b)")]);
        t.push(vec![Cell::with_detail("1", "[0–2]").noted("review s1")]);
        assert_eq!(
            t.markdown(),
            "| x |\n|---|\n| two lines  |\n| [run \\[1\\]](/runs/a%20b%29) |\n| 1 [0–2] (review s1) |\n\n\
             Read me.\n"
        );
    }

    #[test]
    fn text_pads_columns_to_the_widest_cell() {
        let text = table().text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "How to read <it>.");
        assert_eq!(lines[1], "");
        // Widths 15 and 13, two spaces between; the numeric column is right-aligned, nothing trails.
        assert_eq!(lines[2], format!("model{}p", " ".repeat(10 + 2 + 12)));
        assert_eq!(
            lines[3],
            format!("a|b <x>{}0.031 (exact)", " ".repeat(8 + 2))
        );
        assert_eq!(
            lines[4],
            format!("long model name{}1.000", " ".repeat(2 + 8))
        );
        // Widths count characters, not bytes.
        let mut t = Table::new("", &[("név", false), ("n", true)]);
        t.push(vec![Cell::new("ő"), Cell::new("10")]);
        t.footnote = "end".into();
        assert_eq!(t.text(), "név   n\nő    10\n\nend\n");
    }

    #[test]
    fn csv_quotes_only_what_needs_it() {
        let mut t = Table::new("not in CSV", &[("a", false), ("b", true)]);
        t.push(vec![Cell::new("plain"), Cell::new("1,5")]);
        t.push(vec![Cell::new("say \"hi\""), Cell::new("two\nlines")]);
        t.push(vec![Cell::new(""), Cell::with_detail("0.5", "[0.1–0.9]")]);
        assert_eq!(
            t.csv(),
            "a,b\nplain,\"1,5\"\n\"say \"\"hi\"\"\",\"two\nlines\"\n,0.5 [0.1–0.9]\n"
        );
        let mut one = Table::new("", &[("only", false)]);
        one.push(vec![Cell::new("")]);
        assert_eq!(one.csv(), "only\n\"\"\n");
    }

    #[test]
    fn estimate_scales_and_rounds_value_and_interval() {
        let c = Cell::estimate(0.4126, 0.301, 0.52, 100.0, 1, "%");
        assert_eq!(c.plain(), "41.3% [30.1–52.0]");
        let c = Cell::estimate(0.8123, 0.75, 0.9, 1.0, 3, "");
        assert_eq!(c.plain(), "0.812 [0.750–0.900]");
    }
}
