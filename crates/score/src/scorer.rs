//! Scoring one stored run: parse every answer, match it, ask the judges what the rules could not decide, grade
//! with the rubric, classify wrong answers, compute BERTScore, aggregate with CIs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use nmb_plan::chat::GenParams;
use nmb_requests::Scheduler;
use nmb_stats::{BootstrapConfig, Measure};
use nmb_store::{canonical_json, RunInfo, SampleRecord, Store};
use nmb_suite::{Case, Family, Level, Suite, Task};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::aggregate::{aggregate, task_scores, GroupKey};
use crate::breadth::{self, BreadthError};
use crate::judge::{default_judge_params, Answer, JudgeModel, Panel, Question};
use crate::jury::{agreement_rows, Jury};
use crate::labels::HumanLabels;
use crate::lexicon::{builtin, Lexicon};
use crate::matching::{match_diagnosis, match_lesion_type, match_location, RuleVerdict};
use crate::parse::{parse_answer, ranked_diagnoses};
use crate::prompts::{self, Context, Equivalence, Field, TaxonomyLabel};
use crate::results::{
    Aggregation, Breakdown, CandidateMatch, DiagnosisScore, DimensionScore, FieldMatch,
    GroupAggregate, HumanLabelsInfo, JudgeDecision, JudgeInfo, JuryAgreement, LabelSource,
    LesionScore, MatchMethod, MatchOutcome, MatchingConfig, RubricResult, SampleScore,
    SampleStatus, ScoreReport, ScoringConfig, TaskScore, TaxonomyConfig, TaxonomyResult, KS,
    SCHEMA_VERSION,
};
use crate::rubric::{Grade, Rubric};
use crate::semantic::{score_pairs, BertScoreSetting};
use crate::ScoreError;

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
            bertscore: BertScoreSetting::Model {
                dir: PathBuf::from(crate::semantic::DEFAULT_MODEL_DIR),
                layer: None,
            },
            bootstrap: BootstrapConfig::default(),
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

/// Scores `run_id` against `suite` (which must hold the tasks the run answered, with their answer key).
pub async fn score_run(
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
            opts.judge_params.clone(),
            opts.max_reasks,
            opts.judge_concurrency,
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

    let equivalence = resolve_matches(panel.as_ref(), &jury, &mut work, &mut failed).await?;
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
            let rows = grade_rubric(p, &jury, r, &mut work, &mut failed).await?;
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
    build_report(run_id, config, samples, agreement, notes, &opts.bootstrap)
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

// ---------------------------------------------------------------------------------------------------------------
// Per sample, before any judge

fn prepare<'a>(
    lex: &Lexicon,
    record: &'a SampleRecord,
    case: &'a Case,
    task: &'a Task,
) -> Work<'a> {
    let mut score = SampleScore {
        task_id: task.id.clone(),
        sample_index: record.sample_index,
        case_id: case.id.clone(),
        family: task.family,
        level: task.level,
        disease_group: task
            .metadata
            .get("disease_group")
            .or_else(|| case.metadata.get("disease_group"))
            .cloned(),
        modality: modality(case, task),
        case_metadata: case.metadata.clone(),
        status: SampleStatus::Ok,
        error_class: None,
        parsed: None,
        parse_error: None,
        correct: None,
        unresolved: false,
        diagnosis: None,
        lesion: None,
        rubric: None,
        bertscore: None,
        taxonomy: None,
        breadth: None,
    };
    let mut w = Work {
        record,
        case,
        task,
        score: score.clone(),
        rules: Vec::new(),
        lesion_rules: Vec::new(),
    };
    match record.status {
        nmb_store::SampleStatus::Errored => {
            score.status = SampleStatus::Errored;
            score.error_class = record.error_class.clone();
            w.score = score;
            return w;
        }
        nmb_store::SampleStatus::Pending => {
            score.status = SampleStatus::Pending;
            w.score = score;
            return w;
        }
        nmb_store::SampleStatus::Ok => {}
    }
    let text = record.final_text.clone().unwrap_or_default();
    if !task.family.is_depth() {
        match breadth::score_answer(task, &text) {
            Ok(v) => {
                score.correct = Some(v.correct);
                score.breadth = Some(v);
            }
            Err(BreadthError::NoReference) | Err(BreadthError::NotBreadth(_)) => {
                score.status = SampleStatus::NoReference;
            }
        }
        w.score = score;
        return w;
    }
    let reference = task.reference.clone().unwrap_or_default();
    let has_reference = match task.family {
        Family::Lesion => reference.lesion_type.is_some() || reference.lesion_location.is_some(),
        _ => reference.diagnosis.is_some(),
    };
    if !has_reference {
        score.status = SampleStatus::NoReference;
        w.score = score;
        return w;
    }
    let parsed = parse_answer(task.family, &text);
    score.parsed = Some(parsed.answer.clone());
    if let Some(e) = parsed.error {
        score.status = SampleStatus::ParseFailed;
        score.parse_error = Some(e.to_string());
        score.correct = Some(false);
        w.score = score;
        return w;
    }
    let answer = parsed.answer;
    match task.family {
        Family::Lesion => {
            for (field, cand, refr) in [
                (
                    Field::LesionType,
                    &answer.lesion_type,
                    &reference.lesion_type,
                ),
                (
                    Field::Location,
                    &answer.lesion_location,
                    &reference.lesion_location,
                ),
            ] {
                let verdict = refr.as_ref().map(|r| {
                    let c = cand.as_deref().unwrap_or("");
                    match field {
                        Field::LesionType => match_lesion_type(lex, c, r),
                        _ => match_location(lex, c, r),
                    }
                });
                w.lesion_rules.push((field, cand.clone(), verdict));
            }
        }
        _ => {
            let refr = reference.diagnosis.as_deref().unwrap_or("");
            for entry in ranked_diagnoses(&answer).into_iter().take(MAX_RANK) {
                let v = match_diagnosis(lex, &entry.diagnosis, refr, &reference.synonyms);
                let matched = v.outcome == MatchOutcome::Match;
                w.rules.push((entry.rank, entry.diagnosis, v));
                if matched {
                    break; // later entries cannot change the first matching rank
                }
            }
        }
    }
    w.score = score;
    w
}

/// Modalities of the case's images (turn images included), sorted and joined by `+`; `none` without images.
fn modality(case: &Case, task: &Task) -> String {
    let set: BTreeSet<String> = case
        .images
        .iter()
        .chain(task.turns.iter().flat_map(|t| t.images.iter()))
        .filter_map(|i| i.modality.map(|m| m.as_str().to_string()))
        .collect();
    if set.is_empty() {
        if case.images.is_empty() {
            "none".into()
        } else {
            "unknown".into()
        }
    } else {
        set.into_iter().collect::<Vec<_>>().join("+")
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Matching with judges

/// Per equivalence question: each judge's 0/1 answer (for agreement).
type EquivalenceRows = Vec<Vec<Option<f64>>>;

async fn resolve_matches(
    panel: Option<&Panel>,
    jury: &Jury<'_>,
    work: &mut [Work<'_>],
    failed: &mut [u64],
) -> Result<EquivalenceRows, ScoreError> {
    // Collect the distinct questions the rules left open.
    let mut questions: Vec<Question> = Vec::new();
    let mut slot: BTreeMap<String, usize> = BTreeMap::new();
    let mut ask = |q: Question| -> usize {
        *slot.entry(q.item_id.clone()).or_insert_with(|| {
            questions.push(q);
            questions.len() - 1
        })
    };
    let mut wanted: Vec<Vec<Option<usize>>> = Vec::new();
    let mut wanted_lesion: Vec<Vec<Option<usize>>> = Vec::new();
    for w in work.iter() {
        let reference = w.task.reference.clone().unwrap_or_default();
        let dx = reference.diagnosis.clone().unwrap_or_default();
        wanted.push(
            w.rules
                .iter()
                .map(|(_, cand, v)| {
                    (v.outcome == MatchOutcome::Inconclusive && panel.is_some()).then(|| {
                        ask(prompts::equivalence(
                            Field::Diagnosis,
                            cand,
                            &dx,
                            &reference.synonyms,
                        ))
                    })
                })
                .collect(),
        );
        wanted_lesion.push(
            w.lesion_rules
                .iter()
                .map(|(field, cand, v)| {
                    let open = v
                        .as_ref()
                        .is_some_and(|v| v.outcome == MatchOutcome::Inconclusive);
                    let refr = match field {
                        Field::LesionType => reference.lesion_type.clone(),
                        _ => reference.lesion_location.clone(),
                    };
                    (open && panel.is_some()).then(|| {
                        ask(prompts::equivalence(
                            *field,
                            cand.as_deref().unwrap_or(""),
                            refr.as_deref().unwrap_or(""),
                            &[],
                        ))
                    })
                })
                .collect(),
        );
    }
    let answers: Vec<Vec<Answer<Equivalence>>> = match panel {
        Some(p) if !questions.is_empty() => {
            p.ask(&questions, prompts::validate_equivalence).await?
        }
        _ => Vec::new(),
    };
    count_failures(&answers, failed);
    let decisions: Vec<JudgeDecision> = answers.iter().map(|a| jury.equivalence(a)).collect();
    for (i, w) in work.iter_mut().enumerate() {
        finish_diagnosis(w, &wanted[i], &decisions);
        finish_lesion(w, &wanted_lesion[i], &decisions);
    }
    Ok(answers
        .iter()
        .map(|row| {
            row.iter()
                .map(|a| a.value.as_ref().map(|v| f64::from(u8::from(v.equivalent))))
                .collect()
        })
        .collect())
}

fn count_failures<T>(answers: &[Vec<Answer<T>>], failed: &mut [u64]) {
    for row in answers {
        for (j, a) in row.iter().enumerate() {
            if a.value.is_none() {
                failed[j] += 1;
            }
        }
    }
}

/// Final outcome of a rule verdict after the judges: the rule's, else the jury's, else inconclusive.
fn settle(
    v: &RuleVerdict,
    decision: Option<&JudgeDecision>,
) -> (MatchOutcome, Option<MatchMethod>) {
    if v.outcome != MatchOutcome::Inconclusive {
        return (v.outcome, v.method);
    }
    match decision.and_then(|d| d.equivalent) {
        Some(true) => (MatchOutcome::Match, Some(MatchMethod::Judge)),
        Some(false) => (MatchOutcome::NoMatch, Some(MatchMethod::Judge)),
        None => (MatchOutcome::Inconclusive, None),
    }
}

fn finish_diagnosis(w: &mut Work, asked: &[Option<usize>], decisions: &[JudgeDecision]) {
    if w.rules.is_empty() && w.score.status != SampleStatus::Ok {
        return;
    }
    if !matches!(w.task.family, Family::Differential | Family::Rationale) {
        return;
    }
    let reference = w
        .task
        .reference
        .as_ref()
        .and_then(|r| r.diagnosis.clone())
        .unwrap_or_default();
    let mut candidates = Vec::new();
    let mut matched: Option<(u32, Option<MatchMethod>)> = None;
    for ((rank, cand, v), q) in w.rules.iter().zip(asked) {
        let decision = q.map(|q| &decisions[q]);
        let (outcome, method) = settle(v, decision);
        candidates.push(CandidateMatch {
            rank: *rank,
            diagnosis: cand.clone(),
            normalised: builtin().normalise(cand),
            outcome,
            method,
            matched: v.matched.clone(),
            rule_note: v.note.clone(),
            judge: decision.cloned(),
        });
        if outcome == MatchOutcome::Match {
            matched = Some((*rank, method));
            break;
        }
    }
    let first_open = candidates
        .first()
        .is_some_and(|c| c.outcome == MatchOutcome::Inconclusive);
    let rank = matched.map(|m| m.0);
    w.score.correct = Some(rank == Some(1));
    w.score.unresolved = first_open;
    w.score.diagnosis = Some(DiagnosisScore {
        reference,
        matched_rank: rank,
        method: matched.and_then(|m| m.1),
        top_1: rank.is_some_and(|r| r <= 1),
        top_5: rank.is_some_and(|r| r <= 5),
        candidates,
    });
}

fn finish_lesion(w: &mut Work, asked: &[Option<usize>], decisions: &[JudgeDecision]) {
    if w.task.family != Family::Lesion || w.score.status != SampleStatus::Ok {
        return;
    }
    let reference = w.task.reference.clone().unwrap_or_default();
    let mut fields: BTreeMap<Field, FieldMatch> = BTreeMap::new();
    for ((field, cand, v), q) in w.lesion_rules.iter().zip(asked) {
        let Some(v) = v else { continue };
        let decision = q.map(|q| &decisions[q]);
        let (outcome, method) = settle(v, decision);
        fields.insert(
            *field,
            FieldMatch {
                candidate: cand.clone(),
                outcome,
                method,
                rule_note: v.note.clone(),
                judge: decision.cloned(),
            },
        );
    }
    let all_match = fields.values().all(|f| f.outcome == MatchOutcome::Match);
    w.score.correct = Some(!fields.is_empty() && all_match);
    w.score.unresolved = fields
        .values()
        .any(|f| f.outcome == MatchOutcome::Inconclusive);
    w.score.lesion = Some(LesionScore {
        reference_type: reference.lesion_type,
        reference_location: reference.lesion_location,
        type_match: fields.remove(&Field::LesionType),
        location_match: fields.remove(&Field::Location),
    });
}

fn equivalence_agreement(
    specs: &[String],
    rows: &EquivalenceRows,
    cfg: &BootstrapConfig,
) -> Vec<JuryAgreement> {
    agreement_rows(
        "equivalence",
        &[Measure::AlphaNominal, Measure::CohenKappa],
        specs,
        rows,
        cfg,
    )
}

// ---------------------------------------------------------------------------------------------------------------
// Rubric

/// The answers of every turn of a sample, for judges.
fn turn_answers(record: &SampleRecord) -> Vec<String> {
    record
        .turns
        .iter()
        .map(|t| t.text.clone().unwrap_or_default())
        .collect()
}

/// Per rubric item: per dimension (rubric order, then overall) per judge.
type RubricRows = Vec<Vec<Vec<Option<f64>>>>;

async fn grade_rubric(
    panel: &Panel,
    jury: &Jury<'_>,
    rubric: &Rubric,
    work: &mut [Work<'_>],
    failed: &mut [u64],
) -> Result<RubricRows, ScoreError> {
    let targets: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, w)| w.score.status.is_scored() && w.task.family.is_depth())
        .map(|(i, _)| i)
        .collect();
    let questions: Vec<Question> = targets
        .iter()
        .map(|&i| {
            let w = &work[i];
            let answers = turn_answers(w.record);
            prompts::rubric(
                rubric,
                &Context {
                    case: w.case,
                    task: w.task,
                    answers: &answers,
                },
                w.record.sample_index,
            )
        })
        .collect();
    let answers: Vec<Vec<Answer<Grade>>> = if questions.is_empty() {
        Vec::new()
    } else {
        panel
            .ask(&questions, |t| prompts::validate_rubric(rubric, t))
            .await?
    };
    count_failures(&answers, failed);
    let dims = rubric.dimension_ids();
    let mut rows = Vec::new();
    for (&i, a) in targets.iter().zip(&answers) {
        let verdicts = jury.rubric_verdicts(a);
        let scores: Vec<DimensionScore> = dims
            .iter()
            .map(|d| DimensionScore {
                dimension: d.clone(),
                score: jury.combine_scores(
                    &verdicts
                        .iter()
                        .filter_map(|v| v.scores.get(d).copied())
                        .collect::<Vec<_>>(),
                ),
            })
            .collect();
        let overall = jury.combine_scores(
            &verdicts
                .iter()
                .filter_map(|v| v.overall)
                .collect::<Vec<_>>(),
        );
        let mut per_dim: Vec<Vec<Option<f64>>> = dims
            .iter()
            .map(|d| {
                verdicts
                    .iter()
                    .map(|v| v.scores.get(d).map(|s| f64::from(*s)))
                    .collect()
            })
            .collect();
        per_dim.push(verdicts.iter().map(|v| v.overall.map(f64::from)).collect());
        rows.push(per_dim);
        work[i].score.rubric = Some(RubricResult {
            rubric_id: rubric.id.clone(),
            rubric_version: rubric.version.clone(),
            rubric_hash: rubric.hash.clone(),
            aggregation: jury.aggregation,
            scores,
            overall,
            judges: verdicts,
        });
    }
    Ok(rows)
}

fn rubric_agreement(
    rubric: &Rubric,
    specs: &[String],
    rows: &RubricRows,
    cfg: &BootstrapConfig,
) -> Vec<JuryAgreement> {
    let mut names = rubric.dimension_ids();
    names.push("overall".into());
    let mut out = Vec::new();
    for (d, name) in names.iter().enumerate() {
        let items: Vec<Vec<Option<f64>>> = rows.iter().map(|r| r[d].clone()).collect();
        out.extend(agreement_rows(
            &format!("rubric:{name}"),
            &[
                Measure::AlphaInterval,
                Measure::Icc21,
                Measure::QuadraticKappa,
            ],
            specs,
            &items,
            cfg,
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Error taxonomy

async fn classify_errors(
    panel: Option<&Panel>,
    jury: &Jury<'_>,
    human: Option<&HumanLabels>,
    work: &mut [Work<'_>],
    failed: &mut [u64],
) -> Result<Vec<Vec<Option<f64>>>, ScoreError> {
    let wrong: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            w.score.status.is_scored() && w.task.family.is_depth() && w.score.correct == Some(false)
        })
        .map(|(i, _)| i)
        .collect();
    let mut answers: Vec<Vec<Answer<TaxonomyLabel>>> = Vec::new();
    if let Some(p) = panel {
        let questions: Vec<Question> = wrong
            .iter()
            .map(|&i| {
                let w = &work[i];
                let answers = turn_answers(w.record);
                prompts::taxonomy(
                    &Context {
                        case: w.case,
                        task: w.task,
                        answers: &answers,
                    },
                    w.record.sample_index,
                    &why_wrong(&w.score),
                )
            })
            .collect();
        if !questions.is_empty() {
            answers = p.ask(&questions, prompts::validate_taxonomy).await?;
        }
        count_failures(&answers, failed);
    }
    let mut rows = Vec::new();
    for (n, &i) in wrong.iter().enumerate() {
        let verdicts = answers
            .get(n)
            .map(|a| jury.taxonomy_verdicts(a))
            .unwrap_or_default();
        let s = &work[i].score;
        let human_label = human.and_then(|h| h.get(&s.task_id, s.sample_index));
        if answers.get(n).is_some() {
            rows.push(
                verdicts
                    .iter()
                    .map(|v| v.category.map(category_code))
                    .collect(),
            );
        }
        let result = match (human_label, jury.taxonomy_choice(&verdicts)) {
            (Some(h), _) => TaxonomyResult {
                category: Some(h.category),
                justification: h.justification.clone(),
                source: Some(LabelSource::Human),
                annotator: h.annotator.clone(),
                judges: verdicts,
            },
            (None, Some(j)) => TaxonomyResult {
                category: verdicts[j].category,
                justification: verdicts[j].justification.clone(),
                source: Some(LabelSource::Judge),
                annotator: None,
                judges: verdicts,
            },
            (None, None) if panel.is_some() => TaxonomyResult {
                category: None,
                justification: None,
                source: None,
                annotator: None,
                judges: verdicts,
            },
            (None, None) => continue,
        };
        work[i].score.taxonomy = Some(result);
    }
    Ok(rows)
}

/// Category codes for nominal agreement statistics.
fn category_code(c: crate::results::ErrorCategory) -> f64 {
    crate::results::ErrorCategory::ALL
        .iter()
        .position(|x| *x == c)
        .unwrap_or(0) as f64
}

/// What the automatic scoring found wrong, for the taxonomy judge.
fn why_wrong(s: &SampleScore) -> String {
    if let Some(e) = &s.parse_error {
        return format!("the answer could not be read: {e}");
    }
    if let Some(d) = &s.diagnosis {
        let lead = d
            .candidates
            .first()
            .map(|c| c.diagnosis.as_str())
            .unwrap_or("(none)");
        return match d.matched_rank {
            Some(r) => format!(
                "the leading diagnosis \"{lead}\" is not the reference \"{}\", which the answer ranks {r}",
                d.reference
            ),
            None => format!(
                "the leading diagnosis \"{lead}\" is not the reference \"{}\", which is not among its first {MAX_RANK}",
                d.reference
            ),
        };
    }
    if let Some(l) = &s.lesion {
        let part = |name: &str, m: &Option<FieldMatch>, r: &Option<String>| match (m, r) {
            (Some(m), Some(r)) => format!(
                "{name} \"{}\" vs reference \"{r}\": {}",
                m.candidate.as_deref().unwrap_or(""),
                match m.outcome {
                    MatchOutcome::Match => "matches",
                    MatchOutcome::NoMatch => "does not match",
                    MatchOutcome::Inconclusive => "undecided",
                }
            ),
            _ => String::new(),
        };
        return [
            part("lesion type", &l.type_match, &l.reference_type),
            part("location", &l.location_match, &l.reference_location),
        ]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    }
    "the answer does not match the reference".into()
}

// ---------------------------------------------------------------------------------------------------------------
// BERTScore

fn bertscore(
    setting: &BertScoreSetting,
    work: &mut [Work<'_>],
) -> Result<crate::results::BertScoreConfig, ScoreError> {
    let mut targets = Vec::new();
    let mut pairs = Vec::new();
    for (i, w) in work.iter().enumerate() {
        let reference = w.task.reference.as_ref().and_then(|r| r.rationale.clone());
        let answer = w
            .score
            .parsed
            .as_ref()
            .and_then(|p| p.rationale.clone())
            .filter(|r| !r.trim().is_empty());
        if let (true, Some(r), Some(a)) = (w.score.status.is_scored(), reference, answer) {
            targets.push(i);
            pairs.push((a, r));
        }
    }
    let (scores, config) = score_pairs(setting, &pairs)?;
    if let Some(scores) = scores {
        for (i, s) in targets.into_iter().zip(scores) {
            work[i].score.bertscore = Some(s);
        }
    }
    Ok(config)
}

// ---------------------------------------------------------------------------------------------------------------
// Config and report

#[allow(clippy::too_many_arguments)]
fn scoring_config(
    run: &RunInfo,
    suite: &Suite,
    opts: &ScoreOptions,
    judges: Vec<JudgeInfo>,
    rubric: Option<&Rubric>,
    bertscore: crate::results::BertScoreConfig,
    taxonomy: TaxonomyConfig,
    lex: &Lexicon,
) -> Result<ScoringConfig, ScoreError> {
    let suite_hash_run = run.manifest.suite_hash.clone();
    let suite_hash_scored = nmb_suite::suite_hash(suite)?;
    let mut config = ScoringConfig {
        nmb_version: env!("CARGO_PKG_VERSION").to_string(),
        config_hash: String::new(),
        judges,
        aggregation: opts.aggregation,
        judge_params: serde_json::to_value(&opts.judge_params).unwrap_or(Value::Null),
        max_reasks: opts.max_reasks,
        judge_prompts: prompts::template_versions(rubric),
        matching: MatchingConfig {
            lexicon_version: lex.version.clone(),
            max_rank: MAX_RANK,
            judge_for_inconclusive: !opts.judges.is_empty(),
        },
        rubric: rubric.map(Rubric::info),
        bertscore,
        taxonomy,
        bootstrap: opts.bootstrap,
        ks: KS.to_vec(),
        run_manifest: serde_json::to_value(&run.manifest).unwrap_or(Value::Null),
        suite_matches_run: suite_hash_run == suite_hash_scored,
        suite_hash_run,
        suite_hash_scored,
    };
    config.config_hash = config_hash(&config);
    Ok(config)
}

/// Hash of what determines the scores: everything in the config except outcomes (judge call totals, judge run
/// ids, whether BERTScore ended up computed).
fn config_hash(c: &ScoringConfig) -> String {
    let identity = json!({
        "nmb_version": c.nmb_version,
        "judges": c.judges.iter().map(|j| &j.spec).collect::<Vec<_>>(),
        "aggregation": c.aggregation,
        "judge_params": c.judge_params,
        "max_reasks": c.max_reasks,
        "judge_prompts": c.judge_prompts,
        "matching": c.matching,
        "rubric": c.rubric,
        "bertscore": {"model_dir": c.bertscore.model_dir, "layer": c.bertscore.layer, "off": c.bertscore.model_dir.is_none()},
        "taxonomy": {"judged": c.taxonomy.judged, "labels": c.taxonomy.human_labels.as_ref().map(|h| &h.sha256)},
        "bootstrap": c.bootstrap,
        "ks": c.ks,
        "run_manifest": c.run_manifest,
        "suite_hash_scored": c.suite_hash_scored,
    });
    hex::encode(Sha256::digest(canonical_json(&identity).as_bytes()))
}

fn build_report(
    run_id: &str,
    config: ScoringConfig,
    samples: Vec<SampleScore>,
    jury_agreement: Vec<JuryAgreement>,
    notes: Vec<String>,
    cfg: &BootstrapConfig,
) -> Result<ScoreReport, ScoreError> {
    let tasks = task_scores(&samples)?;
    let group = |by: Breakdown,
                 key: GroupKey,
                 keep: &dyn Fn(&TaskScore) -> bool|
     -> Result<Option<GroupAggregate>, ScoreError> {
        let ts: Vec<&TaskScore> = tasks.iter().filter(|t| keep(t)).collect();
        if ts.is_empty() {
            return Ok(None);
        }
        let ids: BTreeSet<&str> = ts.iter().map(|t| t.task_id.as_str()).collect();
        let ss: Vec<&SampleScore> = samples
            .iter()
            .filter(|s| ids.contains(s.task_id.as_str()))
            .collect();
        Ok(Some(aggregate(
            GroupKey {
                by: Some(by),
                ..key
            },
            &ts,
            &ss,
            cfg,
        )?))
    };
    let levels: BTreeSet<Level> = tasks.iter().map(|t| t.level).collect();
    let families: BTreeSet<Family> = tasks.iter().map(|t| t.family).collect();
    let diseases: BTreeSet<String> = tasks.iter().map(disease).collect();
    let modalities: BTreeSet<String> = tasks.iter().map(|t| t.modality.clone()).collect();

    let overall = match group(Breakdown::Overall, GroupKey::default(), &|_| true)? {
        Some(g) => g,
        None => empty_group(),
    };
    let mut by_level_family = Vec::new();
    for &l in &levels {
        for &f in &families {
            let key = GroupKey {
                level: Some(l),
                family: Some(f),
                ..GroupKey::default()
            };
            by_level_family.extend(group(Breakdown::LevelFamily, key, &|t| {
                t.level == l && t.family == f
            })?);
        }
    }
    let mut by_family = Vec::new();
    for &f in &families {
        let key = GroupKey {
            family: Some(f),
            ..GroupKey::default()
        };
        by_family.extend(group(Breakdown::Family, key, &|t| t.family == f)?);
    }
    let mut by_level = Vec::new();
    for &l in &levels {
        let key = GroupKey {
            level: Some(l),
            ..GroupKey::default()
        };
        by_level.extend(group(Breakdown::Level, key, &|t| t.level == l)?);
    }
    let mut by_disease_group = Vec::new();
    for d in &diseases {
        let key = GroupKey {
            disease_group: Some(d.clone()),
            ..GroupKey::default()
        };
        by_disease_group.extend(group(Breakdown::DiseaseGroup, key, &|t| disease(t) == *d)?);
    }
    let mut by_modality = Vec::new();
    for m in &modalities {
        let key = GroupKey {
            modality: Some(m.clone()),
            ..GroupKey::default()
        };
        by_modality.extend(group(Breakdown::Modality, key, &|t| t.modality == *m)?);
    }
    Ok(ScoreReport {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.to_string(),
        config,
        samples,
        tasks,
        overall,
        by_level_family,
        by_family,
        by_level,
        by_disease_group,
        by_modality,
        jury_agreement,
        notes,
    })
}

fn disease(t: &TaskScore) -> String {
    t.disease_group.clone().unwrap_or_else(|| "unknown".into())
}

fn empty_group() -> GroupAggregate {
    let none = |k| crate::results::PassAtK {
        k,
        unbiased_estimator: None,
        unbiased_tasks: 0,
        unbiased_note: Some("the run has no samples".into()),
        top_k_in_answer: None,
        top_k_samples: 0,
        top_k_note: Some("the run has no samples".into()),
    };
    GroupAggregate {
        by: Breakdown::Overall,
        level: None,
        family: None,
        disease_group: None,
        modality: None,
        tasks: 0,
        cases: 0,
        samples: 0,
        n: 0,
        correct: 0,
        errored: 0,
        pending: 0,
        no_reference: 0,
        parse_failed: 0,
        unresolved: 0,
        accuracy: None,
        pass_at_1: none(1),
        pass_at_5: none(5),
        lesion: None,
        rubric: None,
        bertscore: None,
        taxonomy: None,
        breadth: None,
    }
}
