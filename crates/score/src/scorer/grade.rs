//! Rubric grading by the judges, and their agreement.

use nmb_judges::judge::{Answer, Panel, Question};
use nmb_judges::jury::{agreement_rows, Jury};
use nmb_judges::prompts::{self, Context};
use nmb_judges::rubric::Grade;
use nmb_results::rubric::Rubric;
use nmb_results::{DimensionScore, JuryAgreement, RubricResult};
use nmb_stats::{BootstrapConfig, Measure};
use nmb_store::SampleRecord;

use super::resolve::count_failures;
use super::Work;
use crate::ScoreError;

/// The answers of every turn of a sample, for judges: the answer alone, or with `thinking` the model's thinking
/// before it, marked as such.
pub(crate) fn turn_answers(record: &SampleRecord, thinking: bool) -> Vec<String> {
    record
        .turns
        .iter()
        .map(|t| {
            let split = nmb_chat::split_thinking(t.text.as_deref().unwrap_or_default());
            let thought = t.thinking.as_deref().or(split.thinking);
            match thought.filter(|_| thinking) {
                Some(th) => format!(
                    "[the model's thinking before its answer]\n{th}\n[its answer]\n{}",
                    split.answer
                ),
                None => split.answer.to_string(),
            }
        })
        .collect()
}

/// Per rubric item: per dimension (rubric order, then overall) per judge.
type RubricRows = Vec<Vec<Vec<Option<f64>>>>;

pub(super) async fn grade_rubric(
    panel: &Panel,
    jury: &Jury<'_>,
    rubric: &Rubric,
    work: &mut [Work<'_>],
    failed: &mut [u64],
    thinking: bool,
) -> Result<RubricRows, ScoreError> {
    let targets: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, w)| w.score.status.is_scored() && w.task.family.is_depth())
        .map(|(i, _)| i)
        .collect();
    let questions: Vec<Question> = targets
        .iter()
        .map(|&i| rubric_question(rubric, &work[i], thinking))
        .collect();
    let answers: Vec<Vec<Answer<Grade>>> = if questions.is_empty() {
        Vec::new()
    } else {
        panel
            .ask(&questions, |t| prompts::validate_rubric(rubric, t))
            .await?
    };
    count_failures(&answers, failed);
    let mut rows = Vec::new();
    for (&i, a) in targets.iter().zip(&answers) {
        let (result, per_dim) = rubric_result(jury, rubric, a);
        rows.push(per_dim);
        work[i].score.rubric = Some(result);
    }
    Ok(rows)
}

/// The rubric question of one sample's answers.
fn rubric_question(rubric: &Rubric, w: &Work<'_>, thinking: bool) -> Question {
    let answers = turn_answers(w.record, thinking);
    prompts::rubric(
        rubric,
        &Context {
            case: w.case,
            task: w.task,
            answers: &answers,
            images: &w.images,
        },
        w.record.sample_index,
    )
}

/// The jury's rubric result from the judges' answers on one sample, and each judge's score per dimension (rubric
/// order, then overall) for agreement.
fn rubric_result(
    jury: &Jury<'_>,
    rubric: &Rubric,
    answers: &[Answer<Grade>],
) -> (RubricResult, Vec<Vec<Option<f64>>>) {
    let dims = rubric.dimension_ids();
    let verdicts = jury.rubric_verdicts(answers);
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
    let result = RubricResult {
        rubric_id: rubric.id.clone(),
        rubric_version: rubric.version.clone(),
        rubric_hash: rubric.hash.clone(),
        aggregation: jury.aggregation,
        scores,
        overall,
        judges: verdicts,
    };
    (result, per_dim)
}

pub(super) fn rubric_agreement(
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
