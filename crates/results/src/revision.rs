//! The revision section of a score report: how answers in multi-turn consults move as evidence arrives, turn by
//! turn (first- and last-turn accuracy, changed top diagnoses, wrong → right and right → wrong), overall and per
//! level. Each sample's turns are in [`SampleScore::turns`](crate::sample::SampleScore::turns).

use nmb_stats::Estimate;
use nmb_suite::Level;
use serde::{Deserialize, Serialize};

/// The revision numbers of a run: all consults, then per level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionReport {
    pub overall: RevisionGroup,
    pub by_level: Vec<RevisionGroup>,
    /// What was left out and why (lesion consults, unresolved turns).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The consults of one group (all, or one level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionGroup {
    /// `None` for all levels together.
    pub level: Option<Level>,
    /// Consult samples with answered turns (answered, parse failures included).
    pub consults: usize,
    /// Cases behind them (the bootstrap's clusters).
    pub cases: usize,
    /// Consult samples left out: errored, pending, or without a reference diagnosis.
    pub left_out: usize,
    /// Answered turns of those consults, and of them unparseable and unresolved.
    pub turns: usize,
    pub unparseable_turns: usize,
    pub unresolved_turns: usize,
    pub first_turn: TurnAccuracy,
    pub last_turn: TurnAccuracy,
    /// Share of consults whose top diagnosis changed between the first and the last turn.
    pub changed_top_diagnosis: Rate,
    /// Share of consults with at least one wrong → right step between consecutive turns.
    pub wrong_to_right: Rate,
    /// Share of consults with at least one right → wrong step between consecutive turns (anchoring's cost).
    pub right_to_wrong: Rate,
}

/// Accuracy at one turn position over the consults whose turn was decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnAccuracy {
    /// Consults whose turn counts (correct, wrong or unparseable).
    pub n: usize,
    pub correct: usize,
    /// Counted in `n`, as wrong.
    pub unparseable: usize,
    /// Not counted in `n`.
    pub unresolved: usize,
    pub accuracy: Option<Estimate>,
}

/// A share of consults with a case-clustered bootstrap CI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Consults decided either way.
    pub n: usize,
    /// Of those, consults where it happened.
    pub count: usize,
    /// Consults left out because it could not be decided.
    pub undecided: usize,
    pub share: Option<Estimate>,
}
