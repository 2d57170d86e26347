//! Scoring: stored answers in, numbers out.
//!
//! This crate owns turning a stored run into a [`results::ScoreReport`]: how a run is scored, as one typed
//! [`ScoringConfig`] checked before any model is asked; scoring a run by its id ([`score_run`]: the suite its
//! manifest records, the judges connected, the report stored); reading answers ([`parse`]), matching
//! diagnoses, lesion types and locations ([`lexicon`], [`matching`]), asking LLM judges what rules cannot decide
//! ([`judge`], [`prompts`], [`jury`]), rubric grading ([`rubric`]), criterion rubrics in HealthBench's form with
//! their scoring rule and `nmb rubric lint` ([`criteria`]), the error taxonomy with human labels from CSV
//! ([`labels`]), BERTScore of rationales ([`semantic`]), breadth answers ([`breadth`]), pass@k in both readings,
//! aggregates with bootstrap CIs ([`aggregate`]), a judge's stability across repeats ([`stability`]), revision across the turns of multi-turn consults
//! ([`revision`]), paired comparison of two runs ([`compare`]), what showing a model's thinking does to the judges
//! ([`thinking_probe`]) and keeping reports in the store ([`stored`]).
//!
//! It does not own the statistics themselves (`nmb-stats`), BERTScore's arithmetic (`nmb-bertscore`), talking to
//! APIs (`nmb-requests`), recording calls (`nmb-record`), the tables of answers (`nmb-store`), or rendering
//! reports (`nmb-report`). Nor does it know how a judge is loaded: the caller connects judges ([`ConnectJudges`];
//! the CLI through `nmb-run`, which can load `local:` models), so scoring never depends on the evaluation loop or
//! the local engine. Command-line flags are parsed into a [`ScoringConfig`] by the CLI; nothing here reads them.
//!
//! # What is scored how
//!
//! | family | correct when | also |
//! |---|---|---|
//! | differential | the first entry of the ranked differential matches the reference diagnosis | rank of the first match (pass@k reading (b)), rubric, taxonomy, BERTScore of the rationale if the key has one |
//! | rationale | the stated diagnosis matches | rubric, taxonomy, BERTScore of the explanation |
//! | lesion | lesion type and location both match | type and location accuracy, rubric, taxonomy |
//! | closed/open VQA, multiple choice | see [`breadth`] | token recall, exact match, extraction failures |
//!
//! Matching is rules first (normalisation, abbreviations, the answer key's synonyms, the lexicon's disease
//! hierarchy), then, only for pairs the rules leave inconclusive, the judge (or jury). Without a judge an
//! inconclusive pair counts as no match and the sample is flagged `unresolved`. Errored and pending samples and
//! samples without a reference are never counted as wrong; parse failures are (and are counted apart).
//!
//! A multi-turn consult is scored on its last turn. [`revision`] also reads every earlier turn (by the same
//! parser and rules, reusing judge verdicts already given, never asking new ones) for first- and last-turn
//! accuracy, changed top diagnoses and wrong → right / right → wrong steps.
//!
//! Judge calls go through the same backends, scheduler and store as model calls (see [`judge`] for how they are
//! stored, cached and resumed). Scoring is deterministic: the same stored answers (the model's and the judges')
//! and the same options give the same report, byte for byte.

pub mod aggregate;
pub mod breadth;
mod config;
pub mod criteria;
mod error;
pub mod judge;
mod judge_error;
pub mod jury;
pub mod label_set;
pub mod labels;
pub mod lexicon;
pub mod matching;
pub mod pairwise;
pub mod parse;
pub mod prompts;
pub mod repeats;
pub mod revision;
mod rubric_prompt;
mod run;
mod scorer;
pub mod semantic;
pub mod structured;
mod thinking;

pub use config::{ConnectError, ConnectJudges, RubricChoice, ScoringConfig, SuiteOverride};
pub use error::ScoreError;
pub use judge::{JudgeModel, Panel};
pub use run::{score_run, score_suite, suite_source};
pub use scorer::{score_loaded, ScoreOptions, MAX_RANK};
pub use semantic::BertScoreSetting;
pub use thinking::stored_probe;
