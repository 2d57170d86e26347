//! The paired-comparison table (two models on the same suite), built once for the HTML and Markdown reports and
//! `nmb compare`'s terminal output.

use nmb_results::Comparison;
use nmb_stats::{McNemar, PairedComparison};

use crate::table::{Cell, Table};

/// How to read the table; the same words in every rendering.
pub const CAPTION: &str = "Runs of different models on the same suite, paired on (task, sample). A − B is the \
difference in accuracy in percentage points (pp) with a 95% paired bootstrap CI that resamples whole cases; \
bootstrap p is that bootstrap's two-sided p-value. McNemar p is the exact test where every task has one paired \
answer, else the cluster-adjusted test (Durkalski 2003) with cases as clusters; each cell names its test. Rows \
named `field ·` compare NeuroVLM-Bench structured answers on one field (correct on that field or not).";

/// One row per group of every comparison.
pub fn paired_table(comparisons: &[Comparison]) -> Table {
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
            ("only A / only B", true),
            ("McNemar p (test)", true),
        ],
    );
    for c in comparisons {
        for g in &c.groups {
            let group = match (g.level, g.family) {
                (Some(l), Some(f)) => format!("{} · {}", l.as_str(), f.as_str()),
                _ => "overall".into(),
            };
            t.push(row(
                c,
                group,
                g.items,
                g.paired.as_ref(),
                g.mcnemar.as_ref(),
            ));
        }
        for f in &c.structured_fields {
            let group = format!("field · {}", f.field);
            t.push(row(c, group, f.items, Some(&f.paired), Some(&f.mcnemar)));
        }
    }
    t
}

fn row(
    c: &Comparison,
    group: String,
    items: usize,
    paired: Option<&PairedComparison>,
    mcnemar: Option<&McNemar>,
) -> Vec<Cell> {
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
        Cell::new(group),
        Cell::new(items.to_string()),
    ];
    match paired {
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
            Cell::new(format!("{:.3}", p.p_value)),
        ]),
        None => cells.extend([dash(), dash(), dash(), dash()]),
    }
    match mcnemar {
        Some(m) => cells.extend([
            Cell::new(format!("{} / {}", m.only_a, m.only_b)),
            Cell::with_detail(format!("{:.3}", m.p_value), format!("({})", m.test.tag())),
        ]),
        None => cells.extend([dash(), dash()]),
    }
    cells
}
