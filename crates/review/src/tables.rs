//! Judges against clinicians, as tables: for each review set over a run, how well each judge agrees with the
//! clinicians' consensus, and each judge-decided pass rate beside its Rogan–Gladen corrected rate. Built once
//! here so that the report (HTML and Markdown) and `nmb serve`'s run page show the same section.

use nmb_calibration::{DimensionReport, MeasureResult};
use nmb_stats::Measure;
use nmb_table::{escape, Cell, Table};

use crate::RunCalibration;

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
pub struct CalibrationTables {
    pub title: String,
    pub agreement: Table,
    pub corrected: Table,
    pub notes: Vec<String>,
    /// One sentence per judge leaning (length bias, self-preference), with its interval.
    pub bias: Vec<String>,
}

/// The tables of one review set over the run shown as `run_name`.
pub fn tables(run_name: &str, c: &RunCalibration) -> CalibrationTables {
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
    let mut notes = c.notes.clone();
    for d in &report.dimensions {
        let standing = d.standings.iter().map(|s| &s.sentence);
        notes.extend(standing.map(|s| format!("On {}: {s}", d.dimension)));
        let calibrated = d.calibrated_rates.iter().filter(|c| c.result.is_some());
        notes.extend(calibrated.map(|c| format!("On {}: {}", d.dimension, c.sentence)));
    }
    if let Some(criteria) = &report.criteria {
        notes.extend(
            criteria
                .sentences()
                .into_iter()
                .map(|s| format!("On criteria: {s}")),
        );
    }
    CalibrationTables {
        title,
        agreement,
        corrected,
        notes,
        bias: c.bias.iter().flat_map(|b| b.sentences.clone()).collect(),
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
                Cell::estimate(
                    r.corrected.value,
                    r.corrected.ci_low,
                    r.corrected.ci_high,
                    100.0,
                    1,
                    "%",
                ),
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

/// The section in HTML ("Judges against clinicians"), empty without tables; every text escaped.
pub fn section_html(all: &[CalibrationTables]) -> String {
    if all.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2 id=\"review\">Judges against clinicians</h2>");
    for t in all {
        h.push_str(&format!("<h3>{}</h3>", escape(&t.title)));
        for n in &t.notes {
            h.push_str(&format!("<p class=\"muted\">{}</p>", escape(n)));
        }
        h.push_str(&t.agreement.html());
        h.push_str(&t.corrected.html());
        if !t.bias.is_empty() {
            h.push_str("<h4>How the judges lean</h4><ul>");
            for s in &t.bias {
                h.push_str(&format!("<li>{}</li>", escape(s)));
            }
            h.push_str("</ul>");
        }
    }
    h
}

/// The section in Markdown, empty without tables.
pub fn section_markdown(all: &[CalibrationTables]) -> String {
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
        if !t.bias.is_empty() {
            m.push_str("#### How the judges lean\n\n");
            for s in &t.bias {
                m.push_str(&format!("- {s}\n"));
            }
            m.push('\n');
        }
    }
    m
}
