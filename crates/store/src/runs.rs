//! Runs: creation, status, manifest, and finding an unfinished run to resume.

use serde::{Deserialize, Serialize};

use crate::db::{args, scalar, DbResult, Row, Value};
use crate::error::{Result, StoreError};
use crate::keys::{canonical_json, new_run_id, now_ms};
use crate::manifest::Manifest;
use crate::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Finished,
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        match s {
            "running" => Some(RunStatus::Running),
            "finished" => Some(RunStatus::Finished),
            "interrupted" => Some(RunStatus::Interrupted),
            _ => None,
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    pub run_id: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub status: RunStatus,
    pub config_hash: String,
    pub manifest: Manifest,
}

const RUN_COLUMNS: &str = "run_id, created_ms, updated_ms, status, config_hash, manifest";

impl Store {
    /// Creates a run in status `running` and returns it.
    pub fn create_run(&self, config_hash: &str, manifest: &Manifest) -> Result<RunInfo> {
        let text = canonical_json(&self.manifest_json(manifest)?);
        for _ in 0..16 {
            let now = now_ms();
            let run_id = new_run_id(now);
            let inserted = self.read("create a run", |db| {
                Ok(db.exec(
                    "INSERT INTO runs (run_id, created_ms, updated_ms, status, config_hash, manifest)
                     VALUES (?1, ?2, ?2, 'running', ?3, ?4) ON CONFLICT DO NOTHING",
                    args![run_id.as_str(), now, config_hash, text.as_str()],
                )?)
            })?;
            if inserted == 1 {
                return Ok(RunInfo {
                    run_id,
                    created_ms: now,
                    updated_ms: now,
                    status: RunStatus::Running,
                    config_hash: config_hash.to_string(),
                    manifest: manifest.clone(),
                });
            }
        }
        Err(self.invalid(
            "run_id",
            "16 freshly generated run ids all collided with existing runs".into(),
        ))
    }

    pub fn get_run(&self, run_id: &str) -> Result<Option<RunInfo>> {
        let runs = self.query_runs(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
            args![run_id],
        )?;
        Ok(runs.into_iter().next())
    }

    /// Like [`Store::get_run`], but an unknown id is an error naming it.
    pub fn run(&self, run_id: &str) -> Result<RunInfo> {
        self.get_run(run_id)?.ok_or_else(|| StoreError::UnknownRun {
            path: self.path.clone(),
            run_id: run_id.to_string(),
        })
    }

    /// All runs, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunInfo>> {
        self.query_runs(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY created_ms DESC, run_id DESC"),
            &[],
        )
    }

    pub fn set_status(&self, run_id: &str, status: RunStatus) -> Result<()> {
        let changed = self.read("set a run's status", |db| {
            Ok(db.exec(
                "UPDATE runs SET status = ?2, updated_ms = ?3 WHERE run_id = ?1",
                args![run_id, status.as_str(), now_ms()],
            )?)
        })?;
        self.expect_run(run_id, changed)
    }

    pub fn update_manifest(&self, run_id: &str, manifest: &Manifest) -> Result<()> {
        let text = canonical_json(&self.manifest_json(manifest)?);
        let changed = self.read("update a run's manifest", |db| {
            Ok(db.exec(
                "UPDATE runs SET manifest = ?2, updated_ms = ?3 WHERE run_id = ?1",
                args![run_id, text.as_str(), now_ms()],
            )?)
        })?;
        self.expect_run(run_id, changed)
    }

    /// The oldest run with this configuration, whatever its status (judge runs are found again this way).
    pub fn first_run_with_config(&self, config_hash: &str) -> Result<Option<String>> {
        self.read("find a run by configuration", |db| {
            Ok(scalar(
                db,
                "SELECT run_id FROM runs WHERE config_hash = ?1 ORDER BY created_ms, run_id LIMIT 1",
                args![config_hash],
            )?)
        })
    }

    /// The newest run with this configuration that did not finish (status `running` or `interrupted`).
    ///
    /// A `running` run may also be one that another live process is still working on; the store cannot tell a
    /// killed process from a live one.
    pub fn find_resumable(&self, config_hash: &str) -> Result<Option<RunInfo>> {
        let runs = self.query_runs(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE config_hash = ?1 AND status != 'finished'
                 ORDER BY created_ms DESC, run_id DESC LIMIT 1"
            ),
            args![config_hash],
        )?;
        Ok(runs.into_iter().next())
    }

    fn query_runs(&self, sql: &str, params: &[Value]) -> Result<Vec<RunInfo>> {
        let rows = self.read("list runs", |db| Ok(db.query(sql, params)?))?;
        rows.iter()
            .map(|r| {
                let raw = raw_run(r).map_err(|e| self.err("list runs", e))?;
                self.run_info(raw)
            })
            .collect()
    }

    fn run_info(&self, r: RawRun) -> Result<RunInfo> {
        let status = RunStatus::parse(&r.status)
            .ok_or_else(|| self.invalid("runs.status", format!("unknown status {:?}", r.status)))?;
        let json = |source| StoreError::Json {
            path: self.path.clone(),
            what: "run manifest",
            source,
        };
        let mut manifest = serde_json::from_str(&r.manifest).map_err(json)?;
        crate::url_credentials::scrub(&mut manifest);
        let manifest = serde_json::from_value(manifest).map_err(json)?;
        Ok(RunInfo {
            run_id: r.run_id,
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
            status,
            config_hash: r.config_hash,
            manifest,
        })
    }

    fn manifest_json(&self, manifest: &Manifest) -> Result<serde_json::Value> {
        serde_json::to_value(manifest).map_err(|source| StoreError::Json {
            path: self.path.clone(),
            what: "run manifest",
            source,
        })
    }

    fn expect_run(&self, run_id: &str, changed: u64) -> Result<()> {
        if changed == 0 {
            return Err(StoreError::UnknownRun {
                path: self.path.clone(),
                run_id: run_id.to_string(),
            });
        }
        Ok(())
    }
}

struct RawRun {
    run_id: String,
    created_ms: i64,
    updated_ms: i64,
    status: String,
    config_hash: String,
    manifest: String,
}

fn raw_run(row: &Row) -> DbResult<RawRun> {
    Ok(RawRun {
        run_id: row.get(0)?,
        created_ms: row.get(1)?,
        updated_ms: row.get(2)?,
        status: row.get(3)?,
        config_hash: row.get(4)?,
        manifest: row.get(5)?,
    })
}
