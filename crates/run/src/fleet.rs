//! [`Fleet`] through the store: the per-server limit and the 429 pauses hold for every process that shares the
//! store, not for each one alone. A free slot is polled for; an unreachable store limits nothing rather than
//! stopping the run (its own per-process limits still hold).

use std::sync::Arc;
use std::time::Duration;

use nmb_requests::{BoxFuture, Fleet, FleetSlot};
use nmb_store::{now_ms, Store};

/// How often a worker that found every slot taken looks again.
const POLL: Duration = Duration::from_millis(25);

pub struct StoreFleet {
    store: Arc<Store>,
    holder: String,
    limit: u32,
    hold: Duration,
}

impl StoreFleet {
    /// At most `limit` attempts in flight per server across the fleet; a slot is held at most `hold` (the
    /// attempt timeout and a margin), after which a killed worker's slot is free again.
    pub fn new(store: Arc<Store>, holder: String, limit: u32, hold: Duration) -> StoreFleet {
        StoreFleet {
            store,
            holder,
            limit: limit.max(1),
            hold,
        }
    }

    async fn wait_for_slot(&self, server: &str) -> FleetSlot {
        let hold_ms = i64::try_from(self.hold.as_millis()).unwrap_or(i64::MAX);
        loop {
            if let Err(e) = self.wait_out_pause(server).await {
                return self.unlimited(server, e);
            }
            match self
                .store
                .take_fleet_slot(server, self.limit, &self.holder, hold_ms)
            {
                Ok(Some(slot)) => {
                    return FleetSlot {
                        server: server.to_string(),
                        slot: Some(slot),
                    }
                }
                Ok(None) => tokio::time::sleep(POLL).await,
                Err(e) => return self.unlimited(server, e),
            }
        }
    }

    async fn wait_out_pause(&self, server: &str) -> nmb_store::Result<()> {
        if let Some(until) = self.store.fleet_pause(server)? {
            let left = until - now_ms();
            if left > 0 {
                tokio::time::sleep(Duration::from_millis(left as u64)).await;
            }
        }
        Ok(())
    }

    fn unlimited(&self, server: &str, e: nmb_store::StoreError) -> FleetSlot {
        tracing::warn!("fleet limits unavailable for {server}: {e}");
        FleetSlot {
            server: server.to_string(),
            slot: None,
        }
    }
}

impl Fleet for StoreFleet {
    fn enter<'a>(&'a self, server: &'a str) -> BoxFuture<'a, FleetSlot> {
        Box::pin(self.wait_for_slot(server))
    }

    fn leave(&self, slot: FleetSlot) {
        let Some(n) = slot.slot else { return };
        if let Err(e) = self
            .store
            .give_back_fleet_slot(&slot.server, n, &self.holder)
        {
            tracing::warn!("cannot give back fleet slot {n} of {}: {e}", slot.server);
        }
    }

    fn rate_limited(&self, server: &str, pause: Duration) {
        let until = now_ms() + i64::try_from(pause.as_millis()).unwrap_or(i64::MAX / 2);
        if let Err(e) = self.store.pause_fleet(server, until) {
            tracing::warn!("cannot pause {server} for the fleet: {e}");
        }
    }
}
