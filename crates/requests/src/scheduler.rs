//! Sending many calls at once without tripping over rate limits.
//!
//! A call first takes a permit from its [`Lane`] (one per backend, with an adaptive limit), then one from the
//! global semaphore, and holds both only while the HTTP exchange runs, never while it waits to retry. A 429
//! halves the lane's limit (once per window: calls started before the last cut don't cut again); a run of
//! successes adds one back, never above the configured limit and never below 1.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use rand::Rng;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::backend::{Backend, BoxFuture, ChatRequest, Completion};
use crate::error::{CallError, ErrorClass};

/// Classes worth another attempt: the same request may well succeed later.
pub const RETRYABLE: [ErrorClass; 5] = [
    ErrorClass::RateLimit,
    ErrorClass::ServerError,
    ErrorClass::Network,
    ErrorClass::Timeout,
    ErrorClass::MalformedResponse,
];

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts after the first one.
    pub max_retries: u32,
    /// Backoff without Retry-After: a uniform draw from [0, min(max_delay, base_delay * 2^(retry-1))].
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// The longest Retry-After honoured; a server asking for more ends the call with its error.
    pub max_retry_after: Duration,
    pub retryable: Vec<ErrorClass>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 6,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(600),
            retryable: RETRYABLE.to_vec(),
        }
    }
}

impl RetryPolicy {
    /// The full-jitter delay before retry number `retry` (1-based).
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let cap = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

#[derive(Debug, Clone)]
pub struct AimdConfig {
    /// Successes in a row after which a lane's limit climbs by one.
    pub climb_after: u32,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig { climb_after: 20 }
    }
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub global_limit: usize,
    /// Limit on one attempt, from asking for the permits' work to the last response byte.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub aimd: AimdConfig,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            global_limit: 64,
            timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            aimd: AimdConfig::default(),
        }
    }
}

/// How the scheduler waits between attempts; tests inject one that records the waits.
pub trait Sleeper: Send + Sync {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}

struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// The result of one logical call after all its attempts.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: Result<Completion, CallError>,
    pub attempts: u32,
    /// Wall time from the first attempt's start to the end, waits included.
    pub total_latency: Duration,
    /// The class of each failed attempt, in order (the last one is the final error, if the call failed).
    pub attempt_errors: Vec<ErrorClass>,
}

impl Outcome {
    /// How long the model took to answer: the successful attempt's own request time, without the
    /// waits for a concurrency slot or between retries (a local model serving one call at a time
    /// would otherwise be charged for the queue in front of it). A failed call has no answer, so
    /// it reports [`Outcome::total_latency`].
    pub fn response_latency(&self) -> Duration {
        match &self.result {
            Ok(c) => c.latency,
            Err(_) => self.total_latency,
        }
    }
}

/// Live counters for progress display. All monotonic except `in_flight`.
#[derive(Default)]
pub struct Counters {
    in_flight: AtomicUsize,
    attempts: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    retries: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    failed_by_class: [AtomicU64; ErrorClass::ALL.len()],
    attempt_errors_by_class: [AtomicU64; ErrorClass::ALL.len()],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CountersSnapshot {
    pub in_flight: usize,
    /// Sum of the lanes' current adaptive limits, capped by the global limit.
    pub current_limit: usize,
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    pub retries: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Final errors (calls that gave up), by class name.
    pub errors_by_class: BTreeMap<String, u64>,
    /// Every failed attempt, retried or not, by class name.
    pub attempt_errors_by_class: BTreeMap<String, u64>,
}

fn by_class(counts: &[AtomicU64]) -> BTreeMap<String, u64> {
    ErrorClass::ALL
        .iter()
        .zip(counts)
        .map(|(c, n)| (c.as_str().to_string(), n.load(Ordering::Relaxed)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Decrements `in_flight` even when the call's future is dropped mid-way.
struct InFlight<'a>(&'a Counters);

impl<'a> InFlight<'a> {
    fn enter(c: &'a Counters) -> Self {
        c.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Additive-increase, multiplicative-decrease limit over a semaphore. Lowering the limit forgets idle permits
/// at once and the rest (the `debt`) as busy ones come back.
struct Aimd {
    sem: Arc<Semaphore>,
    max: usize,
    climb_after: u32,
    state: Mutex<AimdState>,
}

struct AimdState {
    limit: usize,
    debt: usize,
    successes: u32,
    epoch: u64,
}

struct LanePermit<'a> {
    aimd: &'a Aimd,
    permit: Option<OwnedSemaphorePermit>,
    epoch: u64,
}

impl Drop for LanePermit<'_> {
    fn drop(&mut self) {
        let Some(p) = self.permit.take() else { return };
        let mut s = self.aimd.lock();
        if s.debt > 0 {
            s.debt -= 1;
            p.forget();
        }
    }
}

impl Aimd {
    fn new(max: usize, climb_after: u32) -> Self {
        let max = max.max(1);
        Aimd {
            sem: Arc::new(Semaphore::new(max)),
            max,
            climb_after: climb_after.max(1),
            state: Mutex::new(AimdState {
                limit: max,
                debt: 0,
                successes: 0,
                epoch: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, AimdState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn acquire(&self) -> LanePermit<'_> {
        let permit = self.sem.clone().acquire_owned().await.ok();
        let epoch = self.lock().epoch;
        LanePermit {
            aimd: self,
            permit,
            epoch,
        }
    }

    fn limit(&self) -> usize {
        self.lock().limit
    }

    fn on_success(&self) {
        let mut s = self.lock();
        s.successes += 1;
        if s.successes < self.climb_after || s.limit >= self.max {
            return;
        }
        s.successes = 0;
        s.limit += 1;
        if s.debt > 0 {
            s.debt -= 1;
        } else {
            self.sem.add_permits(1);
        }
    }

    /// Halves the limit, unless a cut already happened since this attempt got its permit.
    fn on_rate_limit(&self, epoch: u64) {
        let mut s = self.lock();
        s.successes = 0;
        if epoch != s.epoch {
            return;
        }
        s.epoch += 1;
        let new = (s.limit / 2).max(1);
        let cut = s.limit - new;
        s.limit = new;
        let forgotten = self.sem.forget_permits(cut);
        s.debt += cut - forgotten;
    }
}

/// A backend with its own adaptive concurrency limit. Cheap to clone.
#[derive(Clone)]
pub struct Lane {
    backend: Arc<dyn Backend>,
    aimd: Arc<Aimd>,
}

impl Lane {
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The adaptive limit right now (between 1 and the configured limit).
    pub fn current_limit(&self) -> usize {
        self.aimd.limit()
    }
}

/// Runs calls under the global limit, each lane's adaptive limit, a per-attempt timeout and the retry policy.
/// Cheap to clone; clones share limits and counters.
#[derive(Clone)]
pub struct Scheduler {
    config: Arc<SchedulerConfig>,
    global: Arc<Semaphore>,
    counters: Arc<Counters>,
    sleeper: Arc<dyn Sleeper>,
    lanes: Arc<Mutex<Vec<Weak<Aimd>>>>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig) -> Self {
        Scheduler {
            global: Arc::new(Semaphore::new(config.global_limit.max(1))),
            config: Arc::new(config),
            counters: Arc::default(),
            sleeper: Arc::new(TokioSleeper),
            lanes: Arc::default(),
        }
    }

    /// Replaces how retry waits happen (tests record them instead of sleeping).
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// A lane for `backend` with at most `limit` calls in flight (lowered to the backend's own
    /// [`Backend::max_in_flight`]).
    pub fn lane(&self, backend: Arc<dyn Backend>, limit: usize) -> Lane {
        let limit = backend
            .max_in_flight()
            .map_or(limit, |m| limit.min(m.max(1)));
        let aimd = Arc::new(Aimd::new(limit, self.config.aimd.climb_after));
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes.retain(|w| w.strong_count() > 0);
        lanes.push(Arc::downgrade(&aimd));
        Lane { backend, aimd }
    }

    /// Sends `req` until it succeeds, fails with a class not worth retrying, or runs out of retries. An error
    /// stays an error: it is never turned into an empty answer.
    pub async fn run(&self, lane: &Lane, req: &ChatRequest) -> Outcome {
        let started = Instant::now();
        let mut attempt_errors = Vec::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let err = match self.attempt(lane, req).await {
                Ok(c) => {
                    lane.aimd.on_success();
                    self.counters.ok.fetch_add(1, Ordering::Relaxed);
                    self.add_usage(&c);
                    return Outcome {
                        result: Ok(c),
                        attempts,
                        total_latency: started.elapsed(),
                        attempt_errors,
                    };
                }
                Err(e) => e,
            };
            self.counters.attempt_errors_by_class[err.class.index()]
                .fetch_add(1, Ordering::Relaxed);
            attempt_errors.push(err.class);
            let wait = self.retry_wait(&err, attempts);
            let Some(wait) = wait else {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.counters.failed_by_class[err.class.index()].fetch_add(1, Ordering::Relaxed);
                return Outcome {
                    result: Err(err),
                    attempts,
                    total_latency: started.elapsed(),
                    attempt_errors,
                };
            };
            tracing::debug!(class = %err.class, attempt = attempts, wait_ms = wait.as_millis() as u64, "retrying");
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            self.sleeper.sleep(wait).await;
        }
    }

    /// How long to wait before the next attempt, or `None` to give up.
    fn retry_wait(&self, err: &CallError, attempts: u32) -> Option<Duration> {
        let retry = &self.config.retry;
        if attempts > retry.max_retries || !retry.retryable.contains(&err.class) {
            return None;
        }
        match err.retry_after {
            Some(d) if d > retry.max_retry_after => None,
            Some(d) => Some(d),
            None => Some(retry.backoff(attempts)),
        }
    }

    async fn attempt(&self, lane: &Lane, req: &ChatRequest) -> Result<Completion, CallError> {
        let lane_permit = lane.aimd.acquire().await;
        let _global = self.global.acquire().await.ok();
        let _in_flight = InFlight::enter(&self.counters);
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let timeout = self.config.timeout;
        let result = match tokio::time::timeout(timeout, lane.backend.complete(req)).await {
            Ok(r) => r,
            Err(_) => Err(CallError::new(
                ErrorClass::Timeout,
                format!("no complete response within {timeout:?}"),
            )),
        };
        if matches!(&result, Err(e) if e.class == ErrorClass::RateLimit) {
            lane.aimd.on_rate_limit(lane_permit.epoch);
        }
        result
    }

    fn add_usage(&self, c: &Completion) {
        let c2 = &self.counters;
        c2.input_tokens
            .fetch_add(c.usage.input_tokens, Ordering::Relaxed);
        c2.output_tokens
            .fetch_add(c.usage.output_tokens, Ordering::Relaxed);
    }

    pub fn counters(&self) -> CountersSnapshot {
        let c = &self.counters;
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let lane_sum: usize = lanes
            .iter()
            .filter_map(Weak::upgrade)
            .map(|a| a.limit())
            .sum();
        CountersSnapshot {
            in_flight: c.in_flight.load(Ordering::Relaxed),
            current_limit: lane_sum.min(self.config.global_limit.max(1)),
            attempts: c.attempts.load(Ordering::Relaxed),
            ok: c.ok.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            input_tokens: c.input_tokens.load(Ordering::Relaxed),
            output_tokens: c.output_tokens.load(Ordering::Relaxed),
            errors_by_class: by_class(&c.failed_by_class),
            attempt_errors_by_class: by_class(&c.attempt_errors_by_class),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aimd_halves_once_per_window_and_climbs_back() {
        let a = Aimd::new(8, 2);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let p1 = a.acquire().await;
            let p2 = a.acquire().await;
            a.on_rate_limit(p1.epoch);
            assert_eq!(a.limit(), 4);
            // p2 started before the cut: its 429 belongs to the same window
            a.on_rate_limit(p2.epoch);
            assert_eq!(a.limit(), 4);
            // 6 idle permits existed, 4 were cut at once: no debt
            assert_eq!(a.sem.available_permits(), 2);
            drop((p1, p2));
            assert_eq!(a.sem.available_permits(), 4);
            let p = a.acquire().await;
            a.on_rate_limit(p.epoch);
            assert_eq!(a.limit(), 2);
            let q = a.acquire().await;
            a.on_rate_limit(q.epoch);
            drop(q);
            assert_eq!(a.limit(), 1);
            let epoch = a.lock().epoch;
            a.on_rate_limit(epoch);
            assert_eq!(a.limit(), 1, "never below 1");
            drop(p);
            assert_eq!(a.sem.available_permits(), 1);
            for _ in 0..2 * 20 {
                a.on_success();
            }
            assert_eq!(a.limit(), 8, "never above the configured limit");
            assert_eq!(a.sem.available_permits(), 8);
        });
    }

    #[test]
    fn cut_while_busy_takes_permits_back_as_they_return() {
        let a = Aimd::new(4, 1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut held = Vec::new();
            for _ in 0..4 {
                held.push(a.acquire().await);
            }
            a.on_rate_limit(held[0].epoch);
            assert_eq!(a.limit(), 2);
            assert_eq!(a.lock().debt, 2);
            held.clear();
            assert_eq!(a.sem.available_permits(), 2);
            a.on_success();
            assert_eq!(a.limit(), 3);
            assert_eq!(a.sem.available_permits(), 3);
        });
    }

    #[test]
    fn backoff_is_full_jitter_under_the_cap() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        for retry in 1..10 {
            let cap = Duration::from_millis(100 * 2u64.pow(retry - 1)).min(p.max_delay);
            for _ in 0..50 {
                assert!(p.backoff(retry) <= cap);
            }
        }
        let spread: std::collections::BTreeSet<_> = (0..50).map(|_| p.backoff(5)).collect();
        assert!(spread.len() > 10, "jitter draws differ");
    }
}
