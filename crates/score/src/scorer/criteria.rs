//! Criterion rubrics: the judges decide each criterion of every answered sample of a task the rubric covers.

use nmb_judges::criteria::{question, validate, Decision};
use nmb_judges::judge::{Answer, Panel, Question};
use nmb_judges::jury::Jury;
use nmb_judges::prompts::Context;
use nmb_results::criteria::score::{CriteriaResult, CriterionOutcome, JudgeMet};
use nmb_results::criteria::{Criterion, CriterionRubric};

use super::grade::turn_answers;
use super::resolve::count_failures;
use super::Work;
use crate::ScoreError;

pub(super) async fn grade_criteria(
    panel: &Panel,
    jury: &Jury<'_>,
    rubric: &CriterionRubric,
    work: &mut [Work<'_>],
    failed: &mut [u64],
    thinking: bool,
) -> Result<(), ScoreError> {
    let targets: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, w)| w.score.status.is_scored() && !rubric.for_task(&w.task.id).is_empty())
        .map(|(i, _)| i)
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    let answers = ask_task_by_task(panel, rubric, work, &targets, thinking).await?;
    count_failures(&answers, failed);
    for (&i, a) in targets.iter().zip(&answers) {
        let criteria = rubric.for_task(&work[i].task.id);
        let outcomes = criteria
            .iter()
            .enumerate()
            .map(|(k, c)| outcome(jury, c, k, a))
            .collect();
        work[i].score.criteria = Some(CriteriaResult::new(&rubric.hash, criteria, outcomes));
    }
    Ok(())
}

/// The judges' answers on the criteria of each sample of `targets`, in `targets`' order. A validator knows one
/// task's criteria, so the questions are asked task by task.
async fn ask_task_by_task(
    panel: &Panel,
    rubric: &CriterionRubric,
    work: &[Work<'_>],
    targets: &[usize],
    thinking: bool,
) -> Result<Vec<Vec<Answer<Vec<Decision>>>>, ScoreError> {
    let questions: Vec<Question> = targets
        .iter()
        .map(|&i| criteria_question(rubric, &work[i], thinking))
        .collect();
    let mut order: Vec<usize> = (0..targets.len()).collect();
    order.sort_by_key(|&k| work[targets[k]].task.id.as_str());
    let mut slots: Vec<Option<Vec<Answer<Vec<Decision>>>>> = vec![None; targets.len()];
    let mut start = 0;
    while start < order.len() {
        let task = work[targets[order[start]]].task.id.as_str();
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&k| work[targets[k]].task.id == task)
                .count();
        let batch: Vec<Question> = order[start..end]
            .iter()
            .map(|&k| questions[k].clone())
            .collect();
        let criteria = rubric.for_task(task);
        let got = panel.ask(&batch, |t| validate(criteria, t)).await?;
        for (&k, a) in order[start..end].iter().zip(got) {
            slots[k] = Some(a);
        }
        start = end;
    }
    Ok(slots.into_iter().flatten().collect())
}

/// The criteria question of one sample's answers.
fn criteria_question(rubric: &CriterionRubric, w: &Work<'_>, thinking: bool) -> Question {
    let answers = turn_answers(w.record, thinking);
    let ctx = Context {
        case: w.case,
        task: w.task,
        answers: &answers,
        images: &w.images,
    };
    question(rubric.for_task(&w.task.id), &ctx, w.record.sample_index)
}

/// Criterion `c` (the `k`th of its task) as the judges decided it: met when more than half of the valid answers
/// say so.
fn outcome(
    jury: &Jury<'_>,
    c: &Criterion,
    k: usize,
    answers: &[Answer<Vec<Decision>>],
) -> CriterionOutcome {
    let judges: Vec<JudgeMet> = answers
        .iter()
        .enumerate()
        .map(|(j, ans)| JudgeMet {
            judge: jury.specs[j].clone(),
            met: ans.value.as_ref().map(|d| d[k].met),
            explanation: ans.value.as_ref().map(|d| d[k].explanation.clone()),
        })
        .collect();
    let valid: Vec<bool> = judges.iter().filter_map(|v| v.met).collect();
    let yes = valid.iter().filter(|m| **m).count();
    CriterionOutcome {
        id: c.id.clone(),
        points: c.points,
        met: (!valid.is_empty()).then(|| yes * 2 > valid.len()),
        judges,
    }
}
