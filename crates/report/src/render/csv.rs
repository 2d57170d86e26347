//! CSV for pandas: one row per sample (`samples.csv`), one row per run and group (`aggregate.csv`), for runs
//! with NeuroVLM-Bench scores one row per run and number (`structured.csv`), and for prompt sweeps one row per
//! number (`sweep.csv`). Each is a [`Table`] of raw values (a CI as two columns, never as text) written by
//! [`Table::csv`].

use std::collections::BTreeSet;

use nmb_results::{Breakdown, GroupAggregate, SampleScore};
use nmb_stats::Estimate;

use crate::input::RunData;
use crate::sections::analysis::Analysis;
use crate::table::{Cell, Table};

const SAMPLE_COLUMNS: &[&str] = &[
    "run_id",
    "model",
    "model_spec",
    "suite_id",
    "task_id",
    "case_id",
    "family",
    "level",
    "sample_index",
    "status",
    "error_class",
    "correct",
    "unresolved",
    "parse_error",
    "matched_rank",
    "top_1",
    "top_5",
    "breadth_extracted",
    "extraction_failed",
    "token_recall",
    "exact_match",
    "rubric_overall",
    "bertscore_f",
    "taxonomy",
    "taxonomy_source",
    "turns",
    "cached_turns",
    "call_ids",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "structured_flags",
    "structured_fields",
    "answer",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn enum_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A table of plain text cells under `columns`, for CSV.
fn csv_table(columns: &[&str]) -> Table {
    let columns: Vec<(&str, bool)> = columns.iter().map(|c| (*c, false)).collect();
    Table::new("", &columns)
}

/// One CSV record.
fn record<S: Into<String>>(fields: impl IntoIterator<Item = S>) -> Vec<Cell> {
    fields.into_iter().map(Cell::new).collect()
}

/// Usage columns count every call a sample's turns used; a call that answered n samples appears in each of
/// their rows, so sum over distinct `call_ids` for totals.
pub fn samples(runs: &[RunData]) -> String {
    let mut t = csv_table(SAMPLE_COLUMNS);
    for r in runs {
        let scored = r.scored();
        for s in &r.samples {
            let sc: Option<&SampleScore> =
                scored.get(&(s.task_id.as_str(), s.sample_index)).copied();
            let calls: BTreeSet<i64> = s
                .turns
                .iter()
                .filter(|t| !t.cached)
                .map(|t| t.call.call_id)
                .collect();
            let fresh = s.turns.iter().filter(|t| !t.cached);
            let first_per_call = |t: &&nmb_store::TurnRecord| {
                s.turns
                    .iter()
                    .position(|u| u.call.call_id == t.call.call_id)
                    == s.turns.iter().position(|u| std::ptr::eq(u, *t))
            };
            let usage: Vec<&nmb_store::TurnRecord> = fresh.filter(first_per_call).collect();
            let sum = |f: fn(&nmb_store::CallInfo) -> Option<u64>| -> String {
                let v: Vec<u64> = usage.iter().filter_map(|t| f(&t.call)).collect();
                if v.is_empty() {
                    String::new()
                } else {
                    v.iter().fold(0u64, |a, b| a.saturating_add(*b)).to_string()
                }
            };
            let status = sc.map_or_else(|| s.status.as_str().to_string(), |x| enum_text(&x.status));
            let row: Vec<String> = vec![
                r.info.run_id.clone(),
                r.name(),
                r.model().to_string(),
                r.manifest.suite_id.clone(),
                s.task_id.clone(),
                sc.map_or(String::new(), |x| x.case_id.clone()),
                sc.map_or(String::new(), |x| x.family.as_str().to_string()),
                sc.map_or(String::new(), |x| x.level.as_str().to_string()),
                s.sample_index.to_string(),
                status,
                opt(s.error_class.as_ref()),
                opt(sc.and_then(|x| x.correct)),
                opt(sc.map(|x| x.unresolved)),
                opt(sc.and_then(|x| x.parse_error.as_ref())),
                opt(sc
                    .and_then(|x| x.diagnosis.as_ref())
                    .and_then(|d| d.matched_rank)),
                opt(sc.and_then(|x| x.diagnosis.as_ref()).map(|d| d.top_1)),
                opt(sc.and_then(|x| x.diagnosis.as_ref()).map(|d| d.top_5)),
                opt(sc
                    .and_then(|x| x.breadth.as_ref())
                    .and_then(|b| b.extracted.clone())),
                opt(sc
                    .and_then(|x| x.breadth.as_ref())
                    .map(|b| b.extraction_failed)),
                opt(sc
                    .and_then(|x| x.breadth.as_ref())
                    .and_then(|b| b.token_recall)),
                opt(sc
                    .and_then(|x| x.breadth.as_ref())
                    .and_then(|b| b.exact_match)),
                opt(sc.and_then(|x| x.rubric.as_ref()).and_then(|x| x.overall)),
                opt(sc.and_then(|x| x.bertscore.as_ref()).map(|b| b.f)),
                opt(sc
                    .and_then(|x| x.taxonomy.as_ref())
                    .and_then(|t| t.category)
                    .map(|c| c.as_str())),
                opt(sc
                    .and_then(|x| x.taxonomy.as_ref())
                    .and_then(|t| t.source)
                    .map(|c| enum_text(&c))),
                s.turns.len().to_string(),
                s.turns.iter().filter(|t| t.cached).count().to_string(),
                calls
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(";"),
                sum(|c| c.tokens_in),
                sum(|c| c.tokens_out),
                sum(|c| c.latency_ms),
                structured_flags(sc),
                structured_fields(sc),
                s.final_text.clone().unwrap_or_default(),
            ];
            t.push(record(row));
        }
    }
    t.csv()
}

/// The safety flags a structured answer raised, `;`-separated.
fn structured_flags(sc: Option<&SampleScore>) -> String {
    sc.and_then(|x| x.structured.as_ref())
        .map_or(String::new(), |v| v.flags.join(";"))
}

/// `field=outcome` for each scored field of a structured answer, `;`-separated.
fn structured_fields(sc: Option<&SampleScore>) -> String {
    let Some(v) = sc.and_then(|x| x.structured.as_ref()) else {
        return String::new();
    };
    v.fields
        .iter()
        .map(|(f, o)| format!("{f}={}", enum_text(o)))
        .collect::<Vec<_>>()
        .join(";")
}

const AGGREGATE_COLUMNS: &[&str] = &[
    "run_id",
    "model",
    "model_spec",
    "suite_id",
    "by",
    "level",
    "family",
    "disease_group",
    "modality",
    "tasks",
    "cases",
    "samples",
    "n",
    "correct",
    "errored",
    "pending",
    "no_reference",
    "parse_failed",
    "unresolved",
    "pass_at_1_a",
    "pass_at_1_a_low",
    "pass_at_1_a_high",
    "pass_at_5_a",
    "pass_at_5_a_low",
    "pass_at_5_a_high",
    "pass_at_1_b",
    "pass_at_1_b_low",
    "pass_at_1_b_high",
    "pass_at_5_b",
    "pass_at_5_b_low",
    "pass_at_5_b_high",
    "accuracy",
    "accuracy_low",
    "accuracy_high",
    "token_recall",
    "exact_match",
    "extraction_failures",
    "rubric_overall",
    "bertscore_f",
    "tokens_in",
    "tokens_out",
    "cost_usd",
];

fn est(e: Option<&Estimate>) -> [String; 3] {
    match e {
        Some(e) => [
            e.value.to_string(),
            e.ci_low.to_string(),
            e.ci_high.to_string(),
        ],
        None => Default::default(),
    }
}

pub fn aggregate(runs: &[RunData], analysis: &Analysis) -> String {
    let mut t = csv_table(AGGREGATE_COLUMNS);
    for (r, cost) in runs.iter().zip(&analysis.costs) {
        let Some(s) = &r.scores else { continue };
        let groups = std::iter::once(&s.overall)
            .chain(&s.by_level_family)
            .chain(&s.by_family)
            .chain(&s.by_level)
            .chain(&s.by_disease_group)
            .chain(&s.by_modality);
        for g in groups {
            let overall = g.by == Breakdown::Overall;
            let mut row = vec![
                r.info.run_id.clone(),
                r.name(),
                r.model().to_string(),
                r.manifest.suite_id.clone(),
                enum_text(&g.by),
                opt(g.level.map(|l| l.as_str())),
                opt(g.family.map(|f| f.as_str())),
                opt(g.disease_group.as_ref()),
                opt(g.modality.as_ref()),
            ];
            row.extend(counts(g));
            row.extend(est(g.pass_at_1.unbiased_estimator.as_ref()));
            row.extend(est(g.pass_at_5.unbiased_estimator.as_ref()));
            row.extend(est(g.pass_at_1.top_k_in_answer.as_ref()));
            row.extend(est(g.pass_at_5.top_k_in_answer.as_ref()));
            row.extend(est(g.accuracy.as_ref()));
            let b = g.breadth.as_ref();
            row.push(opt(b
                .and_then(|b| b.token_recall.as_ref())
                .map(|e| e.value)));
            row.push(opt(b.and_then(|b| b.exact_match.as_ref()).map(|e| e.value)));
            row.push(opt(b.map(|b| b.extraction_failures)));
            row.push(opt(g
                .rubric
                .as_ref()
                .and_then(|x| x.overall.as_ref())
                .map(|e| e.value)));
            row.push(opt(g
                .bertscore
                .as_ref()
                .and_then(|x| x.f.as_ref())
                .map(|e| e.value)));
            // Usage and cost belong to the run as a whole.
            row.push(if overall {
                cost.tokens_in.to_string()
            } else {
                String::new()
            });
            row.push(if overall {
                cost.tokens_out.to_string()
            } else {
                String::new()
            });
            row.push(if overall {
                opt(cost.dollars)
            } else {
                String::new()
            });
            t.push(record(row));
        }
    }
    t.csv()
}

fn counts(g: &GroupAggregate) -> Vec<String> {
    [
        g.tasks,
        g.cases,
        g.samples,
        g.n,
        g.correct,
        g.errored,
        g.pending,
        g.no_reference,
        g.parse_failed,
        g.unresolved,
    ]
    .iter()
    .map(usize::to_string)
    .collect()
}

const STRUCTURED_COLUMNS: &[&str] = &[
    "run_id", "model", "section", "field", "class", "metric", "value", "ci_low", "ci_high", "n",
];

/// `structured.csv`: one row per run and NeuroVLM-Bench number, or `None` when no run has structured scores.
pub fn structured(runs: &[RunData], analysis: &Analysis) -> Option<String> {
    let sections = crate::sections::neurovlm::sections(runs, analysis);
    if sections.is_empty() {
        return None;
    }
    let mut t = csv_table(STRUCTURED_COLUMNS);
    for s in &sections {
        for row in crate::sections::neurovlm::rows(s) {
            let (lo, hi) = row.ci.map_or((None, None), |(l, h)| (Some(l), Some(h)));
            t.push(record([
                s.run.info.run_id.clone(),
                s.run.name(),
                row.section.to_string(),
                row.field,
                row.class,
                row.metric,
                opt(row.value),
                opt(lo),
                opt(hi),
                opt(row.n),
            ]));
        }
    }
    Some(t.csv())
}

const SWEEP_COLUMNS: &[&str] = &[
    "suite_id",
    "suite_hash",
    "metric",
    "statistic",
    "model",
    "model_spec",
    "variant",
    "template_hash",
    "run_id",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "detail",
];

/// `sweep.csv`: every prompt-sensitivity number (per model and variant its score, per model its range and SD,
/// per suite and score Kendall's W and each rank flip), or `None` without a prompt sweep.
pub fn sweep(analysis: &Analysis) -> Option<String> {
    if analysis.sweep.is_empty() {
        return None;
    }
    let mut t = csv_table(SWEEP_COLUMNS);
    for r in crate::sections::sweep::rows(&analysis.sweep) {
        let [value, low, high] = est(r.estimate.as_ref());
        t.push(record([
            r.suite_id,
            r.suite_hash,
            r.metric.to_string(),
            r.statistic.to_string(),
            r.model,
            r.model_spec,
            r.variant,
            r.template_hash,
            r.run_id,
            value,
            low,
            high,
            opt(r.estimate.as_ref().map(|e| e.n)),
            r.detail,
        ]));
    }
    Some(t.csv())
}
