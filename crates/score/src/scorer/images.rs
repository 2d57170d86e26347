//! What judges see of the images (`--judge-images same`): with every question about a case, the exact bytes the
//! graded model received, read from the store by hash in the order of its conversation, each with its caption.

use std::collections::HashMap;
use std::sync::Arc;

use nmb_chat::{ImagePart, StoredConversation};
use nmb_judges::judge::{JudgeImage, JudgeModel};
use nmb_requests::BackendKind;
use nmb_requests::ModelSpec;
use nmb_store::{SampleRecord, Store};
use nmb_suite::Case;

use super::Work;
use crate::ScoreError;

/// Why a judge spec cannot be shown images before it is even connected: the in-process engine reads text only.
pub(crate) fn blind_spec(spec: &ModelSpec) -> Option<&'static str> {
    (spec.backend == BackendKind::Local).then_some("a local: model reads text only")
}

/// Refuses, before anything is sent, a judge whose backend drops images.
pub fn refuse_blind_judges(judges: &[JudgeModel]) -> Result<(), ScoreError> {
    match judges.iter().find(|j| !j.backend.supports_images()) {
        Some(j) => Err(ScoreError::JudgeWithoutImages {
            spec: j.spec.to_string(),
            why: "its backend sends text only".into(),
        }),
        None => Ok(()),
    }
}

/// Gives every answered sample the images its model was shown.
pub(super) fn attach(store: &Store, run_id: &str, work: &mut [Work<'_>]) -> Result<(), ScoreError> {
    let mut reader = ShownImages::new(store);
    for w in work.iter_mut() {
        if !w.score.status.is_scored() {
            continue;
        }
        w.images = reader.of(run_id, w.record, Some(w.case))?;
    }
    Ok(())
}

/// Reads what a judge is shown of stored samples: each image once from the store, each prompt parsed once.
pub(crate) struct ShownImages<'s> {
    store: &'s Store,
    parts: HashMap<String, ImagePart>,
    prompts: HashMap<String, Vec<String>>,
}

impl<'s> ShownImages<'s> {
    pub fn new(store: &'s Store) -> Self {
        ShownImages {
            store,
            parts: HashMap::new(),
            prompts: HashMap::new(),
        }
    }

    /// The images the model of `run_id` was shown for `record`, in its order, captioned from `case` when given.
    pub fn of(
        &mut self,
        run_id: &str,
        record: &SampleRecord,
        case: Option<&Case>,
    ) -> Result<Vec<JudgeImage>, ScoreError> {
        let hashes = shown(self.store, record, &mut self.prompts)?;
        let mut images = Vec::with_capacity(hashes.len());
        for (n, sha256) in hashes.iter().enumerate() {
            let part = match self.parts.get(sha256) {
                Some(p) => p.clone(),
                None => {
                    let missing = || ScoreError::ImageMissing {
                        run_id: run_id.to_string(),
                        task_id: record.task_id.clone(),
                        sample: record.sample_index,
                        sha256: sha256.clone(),
                    };
                    let stored = self.store.image(sha256)?.ok_or_else(missing)?;
                    let part = ImagePart {
                        sha256: stored.sha256,
                        mime: stored.mime,
                        bytes: Arc::from(stored.bytes),
                    };
                    self.parts.insert(sha256.clone(), part.clone());
                    part
                }
            };
            images.push(JudgeImage {
                caption: case.and_then(|c| caption(c, &hashes, n)),
                part,
            });
        }
        Ok(images)
    }
}

/// The hashes of the images of the conversation the sample's last answered turn was asked with (every earlier
/// turn's images included), each once, in order.
fn shown(
    store: &Store,
    record: &SampleRecord,
    prompts: &mut HashMap<String, Vec<String>>,
) -> Result<Vec<String>, ScoreError> {
    let Some(turn) = record.turns.iter().rev().find(|t| t.ok) else {
        return Ok(Vec::new());
    };
    let hash = &turn.call.prompt_hash;
    if let Some(found) = prompts.get(hash) {
        return Ok(found.clone());
    }
    let body = store.prompt_body(hash)?.unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    if let Ok(conversation) = StoredConversation::parse(&body) {
        for m in conversation.user_messages() {
            for image in m.images() {
                if !out.iter().any(|h| h == image) {
                    out.push(image.to_string());
                }
            }
        }
    }
    prompts.insert(hash.clone(), out.clone());
    Ok(out)
}

/// The caption of the `n`th image shown: the case image with those bytes, else the case image at that place when
/// the case has one image per image shown (rendered or changed images have bytes of their own).
fn caption(case: &Case, shown: &[String], n: usize) -> Option<String> {
    let by_hash = case
        .images
        .iter()
        .find(|i| i.sha256.as_deref() == Some(shown[n].as_str()));
    let by_place = (case.images.len() == shown.len()).then(|| &case.images[n]);
    by_hash.or(by_place).and_then(|i| i.label())
}
