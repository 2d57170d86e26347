//! Sharing one run between processes (`nmb worker`, or `nmb eval` on a shared store): each pass over the plan
//! claims tasks' unfinished samples under a lease before planning them, and runs what it claimed. A heartbeat
//! renews the leases meanwhile. Passes repeat until nothing is left to claim and no other live worker holds
//! anything, so samples of a worker that died are claimed again once its lease runs out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nmb_plan::{ImageCache, Plan};
use nmb_store::{Store, StoreError};
use nmb_suite::Suite;

use super::{drive, Ctx, RunError};
use crate::config::Claiming;

/// What a worker's passes share.
pub(crate) struct Shared<'a> {
    pub store: &'a Arc<Store>,
    pub run_id: &'a str,
    pub suite: &'a Suite,
    pub cache: &'a Arc<ImageCache>,
    pub claiming: &'a Claiming,
}

/// Runs passes until the run holds nothing more for this worker, then gives its leases back.
pub(crate) async fn drive_claimed(ctx: &Arc<Ctx>, s: Shared<'_>) -> Result<Vec<String>, RunError> {
    let heartbeat = tokio::spawn(renew(
        s.store.clone(),
        s.run_id.to_string(),
        s.claiming.clone(),
    ));
    let result = passes(ctx, &s).await;
    heartbeat.abort();
    s.store.release_leases(s.run_id, &s.claiming.worker_id)?;
    result
}

async fn passes(ctx: &Arc<Ctx>, s: &Shared<'_>) -> Result<Vec<String>, RunError> {
    let mut plan_errors = Vec::new();
    let wait = (s.claiming.lease / 5).clamp(Duration::from_millis(200), Duration::from_secs(2));
    loop {
        let (claimed, errors) = pass(ctx, s).await?;
        for e in errors {
            if !plan_errors.contains(&e) {
                plan_errors.push(e);
            }
        }
        if ctx.progress.budget_exhausted() {
            return Ok(plan_errors);
        }
        if claimed > 0 {
            continue;
        }
        // Nothing to take: done, unless another live worker still holds samples that may come back.
        if s.store.held_elsewhere(s.run_id, &s.claiming.worker_id)? == 0 {
            return Ok(plan_errors);
        }
        tokio::time::sleep(wait).await;
    }
}

/// One pass over the plan: claims and runs every task that has something to claim. Returns how many samples
/// it claimed, and the tasks that could not be planned.
async fn pass(ctx: &Arc<Ctx>, s: &Shared<'_>) -> Result<(usize, Vec<String>), RunError> {
    let claimed: Arc<Mutex<HashMap<String, Vec<u32>>>> = Arc::default();
    let failure: Arc<Mutex<Option<StoreError>>> = Arc::default();
    let mut count = 0usize;
    let keep = |task_id: &str| {
        let claim = s.store.claim_samples(
            s.run_id,
            task_id,
            &s.claiming.worker_id,
            lease_ms(s.claiming.lease),
            s.claiming.started_ms,
        );
        match claim {
            Ok(samples) if samples.is_empty() => false,
            Ok(samples) => {
                count += samples.len();
                lock(&claimed).insert(task_id.to_string(), samples);
                true
            }
            Err(e) => {
                lock(&failure).get_or_insert(e);
                false
            }
        }
    };
    let plan = Plan::new(s.suite, &ctx.settings.plan, s.cache.clone())?.keeping(keep);
    let errors = drive(ctx, plan, |p| {
        lock(&claimed).remove(&p.task_id).unwrap_or_default()
    })
    .await?;
    if let Some(e) = lock(&failure).take() {
        return Err(e.into());
    }
    Ok((count, errors))
}

/// Renews this worker's leases three times per lease period until aborted.
async fn renew(store: Arc<Store>, run_id: String, claiming: Claiming) {
    let mut every = tokio::time::interval(claiming.lease / 3);
    loop {
        every.tick().await;
        if let Err(e) = store.renew_leases(&run_id, &claiming.worker_id, lease_ms(claiming.lease)) {
            tracing::warn!("cannot renew this worker's leases: {e}");
        }
    }
}

fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
