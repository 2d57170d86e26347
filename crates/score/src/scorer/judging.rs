//! The judged steps of a scoring, in the order they run: matches the rules left open, rubric grading, criterion
//! rubrics and the error taxonomy, each adding the judges' agreement and a note when it was skipped; then the
//! judges' runs closed.

use std::sync::Arc;

use nmb_judges::judge::Asking;
use nmb_judges::jury::{agreement_rows, Jury};
use nmb_judges::Panel;
use nmb_requests::Scheduler;
use nmb_results::criteria::CriterionRubric;
use nmb_results::rubric::Rubric;
use nmb_results::Aggregation;
use nmb_results::{HumanLabelsInfo, JudgeInfo, JuryAgreement, LabelSource};
use nmb_stats::Measure;
use nmb_store::{RunInfo, Store};

use super::criteria::grade_criteria;
use super::grade::{grade_rubric, rubric_agreement};
use super::resolve::{equivalence_agreement, resolve_matches};
use super::taxonomy::classify_errors;
use super::{ScoreOptions, Work};
use crate::labels::HumanLabels;
use crate::repeats::EquivalenceRepeats;
use crate::ScoreError;

/// The judges of a scoring: their panel (none without judges), and what a jury needs of them.
pub(super) struct Judges {
    panel: Option<Panel>,
    pub specs: Vec<String>,
    self_grading: Vec<bool>,
}

impl Judges {
    /// Opens one judge run per judge and repeat for `run`, when the scoring has judges.
    pub fn open(
        store: &Arc<Store>,
        scheduler: &Scheduler,
        run: &RunInfo,
        opts: &ScoreOptions,
    ) -> Result<Judges, ScoreError> {
        if opts.judges.is_empty() {
            return Ok(Judges {
                panel: None,
                specs: Vec::new(),
                self_grading: Vec::new(),
            });
        }
        let asking = Asking {
            params: opts.judge_params.clone(),
            max_reasks: opts.max_reasks,
            concurrency: opts.judge_concurrency,
            batch: opts.judge_batch,
            repeats: opts.judge_repeats.max(1),
            images: opts.judge_images == crate::JudgeImages::Same,
        };
        let panel = Panel::open(store.clone(), scheduler.clone(), &opts.judges, run, asking)?;
        let self_grading = (0..panel.len()).map(|j| panel.self_grading(j)).collect();
        Ok(Judges {
            specs: panel.specs(),
            self_grading,
            panel: Some(panel),
        })
    }

    /// The panel and a jury that combines its judges' verdicts by `aggregation`.
    pub fn bench(&self, aggregation: Aggregation) -> Bench<'_> {
        Bench {
            panel: self.panel.as_ref(),
            jury: Jury {
                specs: &self.specs,
                self_grading: &self.self_grading,
                aggregation,
            },
        }
    }

    /// The seed of each repeat, when each judge was asked more than once.
    pub fn repeat_seeds(&self) -> Option<Vec<u64>> {
        let panel = self.panel.as_ref().filter(|p| p.repeats() > 1)?;
        Some(panel.repeat_seeds())
    }
}

/// The judges of a scoring (none without a panel) and the jury that combines them.
pub(super) struct Bench<'a> {
    pub panel: Option<&'a Panel>,
    pub jury: Jury<'a>,
}

impl Bench<'_> {
    fn specs(&self) -> &[String] {
        self.jury.specs
    }

    /// Several judges: their agreement is measured.
    fn is_jury(&self) -> bool {
        self.jury.specs.len() > 1
    }
}

/// What the judged steps add beside each sample's verdicts: per judge the items it failed on, the jury's
/// agreement, and notes on what was skipped.
pub(super) struct Tally {
    pub failed: Vec<u64>,
    pub agreement: Vec<JuryAgreement>,
    pub notes: Vec<String>,
}

impl Tally {
    pub fn new(judges: usize) -> Tally {
        Tally {
            failed: vec![0; judges],
            agreement: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// What the judged steps hand on to the report.
pub(super) struct Judged<'o> {
    /// The rubric the judges graded with, when they did.
    pub rubric: Option<&'o Rubric>,
    /// The criterion rubric the judges decided, when they did.
    pub criteria: Option<&'o CriterionRubric>,
    pub human: Option<HumanLabels>,
    /// Judges labelled the wrong answers' error classes.
    pub judged_taxonomy: bool,
    /// Each repeat's yes/no per match question and judge, for the stability section.
    pub equivalence_repeats: EquivalenceRepeats,
}

/// Every judged step, in order.
pub(super) async fn judge<'o>(
    bench: &Bench<'_>,
    work: &mut [Work<'_>],
    tally: &mut Tally,
    opts: &'o ScoreOptions,
    run_id: &str,
) -> Result<Judged<'o>, ScoreError> {
    let equivalence_repeats = matches(bench, work, tally, opts).await?;
    let rubric = rubric(bench, work, tally, opts).await?;
    let criteria = criteria(bench, work, tally, opts).await?;
    let (human, judged_taxonomy) = taxonomy(bench, work, tally, opts, run_id).await?;
    Ok(Judged {
        rubric,
        criteria,
        human,
        judged_taxonomy,
        equivalence_repeats,
    })
}

/// The matches the rules left inconclusive, put to the judges; without judges they stay unresolved.
async fn matches(
    bench: &Bench<'_>,
    work: &mut [Work<'_>],
    tally: &mut Tally,
    opts: &ScoreOptions,
) -> Result<EquivalenceRepeats, ScoreError> {
    let (equivalence, repeats) =
        resolve_matches(bench.panel, &bench.jury, work, &mut tally.failed).await?;
    if bench.is_jury() {
        let rows = equivalence_agreement(bench.specs(), &equivalence, &opts.bootstrap);
        tally.agreement.extend(rows);
    }
    let unresolved = work.iter().filter(|w| w.score.unresolved).count();
    if unresolved > 0 && bench.panel.is_none() {
        tally.notes.push(format!(
            "{unresolved} answers need a judge to decide a match (granularity, related or unknown terms) and count \
             as wrong; score with --judge to resolve them"
        ));
    }
    Ok(repeats)
}

/// Rubric grading, when there are judges and a rubric.
async fn rubric<'o>(
    bench: &Bench<'_>,
    work: &mut [Work<'_>],
    tally: &mut Tally,
    opts: &'o ScoreOptions,
) -> Result<Option<&'o Rubric>, ScoreError> {
    let Some(rubric) = &opts.rubric else {
        return Ok(None);
    };
    let Some(panel) = bench.panel else {
        tally
            .notes
            .push("rubric grading skipped: it needs at least one --judge".into());
        return Ok(None);
    };
    let thinking = opts.judge_sees_thinking;
    let rows = grade_rubric(
        panel,
        &bench.jury,
        rubric,
        work,
        &mut tally.failed,
        thinking,
    )
    .await?;
    if bench.is_jury() {
        let rows = rubric_agreement(rubric, bench.specs(), &rows, &opts.bootstrap);
        tally.agreement.extend(rows);
    }
    Ok(Some(rubric))
}

/// Each criterion of the criterion rubric decided, when there are judges and a criterion rubric.
async fn criteria<'o>(
    bench: &Bench<'_>,
    work: &mut [Work<'_>],
    tally: &mut Tally,
    opts: &'o ScoreOptions,
) -> Result<Option<&'o CriterionRubric>, ScoreError> {
    let Some(criteria) = &opts.criteria else {
        return Ok(None);
    };
    let Some(panel) = bench.panel else {
        tally
            .notes
            .push("criterion rubric skipped: it needs at least one --judge".into());
        return Ok(None);
    };
    let thinking = opts.judge_sees_thinking;
    grade_criteria(
        panel,
        &bench.jury,
        criteria,
        work,
        &mut tally.failed,
        thinking,
    )
    .await?;
    Ok(Some(criteria))
}

/// The error classes of wrong answers, from human labels first, then the judges when asked for; gives the
/// human labels and whether the judges labelled.
async fn taxonomy(
    bench: &Bench<'_>,
    work: &mut [Work<'_>],
    tally: &mut Tally,
    opts: &ScoreOptions,
    run_id: &str,
) -> Result<(Option<HumanLabels>, bool), ScoreError> {
    let human = opts
        .human_labels
        .as_ref()
        .map(|p| HumanLabels::load(p, run_id))
        .transpose()?;
    let judged = opts.taxonomy && bench.panel.is_some();
    if opts.taxonomy && bench.panel.is_none() && human.is_none() {
        tally
            .notes
            .push("error taxonomy skipped: it needs a --judge or --taxonomy-labels".into());
    }
    let panel = bench.panel.filter(|_| judged);
    let thinking = opts.judge_sees_thinking;
    let rows = classify_errors(
        panel,
        &bench.jury,
        human.as_ref(),
        work,
        &mut tally.failed,
        thinking,
    )
    .await?;
    if bench.is_jury() && judged {
        tally.agreement.extend(agreement_rows(
            "taxonomy",
            &[Measure::AlphaNominal, Measure::CohenKappa],
            bench.specs(),
            &rows,
            &opts.bootstrap,
        ));
    }
    Ok((human, judged))
}

/// Closes the judges' runs and describes each judge, with a note on each that may be grading its own family.
pub(super) fn finish(bench: &Bench<'_>, tally: &mut Tally) -> Result<Vec<JudgeInfo>, ScoreError> {
    let judges = match bench.panel {
        Some(p) => p.finish(&tally.failed)?,
        None => Vec::new(),
    };
    for j in judges.iter().filter(|j| j.self_grading) {
        tally.notes.push(format!(
            "judge {} may be self-grading: {}",
            j.spec,
            j.self_grading_reason.as_deref().unwrap_or("")
        ));
    }
    Ok(judges)
}

/// The human labels file as the report records it: how many of its rows labelled a sample.
pub(super) fn labels_info(
    human: Option<&HumanLabels>,
    work: &[Work<'_>],
) -> Option<HumanLabelsInfo> {
    let human = human?;
    let used = work
        .iter()
        .filter(|w| {
            w.score
                .taxonomy
                .as_ref()
                .is_some_and(|t| t.source == Some(LabelSource::Human))
        })
        .count();
    Some(HumanLabelsInfo {
        path: human.path.display().to_string(),
        sha256: human.sha256.clone(),
        rows: human.rows,
        unused_rows: human.rows.saturating_sub(used),
    })
}
