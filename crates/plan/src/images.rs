//! Image bytes for prompts: read lazily from a suite image's source, checked, and shared.
//!
//! [`ImageCache`] keeps recently used images (bounded by bytes, least recently used evicted) so an image used by
//! many tasks or samples is read and hashed once, and a content-hash index of weak references makes identical
//! bytes from different sources share one allocation while anyone still holds them. Nothing else keeps image
//! bytes alive: a plan holds only the images of the tasks its caller has not dropped yet. A volume becomes its
//! rendered views (see [`crate::volumes`]), cached here by path and options like any other image.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use nmb_imaging::ImageSource;
use nmb_suite::Image;

use crate::chat::ImagePart;
use crate::error::PlanError;
use crate::loaded::LoadedImage;
use crate::volumes::{effective_options, load_volume, RenderCache};

/// Default bound on the bytes the cache keeps alive by itself.
pub const DEFAULT_CACHE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SourceKey {
    File(PathBuf),
    /// Address and length of inline bytes. The entry pins that allocation, so the address cannot be reused
    /// for other bytes while the key exists.
    Inline(usize, usize),
    /// A volume's path and its effective render options.
    Volume(PathBuf, String),
    /// An image's content hash, a perturbation and its seed.
    Perturbed(String, String, u64),
    /// A source read and hashed but not yet decoded ([`ImageCache::load_to_perturb`]).
    Unverified(Box<SourceKey>),
}

struct Entry {
    loaded: Vec<LoadedImage>,
    _pin: Option<Arc<[u8]>>,
    cost: usize,
    last_used: u64,
}

#[derive(Default)]
struct Inner {
    by_source: HashMap<SourceKey, Entry>,
    by_sha: HashMap<String, Weak<[u8]>>,
    held: usize,
    tick: u64,
}

/// A bounded, thread-safe cache of images ready for messages. Share it with `Arc` across plans if wanted.
pub struct ImageCache {
    inner: Mutex<Inner>,
    /// Images changed by a perturbation so far (each is made once while the cache keeps it).
    perturbed: std::sync::atomic::AtomicU64,
    cap_bytes: usize,
    renders: Option<Arc<dyn RenderCache>>,
    max_side: Option<u32>,
}

impl Default for ImageCache {
    fn default() -> Self {
        ImageCache::new(DEFAULT_CACHE_BYTES)
    }
}

impl std::fmt::Debug for ImageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ImageCache({} of {} bytes held)",
            self.held_bytes(),
            self.cap_bytes
        )
    }
}

fn key_of(source: &ImageSource) -> SourceKey {
    match source {
        ImageSource::File(p) => SourceKey::File(p.clone()),
        ImageSource::Bytes(b) => SourceKey::Inline(b.as_ptr() as usize, b.len()),
    }
}

impl ImageCache {
    /// A cache that keeps at most `cap_bytes` of image bytes alive by itself.
    pub fn new(cap_bytes: usize) -> Self {
        ImageCache {
            inner: Mutex::new(Inner::default()),
            perturbed: Default::default(),
            cap_bytes,
            renders: None,
            max_side: None,
        }
    }

    /// Keeps volume renders in `renders` too, so another process (a re-run) finds them.
    pub fn with_render_cache(mut self, renders: Arc<dyn RenderCache>) -> Self {
        self.renders = Some(renders);
        self
    }

    /// Caps the longest side of rendered views (the backend's own limit), unless a suite asks for less.
    pub fn with_max_side(mut self, max_side: Option<u32>) -> Self {
        self.max_side = max_side;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the maps consistent (each update is one insert), so
        // a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many images a perturbation has changed through this cache.
    pub fn perturbed_count(&self) -> u64 {
        self.perturbed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes the cache itself currently keeps alive.
    pub fn held_bytes(&self) -> usize {
        self.lock().held
    }

    /// Reads, checks and returns the images one suite image becomes: itself for a web format (PNG, JPEG, GIF,
    /// WebP), or the rendered views of a volume.
    pub fn load(&self, case_id: &str, image: &Image) -> Result<Vec<LoadedImage>, PlanError> {
        if let (Some(opts), Some(path)) = (&image.render, image.source.path()) {
            let opts = effective_options(opts, self.max_side);
            let key = SourceKey::Volume(path.to_path_buf(), opts.key());
            if let Some(hit) = self.get(&key) {
                return Ok(hit);
            }
            let views = load_volume(case_id, image, &opts, self.renders.as_deref())?;
            return Ok(self.insert(key, image, views));
        }
        let key = key_of(&image.source);
        if let Some(hit) = self.get(&key) {
            return check_expected(case_id, image, hit);
        }
        let loaded = read_image(case_id, image, true)?;
        let loaded = self.insert(key, image, vec![loaded]);
        check_expected(case_id, image, loaded)
    }

    /// As [`ImageCache::load`], for an image a pixel perturbation then changes: a web image is read and hashed
    /// but not decoded here, because the perturbation decodes it in full (and refuses it as `load` would).
    pub(crate) fn load_to_perturb(
        &self,
        case_id: &str,
        image: &Image,
    ) -> Result<Vec<LoadedImage>, PlanError> {
        if image.render.is_some() {
            return self.load(case_id, image);
        }
        let source = key_of(&image.source);
        if let Some(hit) = self.get(&source) {
            return check_expected(case_id, image, hit);
        }
        let key = SourceKey::Unverified(Box::new(source));
        if let Some(hit) = self.get(&key) {
            return check_expected(case_id, image, hit);
        }
        let loaded = read_image(case_id, image, false)?;
        let loaded = self.insert(key, image, vec![loaded]);
        check_expected(case_id, image, loaded)
    }

    /// The image changed by a pixel perturbation, made once per image, perturbation and seed while the cache
    /// keeps it.
    pub(crate) fn perturbed(
        &self,
        loaded: LoadedImage,
        perturbation: &nmb_imaging::Perturbation,
        seed: u64,
    ) -> Result<LoadedImage, nmb_imaging::ImageError> {
        let key = SourceKey::Perturbed(loaded.part.sha256.clone(), perturbation.to_string(), seed);
        if let Some(mut hit) = self.get(&key) {
            return Ok(hit.remove(0));
        }
        let png = perturbation.apply_hashed(&loaded.part.bytes, &loaded.part.sha256, seed)?;
        self.perturbed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let info = nmb_imaging::inspect(&png)?;
        let changed = LoadedImage {
            part: ImagePart {
                sha256: info.sha256,
                mime: info.format.mime().to_string(),
                bytes: png.into(),
            },
            width: info.width,
            height: info.height,
            view: loaded.view,
        };
        let mut entry = self.insert_entry(key, None, vec![changed]);
        Ok(entry.remove(0))
    }

    fn get(&self, key: &SourceKey) -> Option<Vec<LoadedImage>> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.by_source.get_mut(key)?;
        entry.last_used = tick;
        Some(entry.loaded.clone())
    }

    fn insert(&self, key: SourceKey, image: &Image, loaded: Vec<LoadedImage>) -> Vec<LoadedImage> {
        let pin = match &image.source {
            ImageSource::Bytes(b) => Some(b.clone()),
            ImageSource::File(_) => None,
        };
        self.insert_entry(key, pin, loaded)
    }

    fn insert_entry(
        &self,
        key: SourceKey,
        pin: Option<Arc<[u8]>>,
        mut loaded: Vec<LoadedImage>,
    ) -> Vec<LoadedImage> {
        let mut inner = self.lock();
        for one in &mut loaded {
            share_bytes(&mut inner, one);
        }
        let cost = loaded.iter().map(|l| l.part.bytes.len()).sum();
        inner.tick += 1;
        let entry = Entry {
            loaded: loaded.clone(),
            _pin: pin,
            cost,
            last_used: inner.tick,
        };
        if let Some(old) = inner.by_source.insert(key, entry) {
            inner.held -= old.cost;
        }
        inner.held += cost;
        evict(&mut inner, self.cap_bytes);
        loaded
    }
}

/// Identical bytes from different sources share one allocation while anyone holds them.
fn share_bytes(inner: &mut Inner, loaded: &mut LoadedImage) {
    let shared = inner
        .by_sha
        .get(&loaded.part.sha256)
        .and_then(Weak::upgrade);
    match shared {
        Some(bytes) => loaded.part.bytes = bytes,
        None => {
            let weak = Arc::downgrade(&loaded.part.bytes);
            inner.by_sha.insert(loaded.part.sha256.clone(), weak);
        }
    }
}

fn evict(inner: &mut Inner, cap: usize) {
    while inner.held > cap {
        let oldest = inner
            .by_source
            .iter()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(k, _)| k.clone());
        let Some(key) = oldest else { break };
        if let Some(e) = inner.by_source.remove(&key) {
            inner.held -= e.cost;
        }
    }
    if inner.by_sha.len() > 2 * inner.by_source.len() + 64 {
        inner.by_sha.retain(|_, w| w.strong_count() > 0);
    }
}

/// Reads and hashes an image; `verify`: decodes it in full too (a caller that decodes it anyway passes false).
fn read_image(case_id: &str, image: &Image, verify: bool) -> Result<LoadedImage, PlanError> {
    let source_desc = || image.source.describe();
    let bytes = image.source.read().map_err(|source| PlanError::Image {
        case: case_id.to_string(),
        image: image.id.clone(),
        source_desc: source_desc(),
        source,
    })?;
    let image_error = |source| PlanError::Image {
        case: case_id.to_string(),
        image: image.id.clone(),
        source_desc: source_desc(),
        source,
    };
    // A truncated or corrupt image is refused here, before a model is paid to look at it.
    if verify {
        nmb_imaging::verify(&bytes).map_err(image_error)?;
    }
    let info = nmb_imaging::inspect(&bytes).map_err(image_error)?;
    if !info.format.is_web_image() {
        return Err(PlanError::UnsupportedImageFormat {
            case: case_id.to_string(),
            image: image.id.clone(),
            source_desc: source_desc(),
            format: info.format,
        });
    }
    Ok(LoadedImage {
        part: ImagePart {
            sha256: info.sha256,
            mime: info.format.mime().to_string(),
            bytes,
        },
        width: info.width,
        height: info.height,
        view: None,
    })
}

/// A loader that already hashed the image recorded it; different bytes now mean the file changed under us.
fn check_expected(
    case_id: &str,
    image: &Image,
    loaded: Vec<LoadedImage>,
) -> Result<Vec<LoadedImage>, PlanError> {
    let actual = loaded
        .first()
        .map(|l| l.part.sha256.clone())
        .unwrap_or_default();
    match &image.sha256 {
        Some(expected) if *expected != actual => Err(PlanError::ImageChanged {
            case: case_id.to_string(),
            image: image.id.clone(),
            source_desc: image.source.describe(),
            expected: expected.clone(),
            actual,
        }),
        _ => Ok(loaded),
    }
}
