//! Volumes (DICOM, NIfTI) into prompt images: rendered by `nmb-imaging`, keyed by content and options, and kept
//! in a [`RenderCache`] so that a re-run does not render again.

use std::sync::Arc;

use nmb_imaging::RenderOptions;
use nmb_suite::Image;

use crate::chat::ImagePart;
use crate::error::PlanError;
use crate::loaded::LoadedImage;

/// One rendered view as a cache holds it.
#[derive(Debug, Clone)]
pub struct CachedView {
    pub sha256: String,
    pub png: Arc<[u8]>,
    pub width: u32,
    pub height: u32,
    pub label: String,
}

/// Somewhere renders outlive the process (the run store). Keys come from [`nmb_imaging::render_key`].
pub trait RenderCache: Send + Sync {
    /// The views stored under `key`, or `None` when nothing is (a failed read also counts as a miss).
    fn get(&self, key: &str) -> Option<Vec<CachedView>>;
    /// Stores the views of `key`. A failure only costs a later re-render, so it is reported, not fatal.
    fn put(&self, key: &str, views: &[CachedView]) -> Result<(), String>;
}

/// The options actually used: the suite's, with the longest side capped at what the backend accepts.
pub(crate) fn effective_options(opts: &RenderOptions, backend_max: Option<u32>) -> RenderOptions {
    let mut opts = opts.clone();
    opts.max_side = match (opts.max_side, backend_max) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    opts
}

/// Renders (or fetches from `cache`) the views of one volume image.
pub(crate) fn load_volume(
    case_id: &str,
    image: &Image,
    opts: &RenderOptions,
    cache: Option<&dyn RenderCache>,
) -> Result<Vec<LoadedImage>, PlanError> {
    let error = |message: String| PlanError::Volume {
        case: case_id.to_string(),
        image: image.id.clone(),
        message,
    };
    let path = image
        .source
        .path()
        .ok_or_else(|| error("a volume must be a file or directory, not inline bytes".into()))?;
    let source = nmb_imaging::source_hash(path).map_err(|e| error(e.to_string()))?;
    if let Some(expected) = image.sha256.as_ref().filter(|e| **e != source) {
        return Err(PlanError::ImageChanged {
            case: case_id.to_string(),
            image: image.id.clone(),
            source_desc: image.source.describe(),
            expected: expected.clone(),
            actual: source,
        });
    }
    let key = nmb_imaging::render_key(&source, opts);
    if let Some(views) = cache.and_then(|c| c.get(&key)) {
        return Ok(views.into_iter().map(loaded).collect());
    }
    let (views, _) = nmb_imaging::render_path(path, opts).map_err(|e| error(e.to_string()))?;
    let views: Vec<CachedView> = views
        .into_iter()
        .map(|v| CachedView {
            sha256: nmb_imaging::content_hash(&v.png),
            png: Arc::from(v.png),
            width: v.width,
            height: v.height,
            label: v.label,
        })
        .collect();
    if let Some(cache) = cache {
        if let Err(e) = cache.put(&key, &views) {
            tracing::warn!(
                "could not keep the render of case {case_id}, image {}: {e}",
                image.id
            );
        }
    }
    Ok(views.into_iter().map(loaded).collect())
}

fn loaded(view: CachedView) -> LoadedImage {
    LoadedImage {
        part: ImagePart {
            sha256: view.sha256,
            mime: "image/png".to_string(),
            bytes: view.png,
        },
        width: Some(view.width),
        height: Some(view.height),
        view: Some(view.label),
    }
}
