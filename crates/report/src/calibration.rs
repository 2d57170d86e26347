//! Judges against clinicians: for each run a review set covers, how well each judge agrees with the
//! clinicians' consensus, and each judge-decided pass rate beside its Rogan–Gladen corrected rate. Built once
//! as tables, rendered into HTML and Markdown.

use nmb_calibration::{DimensionReport, MeasureResult};
use nmb_review::RunCalibration;
use nmb_stats::Measure;

use crate::input::RunData;
use crate::table::{Cell, Table};

/// The measures shown per judge, in this order.
const SHOWN: [(Measure, &str); 6] = [
    (Measure::Pearson, "Pearson r"),
    (Measure::Spearman, "Spearman ρ"),
    (Measure::CohenKappa, "Cohen κ"),
    (Measure::QuadraticKappa, "weighted κ"),
    (Measure::AlphaInterval, "Krippendorff α"),
    (Measure::Icc21, "ICC(2,1)"),
];

/// One review set's tables for one run.
pub(crate) struct CalibrationTables {
    pub title: String,
    pub agreement: Table,
    pub corrected: Table,
    pub notes: Vec<String>,
}

/// Every run's review tables, in run order.
pub(crate) fn tables(runs: &[RunData]) -> Vec<CalibrationTables> {
    runs.iter()
        .flat_map(|r| r.calibrations.iter().map(move |c| one(&r.name(), c)))
        .collect()
}

fn one(run_name: &str, c: &RunCalibration) -> CalibrationTables {
    let report = &c.report;
    let title = format!(
        "{} · review set {} · clinicians: {}",
        run_name,
        c.set_id,
        report.clinicians.join(", ")
    );
    let mut columns: Vec<(&str, bool)> =
        vec![("dimension", false), ("judge", false), ("items", true)];
    columns.extend(SHOWN.iter().map(|(_, name)| (*name, true)));
    let mut agreement = Table::new(
        "Each judge against the clinicians' consensus (their mean per item; the kappas use it rounded), on the \
         items both rated; 95% bootstrap CIs over items. The clinicians' own agreement is the row \
         \"clinicians\" (Krippendorff α and ICC over all of them).",
        &columns,
    );
    let mut corrected = Table::new(
        "Judge-decided pass rates over the whole run beside the rate corrected for the judge's sensitivity and \
         specificity against the clinicians (Rogan–Gladen; 95% stratified bootstrap CI). judge:grader is the \
         scoring's correctness decision (the accuracy column of the headline); a verdict passes when correct.",
        &[
            ("dimension", false),
            ("judge", false),
            ("passes at", true),
            ("observed", true),
            ("sensitivity", true),
            ("specificity", true),
            ("corrected", true),
            ("run items", true),
            ("calibration items", true),
        ],
    );
    for d in &report.dimensions {
        agreement_rows(&mut agreement, d);
        corrected_rows(&mut corrected, d);
    }
    CalibrationTables {
        title,
        agreement,
        corrected,
        notes: c.notes.clone(),
    }
}

fn agreement_rows(t: &mut Table, d: &DimensionReport) {
    for j in &d.judge_vs_clinicians {
        let mut row = vec![
            Cell::new(&d.dimension),
            Cell::new(&j.judge),
            Cell::new(j.items.to_string()),
        ];
        row.extend(SHOWN.iter().map(|(m, _)| measure_cell(&j.measures, *m)));
        t.push(row);
    }
    if let Some(g) = d.groups.iter().find(|g| g.group == "clinicians") {
        let mut row = vec![
            Cell::new(&d.dimension),
            Cell::new("clinicians"),
            Cell::new(d.items.to_string()),
        ];
        row.extend(SHOWN.iter().map(|(m, _)| match m {
            Measure::AlphaInterval | Measure::Icc21 => measure_cell(&g.measures, *m),
            _ => Cell::undefined("a pairwise measure; see nmb agreement --review for every pair"),
        }));
        t.push(row);
    }
}

fn measure_cell(measures: &[MeasureResult], m: Measure) -> Cell {
    match measures.iter().find(|r| r.measure == m) {
        Some(MeasureResult {
            estimate: Some(e), ..
        }) => Cell::with_detail(
            format!("{:.2}", e.value),
            format!("[{:.2}, {:.2}]", e.ci_low, e.ci_high),
        ),
        Some(MeasureResult { undefined, .. }) => {
            Cell::undefined(undefined.clone().unwrap_or_else(|| "undefined".into()))
        }
        None => Cell::undefined("not computed"),
    }
}

fn corrected_rows(t: &mut Table, d: &DimensionReport) {
    for c in &d.corrected_pass_rates {
        let head = [
            Cell::new(&d.dimension),
            Cell::new(&c.judge),
            Cell::new(format!("≥ {}", c.threshold)),
        ];
        let tail = [
            Cell::new(c.run_items.to_string()),
            Cell::new(c.calibration_items.to_string()),
        ];
        let middle = match (&c.result, &c.undefined) {
            (Some(r), _) => vec![
                Cell::new(format!("{:.1}%", r.observed * 100.0)),
                Cell::new(format!("{:.2}", r.sensitivity)),
                Cell::new(format!("{:.2}", r.specificity)),
                Cell::percent(Some(&r.corrected)),
            ],
            (None, why) => {
                let why = why.clone().unwrap_or_else(|| "undefined".into());
                vec![
                    Cell::undefined(why.clone()),
                    Cell::undefined(why.clone()),
                    Cell::undefined(why.clone()),
                    Cell::undefined(why),
                ]
            }
        };
        t.push(head.into_iter().chain(middle).chain(tail).collect());
    }
}

/// The run's accuracy corrected against the newest review set that measured the scoring's own decisions.
pub(crate) fn corrected_accuracy(run: &RunData) -> Option<(&str, &nmb_stats::Estimate)> {
    run.calibrations.iter().rev().find_map(|c| {
        let d = c
            .report
            .dimensions
            .iter()
            .find(|d| d.dimension == nmb_review::VERDICT_DIMENSION)?;
        let rate = d
            .corrected_pass_rates
            .iter()
            .find(|r| r.judge == nmb_review::GRADER)?;
        Some((c.set_id.as_str(), &rate.result.as_ref()?.corrected))
    })
}

/// The headline's accuracy cell suffix: the corrected rate, when a review measured the grader.
pub(crate) fn corrected_note(run: &RunData) -> Option<String> {
    corrected_accuracy(run).map(|(set, e)| {
        format!(
            "clinician-corrected {:.1}% [{:.1}–{:.1}] (review {set})",
            e.value * 100.0,
            e.ci_low * 100.0,
            e.ci_high * 100.0
        )
    })
}

/// The section in HTML (empty when no review covers any run).
pub(crate) fn html(runs: &[RunData]) -> String {
    html_of(tables(runs))
}

/// One run's "Judges against clinicians" section in HTML, for pages outside the report (`nmb serve`'s run
/// page); empty without calibrations. Uses the report's table classes (`muted`, `num`, `ci`).
pub fn review_section_html(run_name: &str, calibrations: &[RunCalibration]) -> String {
    html_of(calibrations.iter().map(|c| one(run_name, c)).collect())
}

fn html_of(all: Vec<CalibrationTables>) -> String {
    if all.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2 id=\"review\">Judges against clinicians</h2>");
    for t in all {
        h.push_str(&format!("<h3>{}</h3>", crate::html::escape(&t.title)));
        for n in &t.notes {
            h.push_str(&format!(
                "<p class=\"muted\">{}</p>",
                crate::html::escape(n)
            ));
        }
        h.push_str(&t.agreement.html());
        h.push_str(&t.corrected.html());
    }
    h
}

/// The section in Markdown (empty when no review covers any run).
pub(crate) fn markdown(runs: &[RunData]) -> String {
    let all = tables(runs);
    if all.is_empty() {
        return String::new();
    }
    let mut m = String::from("## Judges against clinicians\n\n");
    for t in all {
        m.push_str(&format!("### {}\n\n", t.title));
        for n in &t.notes {
            m.push_str(&format!("> {n}\n\n"));
        }
        m.push_str(&t.agreement.markdown());
        m.push('\n');
        m.push_str(&t.corrected.markdown());
        m.push('\n');
    }
    m
}
