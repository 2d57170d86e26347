//! How the samples of one prompt are asked: together in one call with `n`, or one call each. Servers that lack
//! `n` (llama.cpp's, Ollama's, ...) reject it; the first rejection switches the run to one call per sample for
//! good, and the run manifest records why, so a resumed run starts that way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nmb_requests::{CallError, Secrets};
use nmb_store::{Store, StoreError};

/// What `--no-n` records in the manifest.
pub const FORCED: &str = "--no-n: one request per sample";

pub(crate) struct Sampling {
    store: Arc<Store>,
    run_id: String,
    native_n: bool,
    fell_back: AtomicBool,
}

impl Sampling {
    /// `native_n`: the backend has `n`; `recorded`: the run's manifest already says why it asks one sample per
    /// call (an earlier invocation fell back, or `--no-n`).
    pub(crate) fn new(
        store: Arc<Store>,
        run_id: &str,
        native_n: bool,
        recorded: Option<&str>,
    ) -> Self {
        Sampling {
            store,
            run_id: run_id.to_string(),
            native_n,
            fell_back: AtomicBool::new(recorded.is_some()),
        }
    }

    /// Several samples may go in one call.
    pub(crate) fn native_n(&self) -> bool {
        self.native_n && !self.fell_back.load(Ordering::Relaxed)
    }

    /// Switches to one call per sample after `error` (the server's rejection of `n`), recording it once.
    pub(crate) fn fall_back(&self, error: Option<&CallError>) -> Result<(), StoreError> {
        if self.fell_back.swap(true, Ordering::Relaxed) {
            return Ok(());
        }
        let why = error.map_or_else(String::new, |e| Secrets::from_env().redact(&e.message));
        tracing::warn!(
            "the server rejected n > 1 ({why}); asking one sample per request from now on"
        );
        let mut manifest = self.store.run(&self.run_id)?.manifest;
        manifest.n_unsupported = Some(format!("the server rejected n > 1: {why}"));
        self.store.update_manifest(&self.run_id, &manifest)
    }
}
