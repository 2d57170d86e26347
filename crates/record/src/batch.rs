//! Sending a model's calls through its provider's batch API ([`Batcher`]), so that they cost half and the
//! answers land as ordinary recorded calls.
//!
//! A [`Batcher`] is a [`Backend`] around an HTTP backend. Calls that arrive within a short window go together:
//! each request gets a custom id from its content, and the batch is written to the store with every custom id
//! before it is submitted. A request whose custom id a stored batch already holds is never submitted again: a
//! submitted batch is polled, an ended one read again, and one that was being submitted when its process
//! stopped is looked for at the provider. What a batch leaves unanswered (expired, cancelled) goes into a new
//! batch, at most [`RESENDS`] times per request in one process. Each caller gets its answer back as if its call
//! had been sent alone, with the batch named.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nmb_requests::{
    Adjustment, Backend, BatchApi, BatchItem, BatchLimits, BoxFuture, CallError, ChatRequest,
    Completion, ErrorClass, ModelSpec, Polled,
};
use nmb_store::{format_utc_ms, now_ms, BatchRecord, BatchState, Resubmission, Store};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

/// How long a batcher gathers, how often it polls, and how much it keeps enqueued at the provider.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Calls arriving with less than this between them go into one batch.
    pub gather: Duration,
    /// How often a submitted batch is asked where it stands.
    pub poll: Duration,
    /// Requests in this model's submitted, unfinished batches at once (at least 1): a provider's queue limit
    /// (OpenAI's enqueued tokens per model and tier) is then not reached by one round.
    pub max_enqueued: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            gather: Duration::from_secs(1),
            poll: Duration::from_secs(30),
            max_enqueued: BATCH_IN_FLIGHT,
        }
    }
}

impl BatchOptions {
    /// Polling every `secs` seconds (the default where `secs` is not a positive number), and gathering no
    /// longer than one poll.
    pub fn polling_every(secs: f64) -> BatchOptions {
        let mut options = BatchOptions::default();
        if secs.is_finite() && secs > 0.0 {
            options.poll = Duration::from_secs_f64(secs);
            options.gather = options.gather.min(options.poll);
        }
        options
    }
}

/// Calls a batching model or judge keeps waiting at once: what one round of batches holds. A call waiting for
/// its batch puts no load on a server.
pub const BATCH_IN_FLIGHT: usize = 4096;

/// Polls that may fail in a row (network, server errors) before a batch's callers are given the error.
const POLL_FAILURES: u32 = 10;

/// Times one request's batch may be refused for a provider's queue limit (each time it goes again, later, in a
/// batch half the size) before its caller is given the provider's error.
pub const LIMIT_RESUBMISSIONS: u32 = 6;
/// Times one process puts a request into a new batch after batches left it unanswered while answering none of
/// their requests (expired, ended without a line, lost by the provider); after that its caller gets an error
/// instead, so that a provider that never answers cannot keep a run submitting batches. A batch that answered
/// some of its requests made progress, and what it left goes into a new batch without counting.
pub const RESENDS: u32 = 2;

/// Why a model cannot be batched.
#[derive(Debug, thiserror::Error)]
#[error("{spec} has no batch API; --batch works with openai:, anthropic: and gemini: models")]
pub struct NoBatchApi {
    pub spec: String,
}

/// A backend that sends through its inner backend's batch API.
pub struct Batcher {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Arc<dyn Backend>,
    store: Arc<Store>,
    /// The model's identity: what custom ids and batch records are keyed by.
    model: String,
    options: BatchOptions,
    queue: Mutex<Queue>,
    /// One permit per request that may be enqueued at the provider: a submitted batch holds its requests' until
    /// it ends ([`BatchOptions::max_enqueued`]).
    enqueued: Arc<tokio::sync::Semaphore>,
    /// The most requests one new batch holds: the provider's limit, halved each time a batch is refused for a
    /// queue limit; and how often each request's batch was so refused.
    limited: Mutex<Limited>,
    /// The largest response cap of the requests asked: what each line of a batch's output may take.
    line_cap: AtomicU64,
    /// How many times each request was put into a new batch after one left it unanswered.
    resent: Mutex<HashMap<String, u32>>,
    /// Batches whose polling gave up in this process, with why: a later call in them gets the error at once.
    gave_up: Mutex<HashMap<String, CallError>>,
    /// Requests whose batch the provider refused for a queue limit, with why: the batch that takes them up
    /// records it.
    resubmitted: Mutex<HashMap<String, Resubmission>>,
}

struct Limited {
    round: usize,
    refusals: BTreeMap<String, u32>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    gathering: bool,
}

/// A call waiting for its batch.
struct Waiting {
    custom_id: String,
    entry: Value,
    /// Submit it in a new batch without looking for one that holds it (what an ended batch left unanswered).
    fresh: bool,
    reply: oneshot::Sender<Result<Completion, CallError>>,
}

/// The calls of one batch, by custom id: the entry and everyone waiting for its answer.
type Group = BTreeMap<String, (Value, Vec<oneshot::Sender<Result<Completion, CallError>>>)>;

impl Batcher {
    /// Batches `inner`'s calls, recording batches in `store` under `model` (the model's identity).
    pub fn new(
        inner: Arc<dyn Backend>,
        store: Arc<Store>,
        model: impl Into<String>,
        options: BatchOptions,
    ) -> Result<Batcher, NoBatchApi> {
        if inner.batch().is_none() {
            return Err(NoBatchApi {
                spec: inner.spec().to_string(),
            });
        }
        let max_enqueued = options.max_enqueued.max(1);
        let limits = inner
            .batch()
            .map_or(max_enqueued, |b| b.protocol().limits().max_requests);
        let shared = Shared {
            inner,
            store,
            model: model.into(),
            options,
            queue: Mutex::default(),
            enqueued: Arc::new(tokio::sync::Semaphore::new(max_enqueued)),
            limited: Mutex::new(Limited {
                round: limits.min(max_enqueued),
                refusals: BTreeMap::new(),
            }),
            line_cap: AtomicU64::new(0),
            resent: Mutex::default(),
            gave_up: Mutex::default(),
            resubmitted: Mutex::default(),
        };
        Ok(Batcher {
            shared: Arc::new(shared),
        })
    }

    /// Asks `req` in a batch; a parameter the server refused is left out and the call asked again in a later
    /// batch, as a single call would be sent again.
    async fn call(&self, req: &ChatRequest) -> Result<Completion, CallError> {
        let mut adjusted = 0;
        loop {
            match self.ask(req).await {
                Err(e)
                    if adjusted < Adjustment::ALL.len() && self.shared.inner.adjust_after(&e) =>
                {
                    tracing::warn!("{}: {}; asking again without it", self.spec(), e.message);
                    adjusted += 1;
                }
                result => return result,
            }
        }
    }

    async fn ask(&self, req: &ChatRequest) -> Result<Completion, CallError> {
        let api = self.shared.api();
        let body = api.body(req)?;
        (self.shared.line_cap).fetch_max(api.response_cap(req), Ordering::Relaxed);
        let custom_id = custom_id(&self.shared.model, &body, &req.samples, req.params.seed);
        let entry = api.entry(&custom_id, body);
        let (reply, answer) = oneshot::channel();
        self.shared.enqueue(Waiting {
            custom_id,
            entry,
            fresh: false,
            reply,
        });
        answer
            .await
            .map_err(|_| CallError::new(ErrorClass::Other, "the batch this call was in stopped"))?
    }
}

/// A request's custom id: the model, the body it sends, and the samples and seed it answers, hashed, in the
/// characters every provider accepts. Samples and judge repeats differ only in their seed, which Anthropic's
/// Messages body does not carry: without them in the id, k samples would be one request and get one answer.
fn custom_id(model: &str, body: &Value, samples: &[u32], seed: Option<u64>) -> String {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update(b"\n");
    h.update(body.to_string().as_bytes());
    h.update(format!("\nsamples {samples:?} seed {seed:?}").as_bytes());
    format!("nmb-{}", &hex::encode(h.finalize())[..32])
}

impl Shared {
    fn api(&self) -> &dyn BatchApi {
        self.inner
            .batch()
            .expect("checked when the batcher was built")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn limited(&self) -> std::sync::MutexGuard<'_, Limited> {
        self.limited.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The provider's limits on one batch, with the request count lowered to the current round.
    fn batch_limits(&self) -> BatchLimits {
        let mut limits = self.api().protocol().limits();
        limits.max_requests = limits.max_requests.min(self.limited().round).max(1);
        limits
    }

    /// The error a request gets once batches left it unanswered more than [`RESENDS`] times.
    fn exhausted(&self, custom_id: &str) -> Option<CallError> {
        let resent = self.resent.lock().unwrap_or_else(|p| p.into_inner());
        let times = resent.get(custom_id).copied().filter(|n| *n > RESENDS)?;
        Some(CallError::new(
            ErrorClass::ServerError,
            format!(
                "the provider's batches left this request unanswered {times} times (ended without its \
                 answer, expired or lost); it is not put into another batch in this run"
            ),
        ))
    }

    /// Why a new batch of `ids` is a resubmission, if any of them was refused before: every refused batch they
    /// came from, each distinct reason, the smallest round. Taken, so a later batch of the same requests (one
    /// that expired) is not called a resubmission again.
    fn resubmission_of(&self, ids: &[String]) -> Option<Resubmission> {
        let mut known = self.resubmitted.lock().unwrap_or_else(|p| p.into_inner());
        let mut found: Option<Resubmission> = None;
        for r in ids.iter().filter_map(|id| known.remove(id)) {
            let Some(all) = found.as_mut() else {
                found = Some(r);
                continue;
            };
            for id in r.replaces {
                if !all.replaces.contains(&id) {
                    all.replaces.push(id);
                }
            }
            if !all.reason.contains(&r.reason) {
                all.reason = format!("{}; {}", all.reason, r.reason);
            }
            all.round = all.round.min(r.round);
        }
        found
    }

    /// What each line of a batch's output may take.
    fn line_cap(&self) -> u64 {
        let cap = self.line_cap.load(Ordering::Relaxed);
        cap.max(nmb_requests::body::RESPONSE_OVERHEAD_BYTES)
    }

    fn enqueue(self: &Arc<Self>, waiting: Waiting) {
        let mut q = self.lock();
        q.waiting.push(waiting);
        if !q.gathering {
            q.gathering = true;
            tokio::spawn(gather(self.clone()));
        }
    }
}

/// Waits until calls stop arriving (or a batch is full), then hands them to [`dispatch`]; stops when none wait.
async fn gather(shared: Arc<Shared>) {
    let max = shared.api().protocol().limits().max_requests;
    let mut seen = shared.lock().waiting.len();
    loop {
        tokio::time::sleep(shared.options.gather).await;
        let taken = {
            let mut q = shared.lock();
            let now = q.waiting.len();
            if now == 0 {
                q.gathering = false;
                return;
            }
            if now != seen && now < max {
                seen = now;
                continue;
            }
            seen = 0;
            std::mem::take(&mut q.waiting)
        };
        tokio::spawn(dispatch(shared.clone(), taken));
    }
}

/// Sends each call to the batch that holds it, or into new batches.
async fn dispatch(shared: Arc<Shared>, calls: Vec<Waiting>) {
    let mut fresh = Group::new();
    let mut held: BTreeMap<String, (BatchRecord, Group)> = BTreeMap::new();
    for w in calls {
        if let Some(e) = shared.exhausted(&w.custom_id) {
            let _ = w.reply.send(Err(e));
            continue;
        }
        let found = if w.fresh {
            Ok(None)
        } else {
            shared.store.batch_of_item(&shared.model, &w.custom_id)
        };
        let group = match found {
            Ok(Some(record)) => {
                let id = record.batch_id.clone();
                &mut held.entry(id).or_insert_with(|| (record, Group::new())).1
            }
            Ok(None) => &mut fresh,
            Err(e) => {
                let _ = w.reply.send(Err(store_error(&e)));
                continue;
            }
        };
        let slot = group
            .entry(w.custom_id)
            .or_insert_with(|| (w.entry, Vec::new()));
        slot.1.push(w.reply);
    }
    for (_, (record, group)) in held {
        tokio::spawn(follow(shared.clone(), record, group));
    }
    for chunk in chunks(fresh, shared.batch_limits()) {
        tokio::spawn(submit(shared.clone(), chunk));
    }
}

/// Splits calls into batches within the provider's limits (a request larger than the byte limit alone goes in a
/// batch of its own, which the provider then refuses with its own words).
fn chunks(group: Group, limits: BatchLimits) -> Vec<Group> {
    let mut out = Vec::new();
    let mut current = Group::new();
    let mut bytes = 0;
    for (id, slot) in group {
        let size = slot.0.to_string().len() + 1;
        if !current.is_empty()
            && (current.len() >= limits.max_requests || bytes + size > limits.max_bytes)
        {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.insert(id, slot);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Records a new batch with its custom ids, then submits it and follows it to its end, once the provider's queue
/// has room for its requests ([`BatchOptions::max_enqueued`]).
async fn submit(shared: Arc<Shared>, group: Group) {
    let size = u32::try_from(group.len()).unwrap_or(u32::MAX);
    let Ok(_room) = shared.enqueued.clone().acquire_many_owned(size).await else {
        return fail(
            group,
            &CallError::new(ErrorClass::Other, "the batcher stopped"),
        );
    };
    let ids: Vec<String> = group.keys().cloned().collect();
    let batch_id = batch_id(&ids);
    let protocol = shared.api().protocol();
    let resubmission = shared.resubmission_of(&ids);
    if let Err(e) = shared.store.create_batch(
        &batch_id,
        &shared.model,
        protocol.as_str(),
        &ids,
        resubmission.as_ref(),
    ) {
        fail(group, &store_error(&e));
        return;
    }
    let entries: Vec<Value> = group.values().map(|(entry, _)| entry.clone()).collect();
    match shared.api().submit(&batch_id, &entries).await {
        Ok(provider_id) => {
            if let Err(e) = shared.store.batch_submitted(&batch_id, &provider_id) {
                fail(group, &store_error(&e));
                return;
            }
            let record = BatchRecord {
                batch_id,
                model: shared.model.clone(),
                provider: protocol.as_str().to_string(),
                provider_id: Some(provider_id),
                state: BatchState::Submitted,
                requests: ids.len() as u64,
                created_ms: now_ms(),
                resubmission,
            };
            poll(shared, record, ids, group).await;
        }
        Err(e) => {
            // A submission that may have reached the provider stays preparing: the next attempt asks the
            // provider for it rather than submitting it twice.
            if !matches!(e.class, ErrorClass::Timeout | ErrorClass::Network) {
                let _ = shared
                    .store
                    .set_batch_state(&batch_id, BatchState::Abandoned);
            }
            fail(group, &e);
        }
    }
}

/// nmb's id for a new batch: unique to its requests and the moment.
fn batch_id(ids: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(now_ms().to_le_bytes());
    for id in ids {
        h.update(id.as_bytes());
    }
    format!("nmb-batch-{}", &hex::encode(h.finalize())[..20])
}

/// Follows a batch found in the store: asks the provider for one that was being submitted, then polls.
async fn follow(shared: Arc<Shared>, mut record: BatchRecord, group: Group) {
    let gave_up = (shared.gave_up.lock().unwrap_or_else(|p| p.into_inner()))
        .get(&record.batch_id)
        .cloned();
    if let Some(e) = gave_up {
        fail(group, &e);
        return;
    }
    if record.state == BatchState::Preparing {
        let since = format_utc_ms(record.created_ms - 60_000);
        let api = shared.api();
        match api.find(&record.batch_id, &since, record.requests).await {
            Ok(Some(provider_id)) => {
                let _ = shared.store.batch_submitted(&record.batch_id, &provider_id);
                record.provider_id = Some(provider_id);
            }
            Ok(None) => {
                let _ = shared
                    .store
                    .set_batch_state(&record.batch_id, BatchState::Abandoned);
                resend(&shared, group);
                return;
            }
            Err(e) => {
                fail(group, &e);
                return;
            }
        }
    }
    let ids = match shared.store.batch_items(&record.batch_id) {
        Ok(ids) => ids,
        Err(e) => {
            fail(group, &store_error(&e));
            return;
        }
    };
    poll(shared, record, ids, group).await;
}

/// Polls a submitted batch until it ends, then answers its callers and sends what it left unanswered again.
async fn poll(shared: Arc<Shared>, record: BatchRecord, ids: Vec<String>, mut group: Group) {
    let provider_id = record.provider_id.clone().unwrap_or_default();
    let ended_before = record.state == BatchState::Ended;
    let mut failures = 0;
    loop {
        match shared
            .api()
            .poll(&provider_id, &ids, shared.line_cap())
            .await
        {
            Ok(Polled::Running) => {}
            Ok(Polled::Ended(items)) => {
                let _ = shared
                    .store
                    .set_batch_state(&record.batch_id, BatchState::Ended);
                let asked = group.len();
                answer(&record, items, &mut group, ended_before);
                // A batch that answered some of its requests made progress (a provider expiring the rest of a
                // busy window); only batches that answer nothing count towards giving a request up.
                if group.len() < asked {
                    requeue(&shared, group);
                } else {
                    resend(&shared, group);
                }
                return;
            }
            Ok(Polled::Failed(e)) => {
                let _ = shared
                    .store
                    .set_batch_state(&record.batch_id, BatchState::Abandoned);
                if e.class == ErrorClass::RateLimit {
                    return limited(shared, &record, group, e).await;
                }
                fail(group, &e);
                return;
            }
            // The provider no longer has the batch (or its results): what it held goes into a new one.
            Err(e) if e.status == Some(404) => {
                tracing::warn!(batch = %record.batch_id, error = %e.message, "the provider no longer has the batch; sending its requests again");
                let _ = shared
                    .store
                    .set_batch_state(&record.batch_id, BatchState::Abandoned);
                resend(&shared, group);
                return;
            }
            Err(e)
                if nmb_requests::scheduler::RETRYABLE.contains(&e.class)
                    && failures < POLL_FAILURES =>
            {
                failures += 1;
                tracing::warn!(batch = %record.batch_id, error = %e.message, "polling the batch failed; trying again");
            }
            Err(e) => {
                (shared.gave_up.lock().unwrap_or_else(|p| p.into_inner()))
                    .insert(record.batch_id.clone(), e.clone());
                fail(group, &e);
                return;
            }
        }
        tokio::time::sleep(shared.options.poll).await;
    }
}

/// Gives each caller its answer, named with the batch and timed from its submission. An error read again from
/// a batch that had ended before is not given back: the call goes into a new batch, as a failed call is sent
/// again; except an answer too large to read, which a new batch would pay for again and a larger cap reads.
fn answer(record: &BatchRecord, items: Vec<BatchItem>, group: &mut Group, ended_before: bool) {
    let waited = Duration::from_millis(u64::try_from(now_ms() - record.created_ms).unwrap_or(0));
    for item in items {
        let too_large = matches!(&item.result, Err(e) if e.class == ErrorClass::ResponseTooLarge);
        if ended_before && item.result.is_err() && !too_large {
            continue;
        }
        let Some((_, replies)) = group.remove(&item.custom_id) else {
            continue;
        };
        let result = item.result.map(|mut c| {
            c.batch = Some(record.batch_id.clone());
            c.latency = waited;
            c
        });
        for reply in replies {
            let _ = reply.send(result.clone());
        }
    }
}

/// A batch the provider refused for a queue limit (OpenAI's `token_limit_exceeded`): later batches hold half as
/// many requests, and its requests go again after a poll's wait, each at most [`LIMIT_RESUBMISSIONS`] times; a
/// request refused more often ends with the provider's error.
async fn limited(shared: Arc<Shared>, record: &BatchRecord, group: Group, e: CallError) {
    let (again, given_up, round) = {
        let mut l = shared.limited();
        l.round = (l.round.min(group.len()) / 2).max(1);
        let (mut again, mut given_up) = (Group::new(), Group::new());
        for (id, slot) in group {
            let refusals = l.refusals.entry(id.clone()).or_insert(0);
            *refusals += 1;
            let to = if *refusals > LIMIT_RESUBMISSIONS {
                &mut given_up
            } else {
                &mut again
            };
            to.insert(id, slot);
        }
        (again, given_up, l.round)
    };
    tracing::warn!(
        batch = %record.batch_id,
        error = %e.message,
        "the provider refused the batch for a queue limit; its requests go again later in batches of at most {round}"
    );
    {
        let why = Resubmission {
            replaces: vec![record.batch_id.clone()],
            reason: nmb_requests::Secrets::from_env().redact(&e.message),
            round: round as u64,
        };
        let mut known = shared.resubmitted.lock().unwrap_or_else(|p| p.into_inner());
        for id in again.keys() {
            known.insert(id.clone(), why.clone());
        }
    }
    if !given_up.is_empty() {
        let mut e = e.clone();
        e.message = format!(
            "{} (refused {} times for the provider's queue limit, in batches down to {round} requests)",
            e.message,
            LIMIT_RESUBMISSIONS + 1
        );
        fail(given_up, &e);
    }
    tokio::time::sleep(shared.options.poll).await;
    requeue(&shared, again);
}

/// Puts calls back in the queue for a new batch, or gives them an error once batches left them unanswered more
/// than [`RESENDS`] times.
fn resend(shared: &Arc<Shared>, group: Group) {
    for (custom_id, (entry, replies)) in group {
        *(shared.resent.lock().unwrap_or_else(|p| p.into_inner()))
            .entry(custom_id.clone())
            .or_insert(0) += 1;
        if let Some(e) = shared.exhausted(&custom_id) {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
            continue;
        }
        requeue(shared, Group::from([(custom_id, (entry, replies))]));
    }
}

/// Puts calls back in the queue for a new batch.
fn requeue(shared: &Arc<Shared>, group: Group) {
    for (custom_id, (entry, replies)) in group {
        for reply in replies {
            shared.enqueue(Waiting {
                custom_id: custom_id.clone(),
                entry: entry.clone(),
                fresh: true,
                reply,
            });
        }
    }
}

fn fail(group: Group, e: &CallError) {
    for (_, (_, replies)) in group {
        for reply in replies {
            let _ = reply.send(Err(e.clone()));
        }
    }
}

fn store_error(e: &nmb_store::StoreError) -> CallError {
    CallError::new(ErrorClass::Other, format!("cannot record the batch: {e}"))
}

impl Backend for Batcher {
    fn spec(&self) -> &ModelSpec {
        self.shared.inner.spec()
    }
    fn supports_n(&self) -> bool {
        self.shared.inner.supports_n()
    }
    fn supports_images(&self) -> bool {
        self.shared.inner.supports_images()
    }
    fn max_image_side(&self) -> Option<u32> {
        self.shared.inner.max_image_side()
    }
    fn constrained_output(&self) -> Option<&'static str> {
        self.shared.inner.constrained_output()
    }
    fn reasoning_parameters(&self) -> Option<&'static str> {
        self.shared.inner.reasoning_parameters()
    }
    fn replay_of(&self, raw: &str, choice: usize) -> Option<Value> {
        self.shared.inner.replay_of(raw, choice)
    }
    fn thinking_budget(&self, params: &nmb_chat::GenParams) -> Result<&'static str, String> {
        self.shared.inner.thinking_budget(params)
    }
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        self.shared.inner.adjustments()
    }
    fn adopt_adjustments(&self, recorded: &BTreeMap<Adjustment, String>) {
        self.shared.inner.adopt_adjustments(recorded)
    }
    fn adjust_after(&self, err: &CallError) -> bool {
        self.shared.inner.adjust_after(err)
    }
    fn batch(&self) -> Option<&dyn BatchApi> {
        self.shared.inner.batch()
    }
    /// A batch is answered within a day (every provider's completion window is 24 hours).
    fn attempt_timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(25 * 3600))
    }
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        Box::pin(self.call(req))
    }
    fn replicas(&self) -> &[String] {
        self.shared.inner.replicas()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(sizes: &[usize]) -> Group {
        sizes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    format!("id{i:02}"),
                    (Value::String("x".repeat(*n)), Vec::new()),
                )
            })
            .collect()
    }

    fn sizes(chunks: &[Group]) -> Vec<usize> {
        chunks.iter().map(BTreeMap::len).collect()
    }

    #[test]
    fn batches_keep_to_the_request_and_byte_limits() {
        let by_count = BatchLimits {
            max_requests: 3,
            max_bytes: usize::MAX,
        };
        assert_eq!(sizes(&chunks(group(&[1; 7]), by_count)), [3, 3, 1]);
        // Each entry is its JSON (the string and two quotes) plus a newline: 10 + 3 bytes.
        let by_bytes = BatchLimits {
            max_requests: 100,
            max_bytes: 30,
        };
        assert_eq!(sizes(&chunks(group(&[10; 5]), by_bytes)), [2, 2, 1]);
        let oversized = chunks(group(&[40, 1]), by_bytes);
        assert_eq!(sizes(&oversized), [1, 1]);
        assert!(chunks(Group::new(), by_count).is_empty());
    }

    #[test]
    fn a_custom_id_is_the_same_for_the_same_request_and_fits_every_provider() {
        let body = serde_json::json!({"model": "m", "messages": []});
        let id = custom_id("openai:m", &body, &[0], Some(7));
        assert_eq!(id, custom_id("openai:m", &body, &[0], Some(7)));
        assert_ne!(id, custom_id("openai:other", &body, &[0], Some(7)));
        assert_ne!(
            id,
            custom_id(
                "openai:m",
                &serde_json::json!({"model": "m"}),
                &[0],
                Some(7)
            )
        );
        // The same body for another sample or seed (Anthropic's body carries neither) is another request.
        assert_ne!(id, custom_id("openai:m", &body, &[1], Some(7)));
        assert_ne!(id, custom_id("openai:m", &body, &[0], Some(8)));
        // Anthropic: ^[a-zA-Z0-9_-]{1,64}$.
        assert!(
            id.len() <= 64
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }
}
