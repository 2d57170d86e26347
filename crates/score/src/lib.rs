//! Scoring: stored answers in, numbers out.
//!
//! Being built. So far it owns [`breadth`] (matching short answers of breadth items: closed VQA, open VQA,
//! multiple choice, against their references) and [`results`] (the serde types of scoring output that reports
//! read).

pub mod breadth;
pub mod lexicon;
pub mod matching;
pub mod parse;
pub mod results;
