//! Live counts of one invocation, for a progress bar or plain log lines. Cheap atomics, polled by the caller.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use serde::Serialize;

/// Counters updated as samples finish. Samples, not calls: a call with `n = 5` finishes five samples.
#[derive(Debug)]
pub struct Progress {
    started: Instant,
    total: AtomicU64,
    /// Samples already done when this invocation started (a resumed run).
    already_done: AtomicU64,
    ok: AtomicU64,
    errored: AtomicU64,
    /// Sample turns answered from the store instead of a request.
    cached: AtomicU64,
    /// Samples whose last answer a request of this invocation brought.
    asked: AtomicU64,
    /// Calls this invocation sent (each may have retried).
    calls: AtomicU64,
    tokens_in: AtomicU64,
    tokens_out: AtomicU64,
    budget_exhausted: AtomicBool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgressSnapshot {
    pub total: u64,
    pub done: u64,
    /// Samples that were already done when this invocation started (a resumed run).
    pub already_done: u64,
    /// Samples finished in this invocation: `asked` + those answered from the store.
    pub ok: u64,
    pub errored: u64,
    /// Samples whose answer a request of this invocation brought.
    pub asked: u64,
    /// Sample turns answered from the response cache (answers stored by this or an earlier run).
    pub cached: u64,
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub elapsed_s: f64,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            started: Instant::now(),
            total: AtomicU64::new(0),
            already_done: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            errored: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            asked: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            tokens_in: AtomicU64::new(0),
            tokens_out: AtomicU64::new(0),
            budget_exhausted: AtomicBool::new(false),
        }
    }
}

impl Progress {
    pub(crate) fn start(&self, total: u64, already_done: u64) {
        self.total.store(total, Relaxed);
        self.already_done.store(already_done, Relaxed);
    }

    pub(crate) fn sample_ok(&self) {
        self.ok.fetch_add(1, Relaxed);
    }

    /// A sample finished with an answer a request brought.
    pub(crate) fn sample_answered(&self) {
        self.asked.fetch_add(1, Relaxed);
        self.sample_ok();
    }

    pub(crate) fn sample_errored(&self) {
        self.errored.fetch_add(1, Relaxed);
    }

    pub(crate) fn cache_hit(&self) {
        self.cached.fetch_add(1, Relaxed);
    }

    pub(crate) fn call_sent(&self, tokens_in: u64, tokens_out: u64) {
        self.tokens_in.fetch_add(tokens_in, Relaxed);
        self.tokens_out.fetch_add(tokens_out, Relaxed);
    }

    /// Takes one request from the budget; false when the budget is spent.
    pub(crate) fn take_request(&self, max: Option<u64>) -> bool {
        let n = self.calls.fetch_add(1, Relaxed);
        match max {
            Some(max) if n >= max => {
                self.calls.fetch_sub(1, Relaxed);
                self.budget_exhausted.store(true, Relaxed);
                false
            }
            _ => true,
        }
    }

    pub fn budget_exhausted(&self) -> bool {
        self.budget_exhausted.load(Relaxed)
    }

    pub fn snapshot(&self) -> ProgressSnapshot {
        let (ok, errored) = (self.ok.load(Relaxed), self.errored.load(Relaxed));
        let already_done = self.already_done.load(Relaxed);
        ProgressSnapshot {
            total: self.total.load(Relaxed),
            done: already_done + ok + errored,
            already_done,
            ok,
            errored,
            asked: self.asked.load(Relaxed),
            cached: self.cached.load(Relaxed),
            calls: self.calls.load(Relaxed),
            tokens_in: self.tokens_in.load(Relaxed),
            tokens_out: self.tokens_out.load(Relaxed),
            elapsed_s: self.started.elapsed().as_secs_f64(),
        }
    }
}
