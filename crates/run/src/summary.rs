//! The end-of-run summary `nmb eval` prints: one JSON object, or text lines saying what the run holds, what this
//! invocation did, and how to continue. The scores are not built here (this crate does not score): the caller
//! passes their JSON, and prints their table itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use nmb_requests::CountersSnapshot;

use crate::{ProgressSnapshot, RunOutcome};

/// An evaluation as it ended, for its summary.
pub struct Finished<'a> {
    pub outcome: &'a RunOutcome,
    /// The invocation's progress at the end.
    pub progress: ProgressSnapshot,
    /// The scheduler's counters at the end.
    pub counters: CountersSnapshot,
    pub elapsed: Duration,
    /// The invocation's request budget (`--max-requests`).
    pub max_requests: Option<u64>,
}

impl Finished<'_> {
    /// The summary as one JSON object; `scores` is the `scores` member (null when the run was not scored).
    pub fn json(&self, scores: Option<serde_json::Value>) -> serde_json::Value {
        let outcome = self.outcome;
        let p = &self.progress;
        let c = &self.counters;
        serde_json::json!({
            "run_id": outcome.run_id,
            "resumed": outcome.resumed,
            "stopped_early": outcome.stopped_early,
            "plan_errors": outcome.plan_errors,
            "invocation": {
                "requests": p.calls,
                "attempts": c.attempts,
                "retries": c.retries,
                "answers_already_stored": p.already_done,
                "answers_asked": p.asked,
                "answers_from_cache": p.cached,
                "samples_ok": p.ok,
                "samples_errored": p.errored,
                "tokens_in": p.tokens_in,
                "tokens_out": p.tokens_out,
                "elapsed_s": self.elapsed.as_secs_f64(),
            },
            "summary": outcome.summary,
            "all_errored": outcome.all_errored(),
            "error": outcome.all_errored_message(),
            "scores": scores,
        })
    }

    /// The warnings that go to stderr before the text summary: one per task that could not be planned, and the
    /// error of a run whose every sample errored.
    pub fn warnings(&self) -> Vec<String> {
        let errors = &self.outcome.plan_errors;
        let mut out: Vec<String> = errors
            .iter()
            .map(|e| format!("warning: task not run: {e}"))
            .collect();
        out.extend(
            self.outcome
                .all_errored_message()
                .map(|e| format!("error: {e}")),
        );
        out
    }

    /// The text summary before the scores, each line ending in a newline: the run's samples, what this
    /// invocation did, and how to continue or retry.
    pub fn text(&self) -> String {
        let outcome = self.outcome;
        let s = &outcome.summary;
        let classes = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = format!(
            "run {} {}: {} samples, {} ok, {} errored",
            s.run_id,
            s.status.as_str(),
            s.samples_total,
            s.samples_ok,
            s.samples_errored
        );
        if !s.errors_by_class.is_empty() {
            let _ = write!(out, " ({})", classes(&s.errors_by_class));
        }
        let _ = writeln!(out, ", {} pending", s.samples_pending);
        let _ = writeln!(out, "{}", self.invocation_line());
        if outcome.resumed {
            out.push_str("(resumed an existing run; --fresh starts a new one)\n");
        }
        if outcome.stopped_early {
            let _ = writeln!(
                out,
                "stopped after --max-requests {}; run the same command again to continue",
                self.max_requests.unwrap_or(0)
            );
        } else if s.samples_errored > 0 {
            let _ = writeln!(
                out,
                "errored samples keep their error class; run the same command with --resume {} to retry them",
                s.run_id
            );
        }
        out
    }

    /// The line said instead of scores (no newline): scoring was `skipped` (`--no-score`), or the run is
    /// unfinished.
    pub fn not_scored(&self, skipped: bool) -> String {
        match skipped {
            true => format!(
                "not scored (--no-score); `nmb score {}` scores it",
                self.outcome.summary.run_id
            ),
            false => "not scored: the run is unfinished".to_string(),
        }
    }

    /// What this invocation did (no newline): samples already done when it started, answers asked now (and the
    /// requests and attempts that took), answers taken from the response cache.
    pub fn invocation_line(&self) -> String {
        let p = &self.progress;
        format!(
            "this invocation: {} answer(s) already stored in this run; {} asked now ({} request(s), {} attempt(s), \
             {} errored); {} from the response cache; tokens in {} out {}; {}",
            p.already_done,
            p.asked,
            p.calls,
            self.counters.attempts,
            p.errored,
            p.cached,
            count(p.tokens_in),
            count(p.tokens_out),
            duration(self.elapsed.as_secs_f64())
        )
    }
}

/// `ok 40, errored 2 (timeout 2), 41 requests, 3.2 samples/s, ETA 27s, tokens in 12.3k out 4.1k`
pub fn progress_line(s: &ProgressSnapshot, counters: &CountersSnapshot) -> String {
    let mut out = format!("ok {}, errored {}", s.ok, s.errored);
    if !counters.errors_by_class.is_empty() {
        let classes: Vec<String> = counters
            .errors_by_class
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!(" ({})", classes.join(", ")));
    }
    out.push_str(&format!(", {} requests", s.calls));
    if counters.retries > 0 {
        out.push_str(&format!(" ({} retries)", counters.retries));
    }
    if s.cached > 0 {
        out.push_str(&format!(", {} from the store", s.cached));
    }
    let finished_here = (s.ok + s.errored) as f64;
    if s.elapsed_s > 0.5 && finished_here > 0.0 {
        let rate = finished_here / s.elapsed_s;
        let left = s.total.saturating_sub(s.done) as f64;
        out.push_str(&format!(
            ", {:.1} samples/s, ETA {}",
            rate,
            duration(left / rate)
        ));
    }
    out.push_str(&format!(
        ", tokens in {} out {}",
        count(s.tokens_in),
        count(s.tokens_out)
    ));
    out
}

/// A count as `9999`, `12.3k` or `12.3M`.
pub fn count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=9_999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Seconds as `42s`, `3m07s` or `2h05m`; `?` when not finite.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() {
        return "?".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations() {
        assert_eq!(count(9_999), "9999");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(12_345_678), "12.3M");
        assert_eq!(duration(42.2), "42s");
        assert_eq!(duration(187.0), "3m07s");
        assert_eq!(duration(7_500.0), "2h05m");
        assert_eq!(duration(f64::INFINITY), "?");
    }
}
