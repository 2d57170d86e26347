//! How the calls of a run are asked, where servers refuse parts of them.
//!
//! Samples of one prompt go together in one call with `n`, or one call each. Servers that lack `n` (llama.cpp's,
//! Ollama's, ...) reject it; the first rejection switches the run to one call per sample for good, and the run
//! manifest records why, so a resumed run starts that way. Parameters a model refuses (OpenAI's reasoning models:
//! `max_tokens`, `temperature`, `top_p`) are left out by the backend itself ([`nmb_requests::adjust`]); the
//! manifest records each with the server's words (`params_adjusted`), and a resumed run starts with them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nmb_requests::{Adjustment, Backend, CallError, Secrets};

use crate::config::params_adjusted;
use nmb_store::{Manifest, Store, StoreError};

pub(crate) struct Sampling {
    store: Arc<Store>,
    run_id: String,
    backend: Arc<dyn Backend>,
    native_n: bool,
    fell_back: AtomicBool,
    /// How many adjustments the manifest records.
    adjustments_recorded: AtomicUsize,
    /// Held while the manifest is read, changed and written back.
    writing: Mutex<()>,
}

impl Sampling {
    /// `manifest`: the run's as stored (an earlier invocation may have fallen back, or adjusted parameters);
    /// `no_n`: one sample per call from the start. The backend takes up the recorded adjustments.
    pub(crate) fn new(
        store: Arc<Store>,
        run_id: &str,
        backend: Arc<dyn Backend>,
        manifest: &Manifest,
        no_n: bool,
    ) -> Self {
        let recorded = recorded_adjustments(manifest);
        backend.adopt_adjustments(&recorded);
        Sampling {
            store,
            run_id: run_id.to_string(),
            native_n: backend.supports_n(),
            backend,
            fell_back: AtomicBool::new(manifest.n_unsupported.is_some() || no_n),
            adjustments_recorded: AtomicUsize::new(recorded.len()),
            writing: Mutex::new(()),
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
        self.update(|m| m.n_unsupported = Some(format!("the server rejected n > 1: {why}")))
    }

    /// Records the backend's adjustments in the manifest when it has made one the manifest lacks.
    pub(crate) fn note_adjustments(&self) -> Result<(), StoreError> {
        let now = self.backend.adjustments();
        if now.len() <= self.adjustments_recorded.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.update(|m| m.params_adjusted = params_adjusted(&now))?;
        self.adjustments_recorded
            .fetch_max(now.len(), Ordering::Relaxed);
        Ok(())
    }

    fn update(&self, change: impl FnOnce(&mut Manifest)) -> Result<(), StoreError> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut manifest = self.store.run(&self.run_id)?.manifest;
        change(&mut manifest);
        self.store.update_manifest(&self.run_id, &manifest)
    }
}

/// The adjustments a manifest records (names this version does not know are left out).
fn recorded_adjustments(manifest: &Manifest) -> BTreeMap<Adjustment, String> {
    let recorded = manifest.params_adjusted.iter().flatten();
    recorded
        .filter_map(|(name, why)| Some((Adjustment::parse(name)?, why.clone())))
        .collect()
}
