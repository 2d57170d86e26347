//! The report's sections built after the aggregates: the judges' stability across repeats, the criterion
//! rubric's numbers, label sets, revision across consult turns, and NeuroVLM-Bench's structured numbers (with the
//! paper's reading when asked for).

use std::collections::HashMap;

use nmb_results::cost::Price;
use nmb_results::criteria::score::{criteria_report, Scored};
use nmb_results::structured::paper::{PaperOptions, PaperReport};
use nmb_results::ScoreReport;
use nmb_store::SampleRecord;
use nmb_suite::Task;

use super::judging::Judged;
use super::{ScoreOptions, TaskIndex};
use crate::structured::paper::{paper_report, PaperItem};
use crate::structured::{structured_report, StructuredItem};
use crate::ScoreError;

/// Adds every section to `report`, scored from `records` of the tasks in `index`; `repeat_seeds` are the
/// judges' repeats' seeds when each was asked more than once.
pub(super) fn add_sections(
    report: &mut ScoreReport,
    judged: &Judged<'_>,
    repeat_seeds: Option<Vec<u64>>,
    records: &[SampleRecord],
    index: &TaskIndex<'_>,
    opts: &ScoreOptions,
) -> Result<(), ScoreError> {
    if let Some(seeds) = repeat_seeds {
        stability(report, judged, seeds, opts);
    }
    if let Some(c) = judged.criteria {
        let scored: Vec<Scored> = report
            .samples
            .iter()
            .filter_map(|s| {
                let result = s.criteria.as_ref()?;
                Some(Scored {
                    task_id: &s.task_id,
                    case_id: &s.case_id,
                    result,
                })
            })
            .collect();
        report.criteria = Some(criteria_report(c, &scored, &opts.bootstrap)?);
    }
    let tasks: HashMap<&str, &Task> = index.iter().map(|(id, (_, t))| (*id, *t)).collect();
    report.label_set =
        crate::label_set::label_set_report(&report.samples, &tasks, &opts.bootstrap)?;
    report.revision =
        crate::revision::revision_report(&mut report.samples, records, &tasks, &opts.bootstrap)?;
    structured(report, records, index, opts)
}

/// How steady each judge was across its repeats.
fn stability(report: &mut ScoreReport, judged: &Judged<'_>, seeds: Vec<u64>, opts: &ScoreOptions) {
    let dimensions = judged.rubric.map(|r| r.dimension_ids()).unwrap_or_default();
    report.stability = Some(crate::repeats::stability_report(
        &report.samples,
        &dimensions,
        &judged.equivalence_repeats,
        &report.config.judges,
        seeds,
        &opts.bootstrap,
    ));
}

/// NeuroVLM-Bench's numbers and each structured answer's verdict, when the run has structured tasks.
fn structured(
    report: &mut ScoreReport,
    records: &[SampleRecord],
    index: &TaskIndex<'_>,
    opts: &ScoreOptions,
) -> Result<(), ScoreError> {
    let items = structured_items(records, index);
    let Some((mut structured, verdicts)) = structured_report(&items, opts.price, &opts.bootstrap)?
    else {
        return Ok(());
    };
    let errored = errored_structured(records, index);
    structured.paper = opts
        .paper
        .and_then(|o| paper_reading(&items, errored, opts.price, o));
    let mut by_sample: HashMap<(&str, u32), _> = items
        .iter()
        .map(|i| (i.task_id, i.sample_index))
        .zip(verdicts)
        .collect();
    for s in &mut report.samples {
        s.structured = by_sample.remove(&(s.task_id.as_str(), s.sample_index));
    }
    report.structured = Some(structured);
    Ok(())
}

/// The paper's reading of the same answers ([`crate::structured::paper`]).
fn paper_reading(
    items: &[StructuredItem<'_>],
    errored: usize,
    price: Option<Price>,
    options: PaperOptions,
) -> Option<PaperReport> {
    let items: Vec<_> = items
        .iter()
        .map(|i| PaperItem {
            reference: i.reference,
            text: i.text,
            usage: i.usage,
        })
        .collect();
    paper_report(&items, errored, price, options)
}

/// Errored samples of structured tasks with a reference: the error lines the paper's JSON-valid rate counts.
fn errored_structured(records: &[SampleRecord], index: &TaskIndex<'_>) -> usize {
    let structured = |r: &&SampleRecord| {
        index.get(r.task_id.as_str()).is_some_and(|(_, t)| {
            t.family == nmb_suite::Family::Structured && t.reference.is_some()
        })
    };
    records
        .iter()
        .filter(|r| r.status == nmb_store::SampleStatus::Errored)
        .filter(structured)
        .count()
}

/// The answered samples of `structured` tasks, with their case, reference, latency and tokens.
fn structured_items<'a>(
    records: &'a [SampleRecord],
    index: &TaskIndex<'a>,
) -> Vec<StructuredItem<'a>> {
    records
        .iter()
        .filter(|r| r.status == nmb_store::SampleStatus::Ok)
        .filter_map(|r| {
            let (case, task) = index.get(r.task_id.as_str())?;
            let reference = task.reference.as_ref()?;
            if task.family != nmb_suite::Family::Structured {
                return None;
            }
            Some(StructuredItem {
                task_id: r.task_id.as_str(),
                sample_index: r.sample_index,
                case_id: case.id.as_str(),
                reference,
                text: nmb_chat::split_thinking(r.final_text.as_deref()?).answer,
                usage: nmb_results::structured::Usage::of(case.id.as_str(), r),
            })
        })
        .collect()
}
