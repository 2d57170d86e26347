//! The NeuroVLM-Bench section: per run with structured scores, the tables of [`crate::sections::neurovlm`], the
//! diagnosis_name confusion heat map and the reliability diagram of the stated confidence.

use std::fmt::Write;

use super::escape;
use crate::input::RunData;
use crate::render::svg;
use crate::sections::analysis::Analysis;
use crate::sections::neurovlm::{self, Section};
use crate::table::Table;

pub(super) fn neurovlm(h: &mut String, runs: &[RunData], analysis: &Analysis) {
    let sections = neurovlm::sections(runs, analysis);
    if sections.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"neurovlm\">NeuroVLM-Bench</h2><p class=\"muted\">Structured answers (one image, one JSON object \
         with nine keys), read strictly: nothing is repaired. Every rate carries a 95% bootstrap CI that resamples \
         cases.</p>",
    );
    for s in &sections {
        run_section(h, s);
    }
}

fn run_section(h: &mut String, s: &Section) {
    let _ = write!(
        h,
        "<section class=\"neurovlm\"><h3>{} · {}</h3>",
        escape(&s.run.name()),
        escape(&s.run.manifest.suite_id)
    );
    part(h, "overview", "Answers", &neurovlm::overview(s));
    part(
        h,
        "fields",
        "Per-field metrics",
        &neurovlm::field_metrics(s),
    );
    if let (Some(fields), Some(totals)) = (neurovlm::paper_reading(s), neurovlm::paper_totals(s)) {
        part(h, "paper", "nmb's reading and the paper's", &fields);
        part(
            h,
            "paper-totals",
            "Validity and calibration in both readings",
            &totals,
        );
    }
    if let Some(t) = neurovlm::per_class(s, "diagnosis_name") {
        part(h, "classes", "diagnosis_name by class", &t);
    }
    confusion(h, s);
    calibration(h, s);
    part(h, "safety", "Safety flags", &neurovlm::safety(s));
    part(h, "abstentions", "Abstentions", &neurovlm::abstentions(s));
    part(
        h,
        "key-abstentions",
        "Abstentions by answer key",
        &neurovlm::key_abstentions(s),
    );
    part(
        h,
        "efficiency",
        "Efficiency",
        &neurovlm::efficiency_table(s),
    );
    h.push_str("</section>");
}

/// A titled table in a block whose class names it (`nv-fields`), so a reader or a test can find it.
fn part(h: &mut String, kind: &str, heading: &str, table: &Table) {
    let _ = write!(
        h,
        "<div class=\"nv-{kind}\"><h4>{}</h4>{}</div>",
        escape(heading),
        table.html()
    );
}

fn confusion(h: &mut String, s: &Section) {
    let c = &s.report.confusion;
    let extra = c.columns.len().saturating_sub(c.classes.len());
    let chart = svg::heatmap(
        &format!("diagnosis_name confusion · {}", s.run.name()),
        "Rows are reference classes, columns the class answered, then abstentions and invalid or missing classes; \
         each cell gives its count and is shaded by its share of the row.",
        &c.classes,
        &c.columns,
        &c.counts,
        extra,
    );
    let _ = write!(
        h,
        "<div class=\"nv-confusion\"><h4>diagnosis_name confusion matrix</h4>{chart}</div>"
    );
}

fn calibration(h: &mut String, s: &Section) {
    h.push_str("<div class=\"nv-calibration\"><h4>Calibration of diagnosis_confidence</h4>");
    match (neurovlm::calibration(s), &s.report.calibration) {
        (Some(table), Some(c)) => {
            h.push_str(&table.html());
            h.push_str("<div class=\"charts\">");
            h.push_str(&svg::reliability(
                &format!("Reliability · {}", s.run.name()),
                "Accuracy of diagnosis_name against the mean stated diagnosis_confidence in 10 equal-width bins; \
                 dot area by the answers in the bin; the dashed diagonal is perfect calibration.",
                &c.bins,
            ));
            let _ = write!(
                h,
                "</div><details><summary class=\"muted\">reliability bins</summary>{}</details>",
                neurovlm::reliability_bins(&c.bins).html()
            );
        }
        _ => {
            let _ = write!(
                h,
                "<p class=\"muted\">No answer gave a usable diagnosis_confidence ({} left out: missing or outside \
                 [0, 1]).</p>",
                s.report.calibration_excluded
            );
        }
    }
    h.push_str("</div>");
}
