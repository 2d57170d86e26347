//! The human-readable form of an [`AgreementReport`].

use std::fmt::Write as _;

use crate::analysis::{AgreementReport, DimensionReport, MeasureResult};
use crate::estimate::interval;

/// A plain-text report: one block per dimension, one line per statistic with its interval.
pub fn render_text(report: &AgreementReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "ratings   {}", report.source);
    let _ = writeln!(out, "judges    {}", list(&report.judges));
    let _ = writeln!(out, "clinicians {}", list(&report.clinicians));
    let b = &report.bootstrap;
    let _ = writeln!(
        out,
        "intervals {:.0}% percentile bootstrap over items, {} resamples, seed {}",
        b.level * 100.0,
        b.resamples,
        b.seed
    );
    for d in &report.dimensions {
        dimension(&mut out, d);
    }
    if let Some(c) = &report.criteria {
        criteria(&mut out, c);
    }
    out
}

/// Criterion marks: a sentence per judge setting it beside the median clinician, then the numbers.
fn criteria(out: &mut String, c: &crate::criteria::CriteriaAgreement) {
    let _ = writeln!(
        out,
        "\n== criteria ({} criteria on {} answers): balanced F1 of met / not-met marks against the clinicians \
         (the mean of F1 on met and on not met; 1 is full agreement)",
        c.criteria, c.items
    );
    for line in c.sentences() {
        let _ = writeln!(out, "  {line}");
    }
    for r in &c.clinicians {
        match &r.balanced_f1 {
            Some(e) => {
                let _ = writeln!(
                    out,
                    "  clinician {} against the other clinicians: {} over {} pairs",
                    r.rater,
                    interval(e),
                    r.pairs
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  clinician {}: undefined ({})",
                    r.rater,
                    r.undefined.as_deref().unwrap_or("")
                );
            }
        }
    }
    for r in &c.by_criterion {
        let value = r
            .balanced_f1
            .as_ref()
            .map_or_else(|| "undefined".to_string(), interval);
        let _ = writeln!(
            out,
            "    {} {}: {value} ({} pairs)",
            r.criterion, r.judge, r.pairs
        );
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(", ")
    }
}

fn dimension(out: &mut String, d: &DimensionReport) {
    let _ = writeln!(out, "\n== dimension {} ({} items)", d.dimension, d.items);
    for a in &d.annotators {
        let _ = writeln!(
            out,
            "  {:<10} {:<24} {:>4} items, mean {:.3}",
            format!("{:?}", a.role).to_lowercase(),
            a.name,
            a.items,
            a.mean_score
        );
    }
    for j in &d.judge_vs_clinicians {
        let _ = writeln!(
            out,
            "  {} vs clinicians' consensus ({} items)",
            j.judge, j.items
        );
        measures(out, &j.measures);
    }
    for s in &d.standings {
        let _ = writeln!(out, "  standing: {}", s.sentence);
    }
    for why in &d.standings_undefined {
        let _ = writeln!(out, "  standing undefined: {why}");
    }
    for c in &d.calibrated_rates {
        let _ = writeln!(out, "  calibrated: {}", c.sentence);
    }
    for c in &d.corrected_pass_rates {
        match (&c.result, &c.undefined) {
            (Some(r), _) => {
                let e = &r.corrected;
                let _ = writeln!(
                    out,
                    "  {} pass rate (score >= {}): observed {:.3}, sensitivity {:.3}, specificity {:.3}, \
                     corrected {:.3} [{:.3}, {:.3}] ({} run items, {} calibration items)",
                    c.judge,
                    c.threshold,
                    r.observed,
                    r.sensitivity,
                    r.specificity,
                    e.value,
                    e.ci_low,
                    e.ci_high,
                    c.run_items,
                    c.calibration_items
                );
            }
            (None, why) => {
                let why = why.as_deref().unwrap_or("undefined");
                let _ = writeln!(out, "  {} corrected pass rate: undefined ({why})", c.judge);
            }
        }
    }
    for g in &d.groups {
        let _ = writeln!(out, "  group {} ({} raters)", g.group, g.raters.len());
        measures(out, &g.measures);
    }
    for p in &d.pairs {
        let _ = writeln!(
            out,
            "  pair {} ~ {} ({} shared items)",
            p.a, p.b, p.shared_items
        );
        measures(out, &p.measures);
    }
}

fn measures(out: &mut String, list: &[MeasureResult]) {
    for m in list {
        let name = serde_plain_name(m);
        match (&m.estimate, &m.undefined) {
            (Some(e), _) => {
                let _ = writeln!(
                    out,
                    "    {name:<16} {:>7.3}  [{:.3}, {:.3}]  n={}",
                    e.value, e.ci_low, e.ci_high, e.n
                );
            }
            (None, why) => {
                let _ = writeln!(
                    out,
                    "    {name:<16} undefined: {}",
                    why.as_deref().unwrap_or("?")
                );
            }
        }
    }
}

/// The measure's snake_case name, as in the JSON output.
fn serde_plain_name(m: &MeasureResult) -> String {
    match serde_json::to_value(m.measure) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{:?}", m.measure),
    }
}
