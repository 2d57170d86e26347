//! Per-sample scores: what `nmb score` writes for each planned sample of a run (a score report's `samples[]`),
//! from its status and parsed answer to every judge's verdict, and the verdicts' parts (matches, rubric grades,
//! error classes, breadth, consult turns).
//!
//! [`SampleScore::new`] is the one place a sample's score is first built; every verdict starts empty and the
//! scorer fills in what applies.

use std::collections::BTreeMap;

use nmb_suite::{Family, Level};
use serde::{Deserialize, Serialize};

/// One repeat's rubric grade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatGrade {
    /// Dimension id to score, empty when this repeat gave no valid answer.
    pub scores: BTreeMap<String, u8>,
    pub overall: Option<u8>,
}

/// How a jury's verdicts become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Rubric: mean of the judges' scores. Yes/no and class verdicts: the share of "yes" must exceed one half
    /// (for classes, as for majority).
    Mean,
    /// Rubric: the most frequent score per dimension (ties to the lower score). Yes/no: more than half say yes.
    /// Classes: the most frequent class (ties to the earliest-listed judge's choice among the tied).
    Majority,
}

impl Aggregation {
    pub fn as_str(self) -> &'static str {
        match self {
            Aggregation::Mean => "mean",
            Aggregation::Majority => "majority",
        }
    }
}

/// What became of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleStatus {
    /// Answered, parsed and scored.
    Ok,
    /// The call failed (after retries); not an answer. Excluded from accuracy.
    Errored,
    /// Never answered (the run is unfinished). Excluded from accuracy.
    Pending,
    /// Answered, but the answer could not be parsed into the shape the family needs. Counts as wrong.
    ParseFailed,
    /// The task has no reference for what it asks. Excluded from accuracy.
    NoReference,
}

impl SampleStatus {
    /// Whether the sample is an answer that counts towards accuracy.
    pub fn is_scored(self) -> bool {
        matches!(self, SampleStatus::Ok | SampleStatus::ParseFailed)
    }
}

/// The scoring of one sample (one answer; for multi-turn tasks, the last turn's answer, with every turn in
/// [`SampleScore::turns`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleScore {
    pub task_id: String,
    pub sample_index: u32,
    pub case_id: String,
    pub family: Family,
    pub level: Level,
    /// `disease_group` from the task's or case's metadata.
    pub disease_group: Option<String>,
    /// Imaging modalities of the case's images (turn images included), e.g. `MRI`, `CT+MRI`; `none` without.
    pub modality: String,
    /// The case's metadata, verbatim (source, organ, synthetic, ...).
    pub case_metadata: BTreeMap<String, String>,
    pub status: SampleStatus,
    /// The store's error class of an errored sample (`rate_limit`, `timeout`, ...).
    pub error_class: Option<String>,
    /// The parsed answer (also for parse failures: whatever could be read).
    pub parsed: Option<ParsedAnswer>,
    /// Why parsing failed.
    pub parse_error: Option<String>,
    /// Counts towards accuracy: the family's main criterion was met. `None` unless `status.is_scored()`.
    pub correct: Option<bool>,
    /// Some match needed for `correct` stayed inconclusive (no judge, or the judges failed); `correct` is then
    /// `false`.
    pub unresolved: bool,
    /// Differential and rationale families: how the answer's diagnoses were matched.
    pub diagnosis: Option<DiagnosisScore>,
    /// Lesion family: type and location matches.
    pub lesion: Option<LesionScore>,
    pub rubric: Option<RubricResult>,
    pub bertscore: Option<BertScoreResult>,
    /// Set for wrong answers only.
    pub taxonomy: Option<TaxonomyResult>,
    /// Breadth families (closed/open VQA, multiple choice).
    pub breadth: Option<BreadthVerdict>,
    /// Structured family: each field's outcome and the safety flags raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::structured::StructuredVerdict>,
    /// Consults (multi-turn differential and rationale tasks): every answered turn's outcome and top diagnosis,
    /// in turn order (the revision section's numbers are computed from them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<TurnScore>>,
    /// Criterion rubric: each criterion met or not, and the answer's score, when its task has criteria.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<crate::criteria::score::CriteriaResult>,
    /// A context probe's sample (`nmb eval --probe`): the wrong diagnosis suggested, and whether the answer's
    /// first diagnosis is that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeAnswer>,
    /// What is counted of the final answer, for every sample the model answered (stored flat, beside the
    /// other fields).
    #[serde(flatten)]
    pub facts: AnswerFacts,
}

impl SampleScore {
    /// Sample `sample_index` of task `task_id` (of case `case_id`) before it is scored: its identity, status
    /// `ok`, modality `none`, and every verdict empty. The one place a `SampleScore` is built; the scorer fills
    /// in what applies, so a new field is added here and nowhere else.
    pub fn new(
        task_id: impl Into<String>,
        sample_index: u32,
        case_id: impl Into<String>,
        family: Family,
        level: Level,
    ) -> SampleScore {
        SampleScore {
            task_id: task_id.into(),
            sample_index,
            case_id: case_id.into(),
            family,
            level,
            disease_group: None,
            modality: "none".into(),
            case_metadata: BTreeMap::new(),
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
            structured: None,
            turns: None,
            criteria: None,
            probe: None,
            facts: AnswerFacts::default(),
        }
    }
}

/// A context probe's sample (`nmb eval --probe`): the wrong diagnosis it was suggested and whether its first
/// diagnosis is that one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    pub suggested: String,
    pub follows: bool,
}

/// What is counted of every answered sample's final answer, whatever its family: the per-answer inputs of
/// metrics such as the median answer length. [`AnswerFacts::of`] is the one place they are computed, so a new
/// per-answer count is a field and a line here, and every `SampleScore` carries it. Each field is `None` for
/// errored and pending samples and in reports stored before it was counted (and then not written, so that
/// stored reports read back to the same bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerFacts {
    /// Words in the final answer, split at white space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_words: Option<usize>,
    /// The final answer stopped at the token limit (the API's finish reason said so). `false` where the API
    /// gave no reason, and for answers stored before finish reasons were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_token_limit: bool,
}

impl AnswerFacts {
    /// The counts of one final answer, and whether it stopped at the token limit (its finish reason as the
    /// API gave it; `None` when unknown).
    pub fn of(text: &str, finish_reason: Option<&str>) -> AnswerFacts {
        AnswerFacts {
            answer_words: Some(text.split_whitespace().count()),
            at_token_limit: finish_reason.is_some_and(nmb_chat::stopped_at_token_limit),
        }
    }
}

/// How an answer was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerFormat {
    /// A JSON object (possibly inside a code fence or surrounded by prose).
    Json,
    /// A numbered or bulleted list.
    NumberedList,
    /// Labelled lines such as `Diagnosis: ...`, `Lesion type: ...`.
    LabelledLines,
    /// Prose, from which a diagnosis was taken by phrase ("most likely diagnosis is ...").
    FreeText,
    /// Short answer taken verbatim (breadth items).
    Verbatim,
}

/// What was read from an answer. Fields a family does not use stay empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParsedAnswer {
    pub format: Option<AnswerFormat>,
    /// Ranked differential, most likely first. Every entry is kept; matching looks at the first `max_rank` (the
    /// report's matching settings). A rationale answer's single diagnosis is a one-entry list.
    pub differential: Vec<RankedDiagnosis>,
    pub final_diagnosis: Option<String>,
    pub lesion_type: Option<String>,
    pub lesion_location: Option<String>,
    pub findings: Option<String>,
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedDiagnosis {
    /// 1-based.
    pub rank: u32,
    pub diagnosis: String,
    pub evidence: Option<String>,
}

/// Which step decided a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchMethod {
    /// Equal (or one contains the other, or the same lexicon entry) after normalising case, punctuation,
    /// spelling and abbreviations.
    Normalisation,
    /// Equal to one of the answer key's synonyms after normalisation.
    Synonym,
    /// An LLM judge (or jury) decided.
    Judge,
}

/// The outcome of comparing one candidate with the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchOutcome {
    Match,
    NoMatch,
    /// Neither rule decided and no judge decided either.
    Inconclusive,
}

/// Diagnosis matching of one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiagnosisScore {
    /// The answer key's diagnosis.
    pub reference: String,
    /// 1-based rank of the first matching entry, if any within `max_rank`.
    pub matched_rank: Option<u32>,
    /// How that entry was matched.
    pub method: Option<MatchMethod>,
    /// Reading (b) per sample: the reference is among the first 1 / 5 entries.
    pub top_1: bool,
    pub top_5: bool,
    /// Each entry examined, in rank order (matching stops at the first match).
    pub candidates: Vec<CandidateMatch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateMatch {
    pub rank: u32,
    pub diagnosis: String,
    /// The candidate after normalisation (what the rules compared).
    pub normalised: String,
    pub outcome: MatchOutcome,
    pub method: Option<MatchMethod>,
    /// The reference or synonym it matched, for rule matches.
    pub matched: Option<String>,
    /// Why the rules alone did not decide (`granularity`, `unknown term`, ...).
    pub rule_note: Option<String>,
    /// The judges' decision, when asked.
    pub judge: Option<JudgeDecision>,
}

/// A yes/no question put to the judges (are these clinically equivalent?), and their combined answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeDecision {
    pub aggregation: Aggregation,
    /// `None` when no judge gave a valid verdict.
    pub equivalent: Option<bool>,
    /// Share of valid verdicts saying yes.
    pub yes_share: Option<f64>,
    pub verdicts: Vec<JudgeVerdict>,
}

/// One judge's answer to one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeVerdict {
    /// The judge's model spec.
    pub judge: String,
    /// `None` when its answer never became valid or its calls failed.
    pub equivalent: Option<bool>,
    pub rationale: Option<String>,
    /// Calls it took (1 + re-asks).
    pub attempts: u32,
    /// Why there is no verdict: the validation error of the last answer, or the call's error class.
    pub failure: Option<String>,
    pub self_grading: bool,
    /// Each repeat's verdict when the judge was asked more than once (`equivalent` is their median).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Option<bool>>,
}

/// Lesion recognition: type and location compared separately; `correct` needs both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LesionScore {
    pub reference_type: Option<String>,
    pub reference_location: Option<String>,
    pub type_match: Option<FieldMatch>,
    pub location_match: Option<FieldMatch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldMatch {
    pub candidate: Option<String>,
    pub outcome: MatchOutcome,
    pub method: Option<MatchMethod>,
    pub rule_note: Option<String>,
    pub judge: Option<JudgeDecision>,
}

/// Rubric grading of one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricResult {
    pub rubric_id: String,
    pub rubric_version: String,
    pub rubric_hash: String,
    pub aggregation: Aggregation,
    /// Combined score per dimension, rubric order; `None` for a dimension no judge scored validly.
    pub scores: Vec<DimensionScore>,
    pub overall: Option<f64>,
    /// Each judge's scores.
    pub judges: Vec<RubricVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionScore {
    pub dimension: String,
    pub score: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricVerdict {
    pub judge: String,
    /// Dimension id to score (0..=5), empty when no valid answer came.
    pub scores: BTreeMap<String, u8>,
    pub overall: Option<u8>,
    pub rationale: Option<String>,
    pub attempts: u32,
    pub failure: Option<String>,
    pub self_grading: bool,
    /// Each repeat's grade when the judge was asked more than once (`scores` and `overall` are their medians).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<RepeatGrade>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BertScoreResult {
    pub p: f64,
    pub r: f64,
    pub f: f64,
}

/// The five error classes of the Neural-MedBench taxonomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// Missed or misread an imaging finding.
    PerceptualFailure,
    /// Correct findings, wrong synthesis.
    ReasoningFailure,
    KnowledgeGap,
    /// Claims not tied to the case's evidence.
    GroundingError,
    /// Findings not present in the images.
    VisualHallucination,
}

impl ErrorCategory {
    pub const ALL: [ErrorCategory; 5] = [
        ErrorCategory::PerceptualFailure,
        ErrorCategory::ReasoningFailure,
        ErrorCategory::KnowledgeGap,
        ErrorCategory::GroundingError,
        ErrorCategory::VisualHallucination,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::PerceptualFailure => "perceptual_failure",
            ErrorCategory::ReasoningFailure => "reasoning_failure",
            ErrorCategory::KnowledgeGap => "knowledge_gap",
            ErrorCategory::GroundingError => "grounding_error",
            ErrorCategory::VisualHallucination => "visual_hallucination",
        }
    }

    /// Accepts the snake_case id or the plain words, any case ("Perceptual failure", "knowledge-gap").
    pub fn parse(text: &str) -> Option<ErrorCategory> {
        let norm: String = text
            .trim()
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let norm = norm.trim_matches('_');
        ErrorCategory::ALL.into_iter().find(|c| c.as_str() == norm)
    }
}

/// Who assigned an error class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelSource {
    Judge,
    Human,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaxonomyResult {
    /// `None` when no judge gave a valid label and no human label exists.
    pub category: Option<ErrorCategory>,
    pub justification: Option<String>,
    pub source: Option<LabelSource>,
    /// The human annotator (from the CSV), for human labels.
    pub annotator: Option<String>,
    /// Each judge's label (also kept when a human label overrides them, for comparison).
    pub judges: Vec<TaxonomyVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaxonomyVerdict {
    pub judge: String,
    pub category: Option<ErrorCategory>,
    pub justification: Option<String>,
    pub attempts: u32,
    pub failure: Option<String>,
    pub self_grading: bool,
}

/// The verdict on one answer to one breadth item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreadthVerdict {
    /// Counts towards accuracy.
    pub correct: bool,
    /// What was taken from the answer: the choice letter, the yes/no polarity, or the normalised short answer.
    pub extracted: Option<String>,
    /// No answer could be extracted (multiple choice: no letter or option text found; closed yes/no: neither
    /// yes nor no). Counted separately; such an answer is also not correct.
    pub extraction_failed: bool,
    /// Open VQA: share of normalised reference tokens present in the answer.
    pub token_recall: Option<f64>,
    /// Open VQA: the whole normalised answer equals the normalised reference.
    pub exact_match: Option<bool>,
}

/// What one turn's answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The top diagnosis matches the reference.
    Correct,
    /// It does not.
    Wrong,
    /// No diagnosis could be read from the turn's answer; counts as wrong.
    Unparseable,
    /// The rules cannot decide the match and no judge verdict on the same candidate exists; neither right nor
    /// wrong.
    Unresolved,
}

impl TurnOutcome {
    /// `Some(true)` correct, `Some(false)` wrong or unparseable, `None` unresolved.
    pub fn correct(self) -> Option<bool> {
        match self {
            TurnOutcome::Correct => Some(true),
            TurnOutcome::Wrong | TurnOutcome::Unparseable => Some(false),
            TurnOutcome::Unresolved => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Correct => "correct",
            TurnOutcome::Wrong => "wrong",
            TurnOutcome::Unparseable => "unparseable",
            TurnOutcome::Unresolved => "unresolved",
        }
    }
}

/// One answered turn of a consult sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnScore {
    /// 0 is the opening question.
    pub turn_index: u32,
    pub outcome: TurnOutcome,
    /// The top-ranked diagnosis as written; `None` when the turn is unparseable.
    pub top_diagnosis: Option<String>,
    /// It after normalisation (what the rules compared).
    pub normalised: Option<String>,
    /// How the match was decided: a rule (`normalisation`, `synonym`), or `judge` when a judge verdict on the
    /// same candidate for this task's final answers was reused.
    pub method: Option<MatchMethod>,
    /// Why the rules decided as they did (or could not), or why the turn could not be read.
    pub note: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_categories_parse_from_ids_and_words() {
        for c in ErrorCategory::ALL {
            assert_eq!(ErrorCategory::parse(c.as_str()), Some(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
        assert_eq!(
            ErrorCategory::parse(" Perceptual failure "),
            Some(ErrorCategory::PerceptualFailure)
        );
        assert_eq!(
            ErrorCategory::parse("knowledge-gap"),
            Some(ErrorCategory::KnowledgeGap)
        );
        assert_eq!(ErrorCategory::parse("misc"), None);
    }

    #[test]
    fn sample_scores_round_trip_through_json() {
        let s = SampleScore {
            disease_group: Some("vascular".into()),
            modality: "MRI".into(),
            status: SampleStatus::ParseFailed,
            parsed: Some(ParsedAnswer::default()),
            parse_error: Some("no diagnosis found".into()),
            correct: Some(false),
            ..SampleScore::new("c/dx", 0, "c", Family::Differential, Level::Direct)
        };
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("\"status\":\"parse_failed\""), "{text}");
        let back: SampleScore = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert!(SampleStatus::ParseFailed.is_scored());
        assert!(!SampleStatus::Errored.is_scored());
    }

    #[test]
    fn a_new_sample_has_its_identity_and_no_verdict() {
        let s = SampleScore::new("c/dx", 3, "c", Family::Lesion, Level::Complex);
        let json = serde_json::to_value(&s).unwrap();
        let want = serde_json::json!({
            "task_id": "c/dx", "sample_index": 3, "case_id": "c", "family": "lesion", "level": "complex",
            "disease_group": null, "modality": "none", "case_metadata": {}, "status": "ok", "error_class": null,
            "parsed": null, "parse_error": null, "correct": null, "unresolved": false, "diagnosis": null,
            "lesion": null, "rubric": null, "bertscore": null, "taxonomy": null, "breadth": null
        });
        assert_eq!(json, want);
    }
}
