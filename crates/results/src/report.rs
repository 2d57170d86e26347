//! The scoring output: every type `nmb score` writes (as JSON and into the store) and reports read back.
//!
//! A [`ScoreReport`] plus the store it came from is enough to write any report: the report holds every
//! per-sample verdict (with the parsed answer, how each candidate diagnosis was matched, every judge's verdict
//! and rationale, rubric scores, BERTScore, error-taxonomy label, breadth verdict) and every aggregate with its
//! confidence interval; the store holds the raw answers, prompts, images and calls behind them
//! (`Store::run_samples`), and the judges' own calls (judge runs, see [`JudgeInfo::judge_run_id`]).
//!
//! Conventions:
//! - **Both pass@k readings are always labelled.** [`PassAtK::unbiased_estimator`] is reading (a), the
//!   estimator `1 - C(n-c,k)/C(n,k)` over the n samples of a task, averaged over tasks;
//!   [`PassAtK::top_k_in_answer`] is reading (b), "the reference is among the first k entries of one answer's
//!   ranked differential", averaged over samples. A reading that cannot be computed is `null` with a note
//!   saying why (too few samples for k, or no ranked list in that family).
//! - **Errored samples are never wrong answers.** They (and `pending` samples of an unfinished run, and samples
//!   whose task has no reference) are left out of every accuracy and counted in their own fields. A parse
//!   failure *is* an answer, a wrong one, and is counted in `parse_failed` as well.
//! - **Every aggregate is an [`Estimate`]** with a seeded percentile-bootstrap 95% interval; the seed and
//!   resample count are in each estimate and in [`ScoringConfig::bootstrap`]. Units that share a case (several
//!   tasks, or several samples, of one case) are resampled together by case.
//! - **Deterministic.** The JSON holds no timestamps and no per-invocation counters, so scoring the same stored
//!   responses again with the same configuration gives the same bytes. Lists are in a fixed order (samples by
//!   task id and sample index; groups by level, family, then name).
//! - **Additive evolution.** Fields are only ever added; readers should ignore unknown fields. New optional
//!   fields deserialise as `None`/empty from older reports. [`SCHEMA_VERSION`] changes only on a breaking change.

use std::collections::BTreeMap;

use nmb_stats::{BootstrapConfig, Estimate};
use nmb_suite::{Family, Level};
use serde::{Deserialize, Serialize};

use crate::sample::{Aggregation, ErrorCategory, SampleScore};

/// Version of the layout of [`ScoreReport`].
pub const SCHEMA_VERSION: u32 = 1;

/// The pass@k cut-offs every report carries.
pub const KS: [usize; 2] = [1, 5];

/// Everything one scoring of one run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreReport {
    pub schema_version: u32,
    /// The scored (model) run.
    pub run_id: String,
    pub config: ScoringConfig,
    /// Every planned sample of the run, by task id then sample index.
    pub samples: Vec<SampleScore>,
    /// One row per task: its samples' counts and per-task pass@k.
    pub tasks: Vec<TaskScore>,
    /// All tasks together.
    pub overall: GroupAggregate,
    /// Per (level, family): the main table.
    pub by_level_family: Vec<GroupAggregate>,
    pub by_family: Vec<GroupAggregate>,
    pub by_level: Vec<GroupAggregate>,
    /// Per `disease_group` metadata value of the case (or task); cases without one are under `"unknown"`.
    pub by_disease_group: Vec<GroupAggregate>,
    /// Per imaging modality of the case's images (`MRI`, `CT`, `CT+MRI`, ...; `none` without images).
    pub by_modality: Vec<GroupAggregate>,
    /// Agreement between the judges of a jury (empty with a single judge).
    #[serde(default)]
    pub jury_agreement: Vec<JuryAgreement>,
    /// Human-readable remarks: what was skipped and why, suite-hash mismatches, unresolved matches.
    #[serde(default)]
    pub notes: Vec<String>,
    /// NeuroVLM-Bench's numbers, when the run has `structured` tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::structured::StructuredReport>,
    /// Macro-F1 and per-label numbers, when every multiple-choice item offers the same options (PubMedQA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_set: Option<crate::label_set::LabelSetReport>,
    /// Revision in multi-turn consults (first- and last-turn accuracy, changed top diagnosis, wrong → right and
    /// right → wrong), when the run has consult tasks; see [`crate::revision`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<crate::revision::RevisionReport>,
    /// How far each judge's repeats agree, when it was asked more than once (`--judge-repeats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stability: Option<crate::stability::StabilityReport>,
    /// Criterion-rubric scores (HealthBench's rule) with breakdowns by tag, when scored with `--criteria`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<crate::criteria::score::CriteriaReport>,
    /// The headline numbers per subgroup of each `--by` field, when scored (or reported) with `--by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgroups: Option<crate::subgroup::SubgroupsReport>,
}

// ---------------------------------------------------------------------------------------------------------------
// Configuration

/// What produced the scores: enough to reproduce them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoringConfig {
    /// nmb version that scored.
    pub nmb_version: String,
    /// SHA-256 of the canonical JSON of every other field of this config (the run manifest included). Two scorings
    /// with the same hash of the same stored responses give the same report.
    pub config_hash: String,
    /// Judges in the order given (`--judge`); empty when scoring ran without a judge.
    pub judges: Vec<JudgeInfo>,
    /// How several judges' verdicts are combined.
    pub aggregation: Aggregation,
    /// Decoding parameters sent to every judge.
    pub judge_params: serde_json::Value,
    /// Re-asks allowed after an invalid judge answer (so at most `1 + max_reasks` calls per judge and item).
    pub max_reasks: u32,
    /// Versions of the judge prompt templates (equivalence, rubric, taxonomy).
    pub judge_prompts: BTreeMap<String, String>,
    pub matching: MatchingConfig,
    /// The rubric used, or `None` when rubric grading did not run.
    pub rubric: Option<RubricInfo>,
    pub bertscore: BertScoreConfig,
    pub taxonomy: TaxonomyConfig,
    pub bootstrap: BootstrapConfig,
    /// pass@k cut-offs ([`KS`]).
    pub ks: Vec<usize>,
    /// The scored run's manifest, verbatim (model, parameters, suite and template hashes, nmb version). Kept as
    /// JSON so its bytes stay those of the stored manifest; [`ScoringConfig::manifest`] gives the typed form.
    pub run_manifest: serde_json::Value,
    /// Suite hash recorded with the run.
    pub suite_hash_run: String,
    /// Hash of the suite (with answer key) the scores were computed against.
    pub suite_hash_scored: String,
    /// The two hashes agree. When they differ (for example an answer key attached only at scoring time), the
    /// scores are against a different key than the run was planned with; a note says so.
    pub suite_matches_run: bool,
    /// The model's price (`--price`), used for the cost of structured answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<crate::cost::Price>,
    /// The paper's reading of NeuroVLM-Bench answers, when asked for (`--protocol neurovlm-paper`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<crate::structured::paper::PaperOptions>,
    /// Judges saw the thinking before each answer (`--judge-sees-thinking`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub judge_sees_thinking: bool,
    /// Times each judge was asked each question (`--judge-repeats`); 1 is left out.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub judge_repeats: u32,
    /// The criterion rubric the judges decided, when scored with `--criteria`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<crate::criteria::CriteriaInfo>,
    /// The subgroup fields (`--by`), as given; empty (and left out) without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// What judges saw of the images the model was shown (`--judge-images`); `none` is left out.
    #[serde(default, skip_serializing_if = "JudgeImages::is_none")]
    pub judge_images: JudgeImages,
}

/// What judges see of the images the graded model was shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeImages {
    /// None: judges read the images' captions only.
    #[default]
    None,
    /// The same image bytes the model received, in its order, with their captions, with every question about
    /// a case.
    Same,
}

impl JudgeImages {
    pub fn is_none(&self) -> bool {
        *self == JudgeImages::None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JudgeImages::None => "none",
            JudgeImages::Same => "same",
        }
    }
}

impl ScoringConfig {
    /// The scored run's manifest, typed (an unreadable one gives the empty manifest).
    pub fn manifest(&self) -> nmb_store::Manifest {
        serde_json::from_value(self.run_manifest.clone()).unwrap_or_default()
    }
}

/// Adjusted parameters as the reports show them: `no_top_p (why); ...`.
pub fn adjusted_text(adjusted: &BTreeMap<String, String>) -> String {
    adjusted
        .iter()
        .map(|(what, why)| format!("{what} ({why})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Serde's default for a count that is 1 unless recorded.
fn one() -> u32 {
    1
}

/// Leaves a count of 1 out of what is serialised, so reports from before the count keep their bytes.
fn is_one(v: &u32) -> bool {
    *v == 1
}

/// One judge model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeInfo {
    /// Model spec as given, `BACKEND:MODEL[@BASE_URL]`.
    pub spec: String,
    /// Provider (backend kind), e.g. `openai`, `anthropic`, `gemini`, `local`.
    pub provider: String,
    /// Model family, e.g. `gpt`, `claude`, `gemini`, `llama`; see `judge::model_family`.
    pub family: String,
    /// The judge comes from the same family as the graded model: its verdicts risk self-preference.
    pub self_grading: bool,
    /// Why `self_grading` was set (same family / same model), or `None`.
    pub self_grading_reason: Option<String>,
    /// The judge run in the store holding this judge's calls for this scored run.
    pub judge_run_id: String,
    /// Totals of that judge run (all invocations together, so they do not change on rescoring).
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Judge items whose answer never became valid (after re-asks) or whose calls failed.
    pub failed_items: u64,
    /// The judge runs of repeats 2, 3, ... (`--judge-repeats`); the fields above are repeat 1's. Empty when
    /// each question was asked once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeat_runs: Vec<RepeatRun>,
    /// What nmb changed in the judge's parameters before sending them, by adjustment (`no_top_p`, ...), with
    /// why: a provider's documented per-family rule (Claude takes `temperature` or `top_p`, not both) or what
    /// its server refused. As its judge runs' manifests record it; empty (and left out) where nothing changed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params_adjusted: BTreeMap<String, String>,
}

/// The judge run of one repeat beyond the first, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatRun {
    /// The seed this repeat sent.
    pub seed: u64,
    pub judge_run_id: String,
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

/// Diagnosis and lesion matching settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchingConfig {
    /// Version of the built-in normalisation lexicon (spelling variants, abbreviations, disease hierarchy).
    pub lexicon_version: String,
    /// Ranked entries considered per answer (5: pass@5 reading (b)).
    pub max_rank: usize,
    /// A judge was available for inconclusive pairs; without one they stay `unresolved` (and count as wrong).
    pub judge_for_inconclusive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricInfo {
    pub id: String,
    pub version: String,
    /// SHA-256 of the rubric file's bytes.
    pub hash: String,
    /// Where it was read from (`built-in` for the bundled `neurology-v1`).
    pub source: String,
    /// Dimension ids in rubric order.
    pub dimensions: Vec<String>,
    /// Lowest and highest score of every dimension (0 and 5).
    pub scale: (u8, u8),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BertScoreConfig {
    /// BERTScore was computed (a model was available and not switched off).
    pub enabled: bool,
    pub model_dir: Option<String>,
    pub layer: Option<usize>,
    pub idf: bool,
    /// Rescaled with a baseline; `false` is raw F1, as the published Neural-MedBench values appear to be.
    pub rescaled: bool,
    /// Why BERTScore was not computed, when it was not.
    pub skipped_reason: Option<String>,
    /// The baseline used for rescaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineInfo>,
}

/// A rescaling baseline: where it came from and its values at the scored layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    /// The file (with its SHA-256), or nmb's shipped baseline for the model.
    pub source: String,
    pub layer: usize,
    pub p: f64,
    pub r: f64,
    pub f: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaxonomyConfig {
    /// Judges labelled wrong answers.
    pub judged: bool,
    /// Human labels imported from CSV; they take precedence over judge labels.
    pub human_labels: Option<HumanLabelsInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanLabelsInfo {
    pub path: String,
    pub sha256: String,
    pub rows: usize,
    /// Rows that named a sample the run does not have, or a sample that was not a wrong answer.
    pub unused_rows: usize,
}

// ---------------------------------------------------------------------------------------------------------------
// Per task and aggregates

/// One task: how its samples fared and its pass@k values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskScore {
    pub task_id: String,
    pub case_id: String,
    pub family: Family,
    pub level: Level,
    pub disease_group: Option<String>,
    pub modality: String,
    /// Planned samples.
    pub samples: usize,
    /// Samples that count towards accuracy (answered, with a reference).
    pub n: usize,
    /// Of those, correct.
    pub c: usize,
    pub errored: usize,
    pub pending: usize,
    pub parse_failed: usize,
    pub no_reference: usize,
    pub unresolved: usize,
    /// Reading (a) per task for each k in [`KS`] (`None` when `n < k`): `1 - C(n-c,k)/C(n,k)`.
    pub pass_at_k_unbiased: BTreeMap<String, Option<f64>>,
    /// Reading (b) per task for each k: mean over its samples of "reference within the first k entries"
    /// (`None` when the family has no ranked answer or no sample counts).
    pub pass_at_k_top_k: BTreeMap<String, Option<f64>>,
}

/// Which breakdown a [`GroupAggregate`] belongs to.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Breakdown {
    #[default]
    Overall,
    LevelFamily,
    Family,
    Level,
    DiseaseGroup,
    Modality,
}

/// Scores of one group of tasks (one level and family, one disease group, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupAggregate {
    pub by: Breakdown,
    /// Set for the breakdowns that group by it.
    pub level: Option<Level>,
    pub family: Option<Family>,
    pub disease_group: Option<String>,
    pub modality: Option<String>,
    pub tasks: usize,
    /// Cases behind those tasks (the bootstrap's clusters).
    pub cases: usize,
    /// Planned samples.
    pub samples: usize,
    /// Samples that count towards accuracy.
    pub n: usize,
    pub correct: usize,
    /// Not counted in `n`.
    pub errored: usize,
    pub pending: usize,
    pub no_reference: usize,
    /// Counted in `n` (as wrong).
    pub parse_failed: usize,
    /// Of `parse_failed`, the answers that stopped at the token limit (cut off mid-answer rather than written
    /// in another format). Absent from reports stored before it was counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parse_failed_at_limit: usize,
    /// Counted in `n` (as wrong): a needed match stayed inconclusive.
    pub unresolved: usize,
    /// Share of the `n` samples that are correct, with a case-clustered bootstrap CI.
    pub accuracy: Option<Estimate>,
    pub pass_at_1: PassAtK,
    pub pass_at_5: PassAtK,
    /// Lesion family only.
    pub lesion: Option<LesionAggregate>,
    pub rubric: Option<RubricAggregate>,
    pub bertscore: Option<BertScoreAggregate>,
    pub taxonomy: Option<TaxonomyDistribution>,
    /// Breadth families only.
    pub breadth: Option<BreadthAggregate>,
    /// Median words per answer over the group's answered samples (parse failures included), with a
    /// case-clustered bootstrap CI; `None` without an answer and in reports stored before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_words: Option<Estimate>,
}

/// pass@k in both readings. Never one without its label.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassAtK {
    pub k: usize,
    /// Reading (a): unbiased estimator over each task's n samples, `1 - C(n-c,k)/C(n,k)`, averaged over the
    /// tasks with `n >= k`; CI clustered by case.
    pub unbiased_estimator: Option<Estimate>,
    /// Tasks behind reading (a).
    pub unbiased_tasks: usize,
    /// Why reading (a) is missing or partial (tasks left out for having fewer than k samples).
    pub unbiased_note: Option<String>,
    /// Reading (b): the reference among the first k entries of one answer's ranked differential, averaged over
    /// samples; CI clustered by case.
    pub top_k_in_answer: Option<Estimate>,
    /// Samples behind reading (b).
    pub top_k_samples: usize,
    pub top_k_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LesionAggregate {
    pub type_accuracy: Option<Estimate>,
    pub location_accuracy: Option<Estimate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricAggregate {
    pub rubric_id: String,
    pub rubric_version: String,
    /// Samples with a rubric score.
    pub n: usize,
    /// Mean per dimension, rubric order.
    pub dimensions: Vec<DimensionMean>,
    pub overall: Option<Estimate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionMean {
    pub dimension: String,
    pub mean: Option<Estimate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BertScoreAggregate {
    pub n: usize,
    pub p: Option<Estimate>,
    pub r: Option<Estimate>,
    pub f: Option<Estimate>,
}

/// Error classes of the wrong answers in a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaxonomyDistribution {
    /// Wrong answers in the group.
    pub wrong: usize,
    /// Of those, with a class.
    pub labelled: usize,
    pub from_judges: usize,
    pub from_humans: usize,
    /// Every class, in taxonomy order, with its count and its share of the labelled answers.
    pub classes: Vec<CategoryShare>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryShare {
    pub category: ErrorCategory,
    pub count: usize,
    pub share: Option<Estimate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreadthAggregate {
    pub n: usize,
    pub accuracy: Option<Estimate>,
    /// Open VQA only.
    pub token_recall: Option<Estimate>,
    pub exact_match: Option<Estimate>,
    /// Multiple choice: answers with no recognisable choice (counted as wrong).
    pub extraction_failures: usize,
}

/// Agreement between the judges of a jury on one quantity, over the items all of them scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JuryAgreement {
    /// `rubric:<dimension>`, `rubric:overall`, `equivalence`, `taxonomy`.
    pub quantity: String,
    /// `alpha_interval`, `alpha_nominal`, `icc_2_1`, `quadratic_kappa`, `cohen_kappa`.
    pub measure: nmb_stats::Measure,
    pub judges: Vec<String>,
    pub items: usize,
    /// `None` when undefined (for example every judge gave the same score to every item).
    pub estimate: Option<Estimate>,
    pub note: Option<String>,
}

// ---------------------------------------------------------------------------------------------------------------
// Comparing two runs

/// `nmb compare RUN_A RUN_B`: the two runs on the tasks (and sample indices) both scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub run_a: String,
    pub run_b: String,
    pub model_a: String,
    pub model_b: String,
    /// The runs' display names (`--name`, else the model id or a local model's file stem).
    #[serde(default)]
    pub name_a: String,
    #[serde(default)]
    pub name_b: String,
    /// Score config hashes of the two reports compared.
    pub config_hash_a: String,
    pub config_hash_b: String,
    pub bootstrap: BootstrapConfig,
    /// One row per group (overall, then per level and family).
    pub groups: Vec<GroupComparison>,
    /// Structured answers: one row per NeuroVLM-Bench field, on the answers both runs gave for that field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub structured_fields: Vec<FieldComparison>,
    /// Per subgroup of each `--by` field both runs were scored with: the same paired tests on the subgroup's
    /// items.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgroups: Vec<SubgroupFieldComparison>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Two runs compared within each subgroup of one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubgroupFieldComparison {
    /// The `--by` spec both scorings were made with.
    pub by: String,
    pub subgroups: Vec<SubgroupComparison>,
    /// The subgroups with the largest and the smallest difference A − B (of those with at least 10 cases) and
    /// how far apart those differences are, with a stratified case-clustered interval: how much the difference
    /// itself varies between subgroups. `None` with fewer than two such subgroups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<nmb_stats::SubgroupGap<String>>,
}

/// Two runs on the paired items of one subgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubgroupComparison {
    pub subgroup: String,
    /// Cases behind the paired items.
    pub cases: usize,
    /// Fewer than 10 cases: shown, with a wide interval, and left out of the gap.
    pub few_cases: bool,
    pub items: usize,
    /// As in [`GroupComparison::paired`].
    pub paired: Option<nmb_stats::PairedComparison>,
    /// As in [`GroupComparison::mcnemar`].
    pub mcnemar: Option<nmb_stats::McNemar>,
    /// `paired`'s p-value adjusted (Holm, Benjamini–Hochberg) over this field's subgroups, one family: every
    /// subgroup with paired items. Absent where `paired` is, and in comparisons made before it was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_adjusted: Option<nmb_stats::AdjustedP>,
}

/// Two runs on one field of their structured answers: correct on that field or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldComparison {
    pub field: String,
    /// Paired answers whose reference has this field (for `diagnosis_detailed`: where both named the right
    /// class).
    pub items: usize,
    pub paired: nmb_stats::PairedComparison,
    /// Exact where every item is the only answer of its task, else cluster-adjusted by case.
    pub mcnemar: nmb_stats::McNemar,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupComparison {
    pub by: Breakdown,
    pub level: Option<Level>,
    pub family: Option<Family>,
    /// Paired items: (task, sample index) answered and scored in both runs.
    pub items: usize,
    /// Mean correctness of A and B and their difference A − B with a paired case-clustered bootstrap CI and
    /// p-value.
    pub paired: Option<nmb_stats::PairedComparison>,
    /// McNemar's test on the discordant items: exact where every item is the only answer of its task, else
    /// cluster-adjusted with cases as clusters; `test` says which.
    pub mcnemar: Option<nmb_stats::McNemar>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
