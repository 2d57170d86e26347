//! Several workers on one run: each claims a task's unfinished samples for a while (a lease), renews its claims
//! while it works, and gives them back when it stops. A worker that dies simply stops renewing, and its samples
//! are claimed again once the lease runs out.
//!
//! An errored sample is worth one more try by each worker that starts after the error, as a resumed `nmb eval`
//! tries it once more; the `errored_before_ms` of a worker is the time it started.

use crate::db::{args, scalar};
use crate::error::Result;
use crate::keys::now_ms;
use crate::Store;

impl Store {
    /// Claims the samples of `task_id` that still need work and that no live lease holds (or that `worker`
    /// holds already), until `lease_ms` from now. Returns their indices; empty when there is nothing to take.
    /// Two workers never get the same sample while a lease lasts: PostgreSQL skips rows another transaction has
    /// locked, SQLite runs one writer at a time.
    pub fn claim_samples(
        &self,
        run_id: &str,
        task_id: &str,
        worker: &str,
        lease_ms: i64,
        errored_before_ms: i64,
    ) -> Result<Vec<u32>> {
        let skip_locked = if self.is_postgres() {
            "FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let sql = format!(
            "UPDATE samples SET lease_owner = ?4, lease_until_ms = ?5
             WHERE run_id = ?1 AND task_id = ?2 AND sample_index IN (
                 SELECT sample_index FROM samples
                 WHERE run_id = ?1 AND task_id = ?2
                   AND (status = 'pending' OR (status = 'errored' AND updated_ms < ?6))
                   AND (lease_owner IS NULL OR lease_owner = ?4 OR lease_until_ms < ?3)
                 {skip_locked})
             RETURNING sample_index"
        );
        let now = now_ms();
        let postgres = self.is_postgres();
        let mut claimed = self.write("claim samples", |db| {
            // One worker claims a task at a time, so its samples stay together (one request with `n`); a task
            // another worker is claiming right now is skipped rather than split.
            let free: bool = !postgres
                || scalar(
                    db,
                    "SELECT pg_try_advisory_xact_lock(hashtextextended(?1 || ' ' || ?2, 0))",
                    args![run_id, task_id],
                )?;
            if !free {
                return Ok(Vec::new());
            }
            let rows = db.query(
                &sql,
                args![
                    run_id,
                    task_id,
                    now,
                    worker,
                    now + lease_ms,
                    errored_before_ms
                ],
            )?;
            Ok(rows
                .iter()
                .map(|r| r.get::<u32>(0))
                .collect::<Result<Vec<_>, _>>()?)
        })?;
        claimed.sort_unstable();
        Ok(claimed)
    }

    /// Extends every lease `worker` holds on the run's unfinished samples to `lease_ms` from now. Returns how
    /// many it holds.
    pub fn renew_leases(&self, run_id: &str, worker: &str, lease_ms: i64) -> Result<u64> {
        self.write("renew leases", |db| {
            Ok(db.exec(
                "UPDATE samples SET lease_until_ms = ?3
                 WHERE run_id = ?1 AND lease_owner = ?2 AND status <> 'ok'",
                args![run_id, worker, now_ms() + lease_ms],
            )?)
        })
    }

    /// Gives back everything `worker` holds on the run, so others need not wait for the leases to run out.
    pub fn release_leases(&self, run_id: &str, worker: &str) -> Result<u64> {
        self.write("release leases", |db| {
            Ok(db.exec(
                "UPDATE samples SET lease_owner = NULL, lease_until_ms = NULL
                 WHERE run_id = ?1 AND lease_owner = ?2",
                args![run_id, worker],
            )?)
        })
    }

    /// Pending samples of the run that another worker holds under a lease that has not run out: work that may
    /// still come back to be claimed.
    pub fn held_elsewhere(&self, run_id: &str, worker: &str) -> Result<u64> {
        self.read("count samples other workers hold", |db| {
            let n: i64 = scalar(
                db,
                "SELECT count(*) FROM samples WHERE run_id = ?1 AND status = 'pending'
                 AND lease_owner IS NOT NULL AND lease_owner <> ?2 AND lease_until_ms >= ?3",
                args![run_id, worker, now_ms()],
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    /// Samples of the run that a worker started at `errored_before_ms` would still work on or wait for:
    /// pending ones (held by anyone or nobody) and those that errored before it started.
    pub fn work_left(&self, run_id: &str, errored_before_ms: i64) -> Result<u64> {
        self.read("count the work left", |db| {
            let n: i64 = scalar(
                db,
                "SELECT count(*) FROM samples WHERE run_id = ?1
                 AND (status = 'pending' OR (status = 'errored' AND updated_ms < ?2))",
                args![run_id, errored_before_ms],
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }
}
