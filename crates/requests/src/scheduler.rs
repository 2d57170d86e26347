//! Sending many calls at once without tripping over rate limits.
//!
//! A call first takes a permit from its [`Lane`] (one per backend, with an adaptive limit), then one from the
//! global semaphore, and holds both only while the HTTP exchange runs, never while it waits to retry. A 429
//! halves the lane's limit (once per window: calls started before the last cut don't cut again); a run of
//! successes adds one back, never above the configured limit and never below 1.
//!
//! A backend served by several replicas (`@URL,URL`) has one adaptive limit per replica, each its own server
//! with its own rate limits; before each attempt the lane's [`Router`] picks the replica (fewest in flight, a
//! failing one taken out for a while, a retry elsewhere when it can; see [`crate::replicas`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use rand::Rng;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::backend::{Backend, BoxFuture, ChatRequest, Completion};
use crate::error::{CallError, ErrorClass};
use crate::replicas::{Health, Pick, ReplicaPolicy, Router};

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
    /// How long a failing replica is left out (backends with several base URLs).
    pub replicas: ReplicaPolicy,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            global_limit: 64,
            timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            aimd: AimdConfig::default(),
            replicas: ReplicaPolicy::default(),
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
    /// The replica the last attempt went to, the one that answered if the call succeeded, as
    /// [`Backend::replicas`] names it (its base URL); `None` for a backend without replicas (in-process).
    pub replica: Option<String>,
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

/// A backend with its own adaptive concurrency limit (one per replica) and the router that picks the replica
/// of each attempt. Cheap to clone; clones share limits and routing.
#[derive(Clone)]
pub struct Lane {
    backend: Arc<dyn Backend>,
    replicas: Arc<Replicas>,
}

struct Replicas {
    /// As [`Backend::replicas`] names them (empty for a backend without replicas).
    names: Vec<String>,
    /// One adaptive limit per replica (one in all for a backend without replicas).
    limits: Vec<Arc<Aimd>>,
    router: Mutex<Router>,
    /// The account's quota ran out on this backend: every later call ends with this error, unsent.
    exhausted: Mutex<Option<CallError>>,
}

impl Replicas {
    fn router(&self) -> MutexGuard<'_, Router> {
        self.router.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pick(&self, avoid: Option<usize>) -> Ticket<'_> {
        let pick = self.router().pick(Instant::now(), avoid);
        Ticket {
            replicas: self,
            pick: Some(pick),
        }
    }
}

/// The replica an attempt goes to, counted in flight there until [`Ticket::finish`], or until the attempt's
/// future is dropped.
struct Ticket<'a> {
    replicas: &'a Replicas,
    pick: Option<Pick>,
}

impl Ticket<'_> {
    fn replica(&self) -> usize {
        self.pick.map_or(0, |p| p.replica)
    }

    /// Ends the attempt; the back-off period when it took the replica out.
    fn finish(mut self, health: Health) -> Option<Duration> {
        let pick = self.pick.take()?;
        self.replicas.router().finish(pick, health, Instant::now())
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(pick) = self.pick.take() {
            self.replicas.router().release(pick);
        }
    }
}

impl Lane {
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The adaptive limit right now (between 1 and the configured limit), summed over the replicas.
    pub fn current_limit(&self) -> usize {
        self.replicas.limits.iter().map(|a| a.limit()).sum()
    }

    /// Attempts in flight (or waiting for a slot) on each replica.
    pub fn in_flight_by_replica(&self) -> Vec<usize> {
        let router = self.replicas.router();
        (0..router.len()).map(|i| router.in_flight(i)).collect()
    }

    fn replica_name(&self, replica: usize) -> Option<String> {
        self.replicas.names.get(replica).cloned()
    }

    /// The error every call of this lane ends with, unsent, once the account's quota ran out.
    fn exhausted(&self) -> Option<CallError> {
        let e = self
            .replicas
            .exhausted
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        e.as_ref().map(|e| {
            let mut e = e.clone();
            e.message = format!(
                "not sent: an earlier call found the quota used up ({})",
                e.message
            );
            e
        })
    }

    fn exhaust(&self, err: &CallError) {
        let mut e = self
            .replicas
            .exhausted
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            tracing::error!(
                "{}: {}; the run's other calls to it end without being sent",
                self.backend.spec(),
                err.message
            );
            *e = Some(err.clone());
        }
    }
}

/// Limits shared with other processes that send to the same servers (workers on other machines, coordinated
/// through the store they share). Every attempt takes a fleet slot for its server after the process's own
/// permits and gives it back when it ends; a 429 pauses that server for the whole fleet.
pub trait Fleet: Send + Sync {
    /// Waits until the fleet has room for one more attempt on `server` and no fleet-wide pause of it is on.
    fn enter<'a>(&'a self, server: &'a str) -> BoxFuture<'a, FleetSlot>;
    /// Gives the slot back.
    fn leave(&self, slot: FleetSlot);
    /// `server` answered 429: nobody in the fleet sends to it for `pause`.
    fn rate_limited(&self, server: &str, pause: Duration);
}

/// A slot [`Fleet::enter`] gave; `slot` is `None` when the fleet could not be asked (it then limits nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSlot {
    pub server: String,
    pub slot: Option<u32>,
}

/// A fleet slot, given back when the attempt ends however it ends (a caller that stops waiting included).
struct HeldSlot {
    fleet: Arc<dyn Fleet>,
    slot: Option<FleetSlot>,
}

impl Drop for HeldSlot {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.fleet.leave(slot);
        }
    }
}

/// Runs calls under the global limit, each lane's adaptive limit, a per-attempt timeout and the retry policy.
/// Cheap to clone; clones share limits and counters.
#[derive(Clone)]
pub struct Scheduler {
    fleet: Option<Arc<dyn Fleet>>,
    config: Arc<SchedulerConfig>,
    global: Arc<Semaphore>,
    counters: Arc<Counters>,
    sleeper: Arc<dyn Sleeper>,
    lanes: Arc<Mutex<Vec<Weak<Aimd>>>>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig) -> Self {
        Scheduler {
            fleet: None,
            global: Arc::new(Semaphore::new(config.global_limit.max(1))),
            config: Arc::new(config),
            counters: Arc::default(),
            sleeper: Arc::new(TokioSleeper),
            lanes: Arc::default(),
        }
    }

    /// Shares the per-server limits and 429 pauses with the other processes of a fleet.
    pub fn with_fleet(mut self, fleet: Arc<dyn Fleet>) -> Self {
        self.fleet = Some(fleet);
        self
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
    /// [`Backend::max_in_flight`]) on each of its replicas (each is a server of its own).
    pub fn lane(&self, backend: Arc<dyn Backend>, limit: usize) -> Lane {
        let limit = backend
            .max_in_flight()
            .map_or(limit, |m| limit.min(m.max(1)));
        let names = backend.replicas().to_vec();
        let count = names.len().max(1);
        let limits: Vec<Arc<Aimd>> = (0..count)
            .map(|_| Arc::new(Aimd::new(limit, self.config.aimd.climb_after)))
            .collect();
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes.retain(|w| w.strong_count() > 0);
        lanes.extend(limits.iter().map(Arc::downgrade));
        let router = Mutex::new(Router::new(count, self.config.replicas.clone()));
        Lane {
            backend,
            replicas: Arc::new(Replicas {
                names,
                limits,
                router,
                exhausted: Mutex::new(None),
            }),
        }
    }

    /// Sends `req` until it succeeds, fails with a class not worth retrying, or runs out of retries. An error
    /// stays an error: it is never turned into an empty answer. A retry goes to another replica when one is
    /// available.
    pub async fn run(&self, lane: &Lane, req: &ChatRequest) -> Outcome {
        let started = Instant::now();
        let mut attempt_errors = Vec::new();
        let mut attempts = 0;
        let mut previous = None;
        loop {
            if let Some(e) = lane.exhausted() {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.counters.failed_by_class[e.class.index()].fetch_add(1, Ordering::Relaxed);
                return Outcome {
                    result: Err(e),
                    attempts,
                    total_latency: started.elapsed(),
                    attempt_errors,
                    replica: None,
                };
            }
            let Some((replica, result)) = self.attempt(lane, req, previous).await else {
                continue;
            };
            attempts += 1;
            previous = Some(replica);
            let mut err = match result {
                Ok(c) => {
                    self.counters.ok.fetch_add(1, Ordering::Relaxed);
                    self.add_usage(&c);
                    return Outcome {
                        result: Ok(c),
                        attempts,
                        total_latency: started.elapsed(),
                        attempt_errors,
                        replica: lane.replica_name(replica),
                    };
                }
                Err(e) => e,
            };
            self.counters.attempt_errors_by_class[err.class.index()]
                .fetch_add(1, Ordering::Relaxed);
            attempt_errors.push(err.class);
            if err.class == ErrorClass::QuotaExhausted {
                lane.exhaust(&err);
            }
            let wait = self.retry_wait(&mut err, attempts);
            let Some(wait) = wait else {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.counters.failed_by_class[err.class.index()].fetch_add(1, Ordering::Relaxed);
                return Outcome {
                    result: Err(err),
                    attempts,
                    total_latency: started.elapsed(),
                    attempt_errors,
                    replica: lane.replica_name(replica),
                };
            };
            tracing::debug!(class = %err.class, attempt = attempts, replica, wait_ms = wait.as_millis() as u64, "retrying");
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            self.sleeper.sleep(wait).await;
        }
    }

    /// How long to wait before the next attempt, or `None` to give up. The class decides, unless the server said
    /// whether to try again (`x-should-retry`). A wait the server asks for that is longer than the policy honours,
    /// or no usable wait at all ([`crate::error::ABSURD_HINT`]), ends the call as a rate limit saying so.
    fn retry_wait(&self, err: &mut CallError, attempts: u32) -> Option<Duration> {
        let retry = &self.config.retry;
        let retryable = err
            .should_retry
            .unwrap_or_else(|| retry.retryable.contains(&err.class));
        if attempts > retry.max_retries || !retryable {
            return None;
        }
        match err.retry_after {
            Some(d) if d > retry.max_retry_after => {
                let asked = if d == crate::error::ABSURD_HINT {
                    "a wait that is no usable time (negative, not a number, or too large)"
                        .to_string()
                } else {
                    format!("{} s", d.as_secs())
                };
                err.message = format!(
                    "the server asked to wait {asked} before trying again, longer than the {} s a call waits \
                     at most; not waiting ({})",
                    retry.max_retry_after.as_secs(),
                    err.message
                );
                err.class = ErrorClass::RateLimit;
                None
            }
            Some(d) => Some(d),
            None => Some(retry.backoff(attempts)),
        }
    }

    /// One attempt, on the replica the lane's router picks (`avoid`: where the previous attempt went). Returns
    /// the replica with the result, or `None` when the lane's quota ran out before anything was sent.
    async fn attempt(
        &self,
        lane: &Lane,
        req: &ChatRequest,
        avoid: Option<usize>,
    ) -> Option<(usize, Result<Completion, CallError>)> {
        let ticket = lane.replicas.pick(avoid);
        let replica = ticket.replica();
        // The router has one slot per limit.
        let aimd = &lane.replicas.limits[replica];
        let lane_permit = aimd.acquire().await;
        let _global = self.global.acquire().await.ok();
        if lane.exhausted().is_some() {
            // The quota ran out while this call waited for its slot: nothing is sent.
            return None;
        }
        let server = lane
            .replica_name(replica)
            .unwrap_or_else(|| lane.backend.spec().to_string());
        let _fleet_slot = match &self.fleet {
            Some(fleet) => Some(HeldSlot {
                slot: Some(fleet.enter(&server).await),
                fleet: fleet.clone(),
            }),
            None => None,
        };
        let _in_flight = InFlight::enter(&self.counters);
        self.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let timeout = lane
            .backend
            .attempt_timeout()
            .unwrap_or(self.config.timeout);
        let call = lane.backend.complete_on(replica, req);
        let result = match tokio::time::timeout(timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(CallError::new(
                ErrorClass::Timeout,
                format!("no complete response within {timeout:?}"),
            )),
        };
        match &result {
            Ok(_) => aimd.on_success(),
            Err(e) if e.class == ErrorClass::RateLimit => aimd.on_rate_limit(lane_permit.epoch),
            Err(_) => {}
        }
        if let (Some(fleet), Err(e)) = (&self.fleet, &result) {
            if e.class == ErrorClass::RateLimit {
                let pause = e.retry_after.unwrap_or(self.config.retry.backoff(1));
                // A wait beyond what is honoured ends the call, not the fleet's use of the server.
                let pause = pause.min(self.config.retry.max_retry_after);
                fleet.rate_limited(&server, pause);
            }
        }
        let taken_out = ticket.finish(Health::of(&result));
        if let (Some(period), Err(e)) = (taken_out, &result) {
            // With one server there is nowhere else to go: only replicas are reported.
            if lane.replicas.names.len() > 1 {
                let name = lane.replicas.names[replica].as_str();
                tracing::warn!(replica = name, class = %e.class, back_in_s = period.as_secs(), "replica failed; leaving it out");
            }
        }
        Some((replica, result))
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
