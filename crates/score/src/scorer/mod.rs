//! Scoring one stored run: parse every answer, match it, ask the judges what the rules could not decide, grade
//! with the rubric, classify wrong answers, compute BERTScore, aggregate with CIs.

mod bertscore;
mod criteria;
mod grade;
mod images;
mod judging;
mod prepare;
mod report;
mod resolve;
mod sections;
mod taxonomy;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bertscore::bertscore;
pub(crate) use grade::turn_answers;
use judging::{Judged, Judges, Tally};
use nmb_chat::GenParams;
use nmb_judges::judge::{default_judge_params, JudgeImage, JudgeModel};
use nmb_judges::prompts::Field;
use nmb_requests::Scheduler;
use nmb_results::rubric::Rubric;
use nmb_results::{
    Aggregation, BertScoreConfig, JudgeInfo, SampleScore, ScoreReport, ScoringConfig,
    TaxonomyConfig,
};
use nmb_stats::BootstrapConfig;
use nmb_store::{RunInfo, SampleRecord, Store};
use nmb_suite::{Case, Suite, Task};
use prepare::prepare;
use report::build_report;
pub(crate) use report::config_hash;
use report::scoring_config;
use sections::add_sections;

use crate::lexicon::builtin;
use crate::matching::RuleVerdict;
use crate::semantic::BertScoreSetting;
use crate::ScoreError;
pub use images::refuse_blind_judges;
pub(crate) use images::{blind_spec, ShownImages};
pub use nmb_results::JudgeImages;

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
    /// Subgroup fields (`--by`): each headline number is also given per subgroup.
    pub by: Vec<String>,
    /// What judges see of the images the model was shown.
    pub judge_images: JudgeImages,
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
            by: Vec::new(),
            judge_images: JudgeImages::None,
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
    /// The images the model was shown, for judges that see them (`--judge-images same`); empty otherwise.
    images: Vec<JudgeImage>,
}

/// The tasks of a suite by id, with their case.
type TaskIndex<'a> = HashMap<&'a str, (&'a Case, &'a Task)>;

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
    // Before anything is asked: a field the cases lack is an error, not a judge bill.
    let assignments = opts
        .by
        .iter()
        .map(|spec| nmb_results::subgroup::assign(suite, spec))
        .collect::<Result<Vec<_>, _>>()?;
    let records = store.run_samples(run_id)?;
    let index: TaskIndex = suite
        .tasks()
        .map(|(c, t)| (t.id.as_str(), (c, t)))
        .collect();
    let suggestions = probe_suggestions(&run);
    let mut work = prepare_all(run_id, suite, &records, &index, &suggestions)?;
    if opts.judge_images == JudgeImages::Same && !opts.judges.is_empty() {
        refuse_blind_judges(&opts.judges)?;
        images::attach(store, run_id, &mut work)?;
    }
    let judges = Judges::open(store, scheduler, &run, opts)?;
    let (judged, mut tally, found) = judge_all(&judges, &mut work, opts, run_id).await?;
    let config = found.config(&run, suite, opts, &judged)?;
    if !config.suite_matches_run {
        tally.notes.push(suite_changed(&config));
    }
    let samples: Vec<SampleScore> = work.into_iter().map(|w| w.score).collect();
    let (agreement, notes) = (tally.agreement, tally.notes);
    let mut report = build_report(run_id, config, samples, agreement, notes, &opts.bootstrap)?;
    let seeds = judges.repeat_seeds();
    add_sections(&mut report, &judged, seeds, &records, &index, opts)?;
    if !assignments.is_empty() {
        let bootstrap = &opts.bootstrap;
        let breakdown =
            nmb_results::subgroup_breakdown::breakdown(&report, &assignments, bootstrap)?;
        report.subgroups = Some(breakdown);
    }
    Ok(report)
}

/// What the judged steps and BERTScore found that the scoring configuration records.
struct Found {
    judges: Vec<JudgeInfo>,
    bertscore: BertScoreConfig,
    taxonomy: TaxonomyConfig,
}

impl Found {
    /// The scoring configuration of `run` scored against `suite` with `opts`.
    fn config(
        self,
        run: &RunInfo,
        suite: &Suite,
        opts: &ScoreOptions,
        judged: &Judged<'_>,
    ) -> Result<ScoringConfig, ScoreError> {
        scoring_config(
            run,
            suite,
            opts,
            self.judges,
            judged.rubric,
            judged.criteria,
            self.bertscore,
            self.taxonomy,
            builtin(),
        )
    }
}

/// Every judged step, then BERTScore, then the judges' tallies closed.
async fn judge_all<'o>(
    judges: &Judges,
    work: &mut [Work<'_>],
    opts: &'o ScoreOptions,
    run_id: &str,
) -> Result<(Judged<'o>, Tally, Found), ScoreError> {
    let bench = judges.bench(opts.aggregation);
    let mut tally = Tally::new(judges.specs.len());
    let judged = judging::judge(&bench, work, &mut tally, opts, run_id).await?;
    let bertscore = bertscore(&opts.bertscore, work)?;
    if let Some(reason) = &bertscore.skipped_reason {
        tally
            .notes
            .push(format!("BERTScore not computed: {reason}"));
    }
    let judges = judging::finish(&bench, &mut tally)?;
    let taxonomy = TaxonomyConfig {
        judged: judged.judged_taxonomy,
        human_labels: judging::labels_info(judged.human.as_ref(), work),
    };
    let found = Found {
        judges,
        bertscore,
        taxonomy,
    };
    Ok((judged, tally, found))
}

/// Every sample of the run, parsed and matched by the rules; a sample of a task `suite` lacks is an error.
fn prepare_all<'a>(
    run_id: &str,
    suite: &Suite,
    records: &'a [SampleRecord],
    index: &TaskIndex<'a>,
    suggestions: &HashMap<String, String>,
) -> Result<Vec<Work<'a>>, ScoreError> {
    let lex = builtin();
    records
        .iter()
        .map(|r| {
            let (case, task) =
                index
                    .get(r.task_id.as_str())
                    .ok_or_else(|| ScoreError::UnknownTask {
                        run_id: run_id.to_string(),
                        task_id: r.task_id.clone(),
                        suite_id: suite.id.clone(),
                    })?;
            let suggestion = suggestions.get(&r.task_id).map(String::as_str);
            Ok(prepare(lex, r, case, task, suggestion))
        })
        .collect()
}

/// A probed run's suggestions by task id, as its manifest records them (empty for any other run).
fn probe_suggestions(run: &RunInfo) -> HashMap<String, String> {
    run.manifest
        .probe
        .as_ref()
        .and_then(|p| p.get("suggestions"))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default()
}

/// The note of a scoring against another suite than the run was made with.
fn suite_changed(config: &ScoringConfig) -> String {
    format!(
        "the suite scored against (hash {}) differs from the one the run was made with (hash {}): answer key or \
         content changed since",
        short(&config.suite_hash_scored),
        short(&config.suite_hash_run)
    )
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}
