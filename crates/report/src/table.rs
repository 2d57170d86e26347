//! The report's cells of estimates; the table model itself is `nmb-table`'s, so every report table and
//! `nmb score`'s terminal output render the same data.

use nmb_stats::Estimate;

pub use nmb_table::{Cell, Column, Table};

/// A share as a percentage with its 95% CI as the detail, `41.2% [30.1–52.0]`; a greyed dash without one.
pub fn percent(e: Option<&Estimate>) -> Cell {
    number(e, 100.0, 1, "%")
}

/// A value with its 95% CI as the detail, times `scale`, with `digits` decimals and `unit` after the value; a
/// greyed dash without one.
pub fn number(e: Option<&Estimate>, scale: f64, digits: usize, unit: &str) -> Cell {
    match e {
        Some(e) => Cell::estimate(e.value, e.ci_low, e.ci_high, scale, digits, unit),
        None => Cell::muted("–"),
    }
}

/// A length with at most one decimal (a share of a call's tokens may be fractional), without a trailing `.0`.
pub fn trimmed(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_string)
}
