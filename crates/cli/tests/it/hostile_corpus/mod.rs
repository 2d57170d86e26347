//! The hostile corpus of outside bytes that are not images (those are `hostile.rs`): model servers that
//! misbehave, GGUF files and chat templates, tables, text meant for a terminal, stores holding values at the
//! limits, and the viewer under abuse. Each kind is a module with a `cases` function and one test that runs them.
//!
//! A case runs `nmb` once, or drives a running `nmb serve` itself, and must end with a clear error or a correct
//! answer: exit 1 or 2 with the words it expects (or exit 0 with them), never "panicked", an abort or another
//! signal, a backtrace, or a string the case forbids; under 30 s and 1 GB of peak RSS; and afterwards the store it
//! used must still list its runs (`nmb runs list` exits 0). Nothing here needs a download, so nothing is skipped.

mod gguf;
mod providers;
mod servers;
mod store;
mod tables;
mod templates;
mod terminal;
mod viewer;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::measured::{run, Run};
use crate::common::nmb;

const TIME_LIMIT: Duration = Duration::from_secs(30);
const RSS_LIMIT_KB: i64 = 1 << 20;
/// What no case may print, whatever it expects.
const ALWAYS_FORBIDDEN: [&str; 3] = ["panicked", "stack backtrace", "RUST_BACKTRACE"];

/// What a case does.
pub enum Action {
    /// Runs the binary once, measured.
    Nmb(Command),
    /// Drives something itself (a running `nmb serve`, say) and says what went wrong, if anything.
    Custom(Box<dyn FnOnce() -> Result<(), String>>),
}

/// How a case must end.
pub enum Expect {
    /// Exit 1 or 2, saying each of these.
    Refused(Vec<String>),
    /// Exit 0, saying each of these.
    Answered(Vec<String>),
}

/// One hostile input and how nmb must treat it.
pub struct Case {
    pub name: String,
    pub action: Action,
    pub expect: Expect,
    /// The runs directory the case used; it must still list afterwards.
    pub runs: PathBuf,
    /// Strings that must not appear in what nmb printed (beyond [`ALWAYS_FORBIDDEN`]).
    pub forbid: Vec<String>,
    /// Kept alive until the case has run (a fake server, a temporary directory).
    keep: Vec<Box<dyn Any>>,
}

impl Case {
    /// A case that must end with exit 1 or 2 and say each of `says`.
    pub fn refused(name: &str, command: Command, runs: &Path, says: &[&str]) -> Case {
        Case::new(
            name,
            Action::Nmb(command),
            runs,
            Expect::Refused(owned(says)),
        )
    }

    /// A case that must end with exit 0 and say each of `says`.
    pub fn answered(name: &str, command: Command, runs: &Path, says: &[&str]) -> Case {
        Case::new(
            name,
            Action::Nmb(command),
            runs,
            Expect::Answered(owned(says)),
        )
    }

    /// A case that checks itself; its store must still list afterwards.
    pub fn custom(
        name: &str,
        runs: &Path,
        check: impl FnOnce() -> Result<(), String> + 'static,
    ) -> Case {
        let action = Action::Custom(Box::new(check));
        Case::new(name, action, runs, Expect::Answered(Vec::new()))
    }

    fn new(name: &str, action: Action, runs: &Path, expect: Expect) -> Case {
        Case {
            name: name.to_string(),
            action,
            expect,
            runs: runs.to_path_buf(),
            forbid: Vec::new(),
            keep: Vec::new(),
        }
    }

    /// Keeps `thing` (a server, a directory) alive until the case has run.
    pub fn keep(mut self, thing: impl Any) -> Case {
        self.keep.push(Box::new(thing));
        self
    }

    /// Also fails the case if nmb prints `text`.
    pub fn forbid(mut self, text: &str) -> Case {
        self.forbid.push(text.to_string());
        self
    }
}

fn owned(says: &[&str]) -> Vec<String> {
    says.iter().map(|s| s.to_string()).collect()
}

/// Runs every case and fails with all that went wrong at once.
pub fn check_all(cases: Vec<Case>) {
    let total = cases.len();
    let wrong: Vec<String> = cases.into_iter().filter_map(check).collect();
    assert!(
        wrong.is_empty(),
        "{} of {total} hostile cases went wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// What is wrong with one case, if anything.
fn check(case: Case) -> Option<String> {
    let name = case.name.clone();
    let started = Instant::now();
    let problem = match case.action {
        Action::Nmb(command) => judge(&run(command, 2 * TIME_LIMIT), &case.expect, &case.forbid),
        Action::Custom(check) => check().err(),
    };
    let problem = problem.or_else(|| {
        (started.elapsed() > TIME_LIMIT).then(|| format!("took {:?}", started.elapsed()))
    });
    drop(case.keep);
    let problem = problem.or_else(|| still_lists(&case.runs));
    problem.map(|p| format!("{name}: {p}"))
}

fn judge(run: &Run, expect: &Expect, forbid: &[String]) -> Option<String> {
    let said = run.said();
    let (codes, says): (&[i32], _) = match expect {
        Expect::Refused(says) => (&[1, 2], says),
        Expect::Answered(says) => (&[0], says),
    };
    if !codes.contains(&run.code) {
        return Some(format!(
            "exit {} (expected {codes:?}); said: {}",
            run.code,
            excerpt(&said)
        ));
    }
    if run.peak_rss_kb > RSS_LIMIT_KB {
        return Some(format!("peak RSS {} MB", run.peak_rss_kb / 1024));
    }
    let forbidden = ALWAYS_FORBIDDEN
        .iter()
        .copied()
        .chain(forbid.iter().map(String::as_str));
    if let Some(bad) = forbidden.into_iter().find(|bad| said.contains(bad)) {
        return Some(format!("said {bad:?}: {}", excerpt(&said)));
    }
    let missing = says.iter().find(|s| !said.contains(s.as_str()))?;
    Some(format!("does not say {missing:?}: {}", excerpt(&said)))
}

/// `nmb runs list` on the case's store must still work (a store that exists: a case may refuse before making one).
fn still_lists(runs: &Path) -> Option<String> {
    if !runs.exists() {
        return None;
    }
    let out = nmb(runs, &["runs", "list"]);
    (!out.status.success()).then(|| {
        let said = format!(
            "{}{}",
            crate::common::text(&out.stdout),
            crate::common::text(&out.stderr)
        );
        format!("`nmb runs list` fails afterwards: {}", excerpt(&said))
    })
}

/// At most 2,000 characters of what was said, escaped, so one case's flood does not drown the others.
fn excerpt(said: &str) -> String {
    let cut: String = said.chars().take(2000).collect();
    format!("{cut:?}")
}

/// The corpus as a whole: every kind holds cases, at least 40 in all. Building a case runs nothing (servers are
/// started and files written, but no command runs), so counting them is cheap.
#[test]
fn the_corpus_holds_at_least_40_cases_of_every_kind() {
    type Cases = fn(&Path) -> Vec<Case>;
    let kinds: [(&str, Cases); 8] = [
        ("gguf", gguf::cases),
        ("providers", providers::cases),
        ("servers", servers::cases),
        ("store", store::cases),
        ("tables", tables::cases),
        ("templates", templates::cases),
        ("terminal", terminal::cases),
        ("viewer", viewer::cases),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut counts = Vec::new();
    for (kind, cases) in kinds {
        let dir = tmp.path().join(kind);
        std::fs::create_dir_all(&dir).unwrap();
        counts.push((kind, cases(&dir).len()));
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    assert!(
        counts.iter().all(|(_, n)| *n > 0),
        "a kind without cases: {counts:?}"
    );
    assert!(total >= 40, "{total} cases: {counts:?}");
}
