//! Criterion rubrics: the judges decide each criterion of every answered sample of a task the rubric covers.

use nmb_judges::criteria::{question, validate, Decision};
use nmb_judges::judge::{Answer, Panel, Question};
use nmb_judges::jury::Jury;
use nmb_judges::prompts::Context;
use nmb_results::criteria::score::{CriteriaResult, CriterionOutcome, JudgeMet};
use nmb_results::criteria::CriterionRubric;

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
    let questions: Vec<Question> = targets
        .iter()
        .map(|&i| {
            let w = &work[i];
            let answers = turn_answers(w.record, thinking);
            let ctx = Context {
                case: w.case,
                task: w.task,
                answers: &answers,
            };
            question(rubric.for_task(&w.task.id), &ctx, w.record.sample_index)
        })
        .collect();
    if questions.is_empty() {
        return Ok(());
    }
    // A validator knows one task's criteria, so the questions are asked task by task.
    let mut order: Vec<usize> = (0..targets.len()).collect();
    order.sort_by_key(|&k| work[targets[k]].task.id.as_str());
    let mut slots: Vec<Option<Vec<Answer<Vec<Decision>>>>> = vec![None; targets.len()];
    let mut start = 0;
    while start < order.len() {
        let task = work[targets[order[start]]].task.id.clone();
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&k| work[targets[k]].task.id == task)
                .count();
        let batch: Vec<Question> = order[start..end]
            .iter()
            .map(|&k| questions[k].clone())
            .collect();
        let criteria = rubric.for_task(&task);
        let got = panel.ask(&batch, |t| validate(criteria, t)).await?;
        for (&k, a) in order[start..end].iter().zip(got) {
            slots[k] = Some(a);
        }
        start = end;
    }
    let answers: Vec<Vec<Answer<Vec<Decision>>>> = slots.into_iter().flatten().collect();
    count_failures(&answers, failed);
    for (&i, a) in targets.iter().zip(&answers) {
        let criteria = rubric.for_task(&work[i].task.id);
        let outcomes = criteria
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let judges: Vec<JudgeMet> = a
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
            })
            .collect();
        work[i].score.criteria = Some(CriteriaResult::new(&rubric.hash, criteria, outcomes));
    }
    Ok(())
}
