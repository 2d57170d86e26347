//! Limits shared by every process using the store: each server has `limit` slots, an attempt holds one while it
//! runs (until a deadline, so a killed worker's slots come back), and a 429 pauses the server for everyone.
//! Each call is one short transaction; callers poll while every slot is taken.

use crate::db::{args, scalar};
use crate::error::Result;
use crate::keys::now_ms;
use crate::Store;

impl Store {
    /// Takes a free slot of `server` (one of `0..limit`) for `holder` until `hold_ms` from now, or `None` when
    /// all are taken.
    pub fn take_fleet_slot(
        &self,
        server: &str,
        limit: u32,
        holder: &str,
        hold_ms: i64,
    ) -> Result<Option<u32>> {
        let skip_locked = if self.is_postgres() {
            "FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let take = format!(
            "UPDATE fleet_slots SET holder = ?3, until_ms = ?4
             WHERE server = ?1 AND slot = (
                 SELECT slot FROM fleet_slots
                 WHERE server = ?1 AND slot < ?2 AND (holder IS NULL OR until_ms < ?5)
                 ORDER BY slot LIMIT 1 {skip_locked})
             RETURNING slot"
        );
        let now = now_ms();
        self.write("take a fleet slot", |db| {
            let known: i64 = scalar(
                db,
                "SELECT count(*) FROM fleet_slots WHERE server = ?1 AND slot < ?2",
                args![server, limit],
            )?;
            if known < i64::from(limit) {
                for slot in 0..limit {
                    db.exec(
                        "INSERT INTO fleet_slots (server, slot) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                        args![server, slot],
                    )?;
                }
            }
            Ok(scalar(db, &take, args![server, limit, holder, now + hold_ms, now])?)
        })
    }

    /// Gives a slot back (if `holder` still holds it).
    pub fn give_back_fleet_slot(&self, server: &str, slot: u32, holder: &str) -> Result<()> {
        self.write("give back a fleet slot", |db| {
            db.exec(
                "UPDATE fleet_slots SET holder = NULL, until_ms = NULL
                 WHERE server = ?1 AND slot = ?2 AND holder = ?3",
                args![server, slot, holder],
            )?;
            Ok(())
        })
    }

    /// Nobody sends to `server` before `until_ms` (a later pause already set stays).
    pub fn pause_fleet(&self, server: &str, until_ms: i64) -> Result<()> {
        self.write("pause a server for the fleet", |db| {
            db.exec(
                "INSERT INTO fleet_pauses (server, until_ms) VALUES (?1, ?2)
                 ON CONFLICT (server) DO UPDATE SET until_ms =
                     CASE WHEN excluded.until_ms > fleet_pauses.until_ms
                          THEN excluded.until_ms ELSE fleet_pauses.until_ms END",
                args![server, until_ms],
            )?;
            Ok(())
        })
    }

    /// Until when `server` is paused for the fleet, if it ever was.
    pub fn fleet_pause(&self, server: &str) -> Result<Option<i64>> {
        self.read("read a server's fleet pause", |db| {
            Ok(scalar(
                db,
                "SELECT until_ms FROM fleet_pauses WHERE server = ?1",
                args![server],
            )?)
        })
    }
}
