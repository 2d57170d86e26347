//! Scoring: stored answers in, numbers out.
//!
//! This crate owns turning a stored run into a [`nmb_results::ScoreReport`]: how a run is scored, as one typed
//! [`ScoringConfig`] checked before any model is asked; scoring a run by its id ([`score_run`]: the suite its
//! manifest records, the judges connected, the report stored); reading answers ([`parse`]), matching
//! diagnoses, lesion types and locations ([`lexicon`], [`matching`]), putting to the judges what rules cannot
//! decide (through `nmb-judges`), the error taxonomy with human labels from CSV ([`labels`]), BERTScore of
//! rationales ([`semantic`]), breadth answers ([`breadth`]), structured (NeuroVLM-Bench) answers
//! ([`structured`]), pass@k in both readings, aggregates with bootstrap CIs ([`aggregate`]), the sections built
//! from them (a judge's stability across repeats, [`repeats`]; revision across the turns of multi-turn consults,
//! [`revision`]; label sets, [`label_set`]), `nmb rubric lint` ([`criteria`]) and finding a report's thinking
//! probe in the store ([`stored_probe`]).
//!
//! It does not own the types it writes (`nmb-results`, which every reader of scores uses instead of this
//! crate), the judges (`nmb-judges`: their questions, panel, jury and pairwise votes), the statistics themselves
//! (`nmb-stats`), BERTScore's arithmetic (`nmb-bertscore`), talking to APIs (`nmb-requests`), recording calls
//! (`nmb-record`), the tables of answers (`nmb-store`), or rendering reports (`nmb-report`). Nor does it know
//! how a judge is loaded: the caller connects judges ([`ConnectJudges`]; the CLI through `nmb-run`, which can
//! load `local:` models), so scoring never depends on the evaluation loop or the local engine. Command-line
//! flags are parsed into a [`ScoringConfig`] by the CLI; nothing here reads them.
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
//! Judge calls go through the same backends, scheduler and store as model calls (see `nmb_judges::judge` for how
//! they are stored, cached and resumed). Scoring is deterministic: the same stored answers (the model's and the judges')
//! and the same options give the same report, byte for byte.

pub mod aggregate;
pub mod breadth;
mod config;
pub mod criteria;
mod error;
pub mod label_set;
pub mod labels;
pub mod lexicon;
pub mod matching;
pub mod parse;
pub mod probe;
pub mod repeats;
pub mod revision;
mod run;
mod scorer;
pub mod semantic;
pub mod structured;
mod thinking;

pub use config::{ConnectJudges, RubricChoice, ScoringConfig, SuiteOverride};
pub use error::{ConnectError, ScoreError};
pub use run::{score_run, score_suite, shown_images, suite_source};
pub use scorer::{refuse_blind_judges, score_loaded, JudgeImages, ScoreOptions, MAX_RANK};
pub use semantic::BertScoreSetting;
pub use thinking::stored_probe;
