//! The paired-comparison table (two models on the same suite), built once for the HTML and Markdown reports and
//! `nmb compare`'s terminal output.

use nmb_results::multiplicity::{Adjusted, Multiplicity, Row};
use nmb_results::Comparison;

use crate::table::{Cell, Table};

/// How to read the table; the same words in every rendering.
pub const CAPTION: &str = "Runs of different models on the same suite, paired on (task, sample). A − B is the \
difference in accuracy in percentage points (pp) with a 95% paired bootstrap CI that resamples whole cases; \
bootstrap p is that bootstrap's two-sided p-value. McNemar p is the exact test where every task has one paired \
answer, else the cluster-adjusted test (Durkalski 2003) with cases as clusters; each cell names its test. Rows \
named `field ·` compare NeuroVLM-Bench structured answers on one field (correct on that field or not). Holm and \
BH are each p-value adjusted for the comparisons in this table (the family is stated under it).";

/// One row per group of every comparison, each p-value with its Holm and Benjamini–Hochberg adjusted values
/// from `multiplicity` (built by [`nmb_results::multiplicity::adjust`] over the same `comparisons`), and the
/// family counted stated under the table.
pub fn paired_table(comparisons: &[Comparison], multiplicity: &Multiplicity) -> Table {
    let mut t = Table::new(
        CAPTION,
        &[
            ("A", false),
            ("B", false),
            ("group", false),
            ("items", true),
            ("accuracy A", true),
            ("accuracy B", true),
            ("A − B [95% CI]", true),
            ("bootstrap p", true),
            ("Holm", true),
            ("BH", true),
            ("only A / only B", true),
            ("McNemar p (test)", true),
            ("McNemar Holm", true),
            ("McNemar BH", true),
        ],
    );
    let rows = nmb_results::multiplicity::rows(comparisons);
    for (i, r) in rows.iter().enumerate() {
        let adjusted = multiplicity.rows.get(i);
        t.push(row(
            r,
            adjusted.and_then(|a| a.bootstrap.as_ref()),
            adjusted.and_then(|a| a.mcnemar.as_ref()),
        ));
    }
    t.footnote = multiplicity.family.clone();
    t
}

/// A raw p-value's cell.
fn p_cell(p: f64) -> Cell {
    Cell::new(format!("{p:.3}"))
}

/// The Holm and BH cells of an adjusted p-value, `*` after one at or below α.
fn adjusted_cells(a: Option<&Adjusted>) -> [Cell; 2] {
    let cell = |p: f64, significant: bool| {
        Cell::new(format!("{p:.3}{}", if significant { " *" } else { "" }))
    };
    match a {
        Some(a) => [
            cell(a.p.holm, a.holm_significant),
            cell(a.p.bh, a.bh_significant),
        ],
        None => [Cell::new("–"), Cell::new("–")],
    }
}

fn row(r: &Row<'_>, boot: Option<&Adjusted>, mcn: Option<&Adjusted>) -> Vec<Cell> {
    let c = r.comparison;
    let name = |n: &str, model: &str| {
        if n.is_empty() {
            model.to_string()
        } else {
            n.to_string()
        }
    };
    let dash = || Cell::new("–");
    let mut cells = vec![
        Cell::new(name(&c.name_a, &c.model_a)),
        Cell::new(name(&c.name_b, &c.model_b)),
        Cell::new(r.group.clone()),
        Cell::new(r.items.to_string()),
    ];
    match r.paired {
        Some(p) => cells.extend([
            Cell::new(format!("{:.1}%", p.mean_a * 100.0)),
            Cell::new(format!("{:.1}%", p.mean_b * 100.0)),
            Cell::with_detail(
                format!("{:+.1} pp", p.diff.value * 100.0),
                format!(
                    "[{:+.1}, {:+.1}]",
                    p.diff.ci_low * 100.0,
                    p.diff.ci_high * 100.0
                ),
            ),
            p_cell(p.p_value),
        ]),
        None => cells.extend([dash(), dash(), dash(), dash()]),
    }
    cells.extend(adjusted_cells(boot));
    match r.mcnemar {
        Some(m) => cells.extend([
            Cell::new(format!("{} / {}", m.only_a, m.only_b)),
            Cell::with_detail(format!("{:.3}", m.p_value), format!("({})", m.test.tag())),
        ]),
        None => cells.extend([dash(), dash()]),
    }
    cells.extend(adjusted_cells(mcn));
    cells
}
