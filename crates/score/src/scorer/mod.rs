//! Scoring one stored run: parse every answer, match it, ask the judges what the rules could not decide, grade
//! with the rubric, classify wrong answers, compute BERTScore, aggregate with CIs.

mod bertscore;
mod criteria;
mod grade;
mod prepare;
mod report;
mod resolve;
mod taxonomy;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use nmb_chat::GenParams;
use nmb_requests::Scheduler;
use nmb_stats::{BootstrapConfig, Measure};
use nmb_store::{SampleRecord, Store};
use nmb_suite::{Case, Suite, Task};

use crate::labels::HumanLabels;
use crate::lexicon::builtin;
use crate::matching::RuleVerdict;
use crate::semantic::BertScoreSetting;
use crate::ScoreError;
use bertscore::bertscore;
use grade::grade_rubric;
use grade::rubric_agreement;
pub(crate) use grade::turn_answers;
use nmb_judges::judge::{default_judge_params, JudgeModel, Panel};
use nmb_judges::jury::{agreement_rows, Jury};
use nmb_judges::prompts::Field;
use nmb_results::rubric::Rubric;
use nmb_results::{
    Aggregation, HumanLabelsInfo, JuryAgreement, LabelSource, SampleScore, ScoreReport,
    TaxonomyConfig,
};
use prepare::prepare;
use report::build_report;
pub(crate) use report::config_hash;
use report::scoring_config;
use resolve::equivalence_agreement;
use resolve::resolve_matches;
use taxonomy::classify_errors;

/// Entries of a ranked differential that are matched (pass@5).
pub const MAX_RANK: usize = 5;

/// How to score.
#[derive(Clone)]
pub struct ScoreOptions {
    /// No judges: inconclusive matches stay unresolved, and there is no rubric or taxonomy.
    pub judges: Vec<JudgeModel>,
    pub aggregation: Aggregation,
    pub judge_params: GenParams,
    /// Re-asks after an invalid judge answer.
    pub max_reasks: u32,
    /// Calls in flight per judge.
    pub judge_concurrency: usize,
    /// `None` skips rubric grading.
    pub rubric: Option<Rubric>,
    /// Ask judges for the error class of wrong answers.
    pub taxonomy: bool,
    pub human_labels: Option<PathBuf>,
    pub bertscore: BertScoreSetting,
    pub bootstrap: BootstrapConfig,
    /// The model's price, for the cost of structured answers per 1,000 images.
    pub price: Option<nmb_results::cost::Price>,
    /// Also read NeuroVLM-Bench answers the paper's way ([`crate::structured::paper`]).
    pub paper: Option<nmb_results::structured::paper::PaperOptions>,
    /// Judges see the thinking before each answer (rubric grading, error taxonomy); off: the answers alone.
    pub judge_sees_thinking: bool,
    /// Judges send through their providers' batch APIs.
    pub judge_batch: Option<nmb_record::BatchOptions>,
    /// Times each judge is asked each question (at least 1 is used).
    pub judge_repeats: u32,
    /// Judges decide the criteria of the tasks this rubric covers.
    pub criteria: Option<nmb_results::criteria::CriterionRubric>,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions {
            judges: Vec::new(),
            aggregation: Aggregation::Majority,
            judge_params: default_judge_params(),
            max_reasks: 2,
            judge_concurrency: 8,
            rubric: Some(Rubric::builtin()),
            taxonomy: true,
            human_labels: None,
            bertscore: BertScoreSetting::model(
                PathBuf::from(crate::semantic::DEFAULT_MODEL_DIR),
                None,
            ),
            bootstrap: BootstrapConfig::default(),
            price: None,
            paper: None,
            judge_sees_thinking: false,
            judge_batch: None,
            judge_repeats: 1,
            criteria: None,
        }
    }
}

/// One sample while it is being scored.
struct Work<'a> {
    record: &'a SampleRecord,
    case: &'a Case,
    task: &'a Task,
    score: SampleScore,
    /// Rule verdicts of the ranked entries examined (differential, rationale).
    rules: Vec<(u32, String, RuleVerdict)>,
    /// Lesion type and location rule verdicts with the candidate text.
    lesion_rules: Vec<(Field, Option<String>, Option<RuleVerdict>)>,
}

/// Scores `run_id` against `suite` (which must hold the tasks the run answered, with their answer key) with
/// judges already connected, and gives the report back without storing it.
pub async fn score_loaded(
    store: &Arc<Store>,
    scheduler: &Scheduler,
    run_id: &str,
    suite: &Suite,
    opts: &ScoreOptions,
) -> Result<ScoreReport, ScoreError> {
    let run = store.run(run_id)?;
    let records = store.run_samples(run_id)?;
    let lex = builtin();
    let index: HashMap<&str, (&Case, &Task)> = suite
        .tasks()
        .map(|(c, t)| (t.id.as_str(), (c, t)))
        .collect();
    let mut work = Vec::with_capacity(records.len());
    for r in &records {
        let (case, task) =
            index
                .get(r.task_id.as_str())
                .ok_or_else(|| ScoreError::UnknownTask {
                    run_id: run_id.to_string(),
                    task_id: r.task_id.clone(),
                    suite_id: suite.id.clone(),
                })?;
        work.push(prepare(lex, r, case, task));
    }
    let panel = if opts.judges.is_empty() {
        None
    } else {
        Some(Panel::open(
            store.clone(),
            scheduler.clone(),
            &opts.judges,
            &run,
            nmb_judges::judge::Asking {
                params: opts.judge_params.clone(),
                max_reasks: opts.max_reasks,
                concurrency: opts.judge_concurrency,
                batch: opts.judge_batch,
                repeats: opts.judge_repeats.max(1),
            },
        )?)
    };
    let specs: Vec<String> = panel.as_ref().map(|p| p.specs()).unwrap_or_default();
    let self_grading: Vec<bool> = (0..specs.len())
        .map(|j| panel.as_ref().is_some_and(|p| p.self_grading(j)))
        .collect();
    let jury = Jury {
        specs: &specs,
        self_grading: &self_grading,
        aggregation: opts.aggregation,
    };
    let mut failed = vec![0u64; specs.len()];
    let mut agreement: Vec<JuryAgreement> = Vec::new();
    let mut notes = Vec::new();

    let (equivalence, equivalence_repeats) =
        resolve_matches(panel.as_ref(), &jury, &mut work, &mut failed).await?;
    if specs.len() > 1 {
        agreement.extend(equivalence_agreement(&specs, &equivalence, &opts.bootstrap));
    }
    let unresolved = work.iter().filter(|w| w.score.unresolved).count();
    if unresolved > 0 && panel.is_none() {
        notes.push(format!(
            "{unresolved} answers need a judge to decide a match (granularity, related or unknown terms) and count \
             as wrong; score with --judge to resolve them"
        ));
    }
    let rubric = match (&panel, &opts.rubric) {
        (Some(p), Some(r)) => {
            let rows = grade_rubric(
                p,
                &jury,
                r,
                &mut work,
                &mut failed,
                opts.judge_sees_thinking,
            )
            .await?;
            if specs.len() > 1 {
                agreement.extend(rubric_agreement(r, &specs, &rows, &opts.bootstrap));
            }
            Some(r)
        }
        (None, Some(_)) => {
            notes.push("rubric grading skipped: it needs at least one --judge".into());
            None
        }
        _ => None,
    };
    let criteria = match (&panel, &opts.criteria) {
        (Some(p), Some(c)) => {
            criteria::grade_criteria(
                p,
                &jury,
                c,
                &mut work,
                &mut failed,
                opts.judge_sees_thinking,
            )
            .await?;
            Some(c)
        }
        (None, Some(_)) => {
            notes.push("criterion rubric skipped: it needs at least one --judge".into());
            None
        }
        _ => None,
    };
    let human = opts
        .human_labels
        .as_ref()
        .map(|p| HumanLabels::load(p, run_id))
        .transpose()?;
    let judged_taxonomy = opts.taxonomy && panel.is_some();
    if opts.taxonomy && panel.is_none() && human.is_none() {
        notes.push("error taxonomy skipped: it needs a --judge or --taxonomy-labels".into());
    }
    let tax_rows = classify_errors(
        if judged_taxonomy {
            panel.as_ref()
        } else {
            None
        },
        &jury,
        human.as_ref(),
        &mut work,
        &mut failed,
        opts.judge_sees_thinking,
    )
    .await?;
    if specs.len() > 1 && judged_taxonomy {
        agreement.extend(agreement_rows(
            "taxonomy",
            &[Measure::AlphaNominal, Measure::CohenKappa],
            &specs,
            &tax_rows,
            &opts.bootstrap,
        ));
    }
    let bert_config = bertscore(&opts.bertscore, &mut work)?;
    if let Some(reason) = &bert_config.skipped_reason {
        notes.push(format!("BERTScore not computed: {reason}"));
    }
    let judges = match &panel {
        Some(p) => p.finish(&failed)?,
        None => Vec::new(),
    };
    for j in judges.iter().filter(|j| j.self_grading) {
        notes.push(format!(
            "judge {} may be self-grading: {}",
            j.spec,
            j.self_grading_reason.as_deref().unwrap_or("")
        ));
    }
    let used_labels = human.as_ref().map(|h| {
        let used = work
            .iter()
            .filter(|w| {
                w.score
                    .taxonomy
                    .as_ref()
                    .is_some_and(|t| t.source == Some(LabelSource::Human))
            })
            .count();
        HumanLabelsInfo {
            path: h.path.display().to_string(),
            sha256: h.sha256.clone(),
            rows: h.rows,
            unused_rows: h.rows.saturating_sub(used),
        }
    });
    let samples: Vec<SampleScore> = work.into_iter().map(|w| w.score).collect();
    let config = scoring_config(
        &run,
        suite,
        opts,
        judges,
        rubric,
        criteria,
        bert_config,
        TaxonomyConfig {
            judged: judged_taxonomy,
            human_labels: used_labels,
        },
        lex,
    )?;
    if !config.suite_matches_run {
        notes.push(format!(
            "the suite scored against (hash {}) differs from the one the run was made with (hash {}): answer key or \
             content changed since",
            short(&config.suite_hash_scored),
            short(&config.suite_hash_run)
        ));
    }
    let mut report = build_report(run_id, config, samples, agreement, notes, &opts.bootstrap)?;
    if let Some(p) = panel.as_ref().filter(|p| p.repeats() > 1) {
        let dimensions = rubric.map(Rubric::dimension_ids).unwrap_or_default();
        report.stability = Some(crate::repeats::stability_report(
            &report.samples,
            &dimensions,
            &equivalence_repeats,
            &report.config.judges,
            p.repeat_seeds(),
            &opts.bootstrap,
        ));
    }
    if let Some(c) = criteria {
        let scored: Vec<nmb_results::criteria::score::Scored> = report
            .samples
            .iter()
            .filter_map(|s| {
                s.criteria
                    .as_ref()
                    .map(|result| nmb_results::criteria::score::Scored {
                        task_id: &s.task_id,
                        case_id: &s.case_id,
                        result,
                    })
            })
            .collect();
        report.criteria = Some(nmb_results::criteria::score::criteria_report(
            c,
            &scored,
            &opts.bootstrap,
        )?);
    }
    let tasks: HashMap<&str, &Task> = index.iter().map(|(id, (_, t))| (*id, *t)).collect();
    report.label_set =
        crate::label_set::label_set_report(&report.samples, &tasks, &opts.bootstrap)?;
    report.revision =
        crate::revision::revision_report(&mut report.samples, &records, &tasks, &opts.bootstrap)?;
    let items = structured_items(&records, &index);
    if let Some((mut structured, verdicts)) =
        crate::structured::structured_report(&items, opts.price, &opts.bootstrap)?
    {
        let errored = errored_structured(&records, &index);
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
    }
    Ok(report)
}

/// The paper's reading of the same answers ([`crate::structured::paper`]).
fn paper_reading(
    items: &[crate::structured::StructuredItem<'_>],
    errored: usize,
    price: Option<nmb_results::cost::Price>,
    options: nmb_results::structured::paper::PaperOptions,
) -> Option<nmb_results::structured::paper::PaperReport> {
    let items: Vec<_> = items
        .iter()
        .map(|i| crate::structured::paper::PaperItem {
            reference: i.reference,
            text: i.text,
            usage: i.usage,
        })
        .collect();
    crate::structured::paper::paper_report(&items, errored, price, options)
}

/// Errored samples of structured tasks with a reference: the error lines the paper's JSON-valid rate counts.
fn errored_structured(records: &[SampleRecord], index: &HashMap<&str, (&Case, &Task)>) -> usize {
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
    index: &HashMap<&str, (&'a Case, &'a Task)>,
) -> Vec<crate::structured::StructuredItem<'a>> {
    records
        .iter()
        .filter(|r| r.status == nmb_store::SampleStatus::Ok)
        .filter_map(|r| {
            let (case, task) = index.get(r.task_id.as_str())?;
            let reference = task.reference.as_ref()?;
            if task.family != nmb_suite::Family::Structured {
                return None;
            }
            Some(crate::structured::StructuredItem {
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

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}
