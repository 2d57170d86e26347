//! Volumes in prompts: rendered once per (content, options), kept in a render cache that outlives the
//! `ImageCache`, and capped at the backend's image size.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nmb_imaging::{ImageSource, RenderOptions};
use nmb_plan::{CachedView, ImageCache, RenderCache};
use nmb_suite::Image;
use nmb_test_support::assets;

/// A render cache that counts what it is asked, as the run store would be.
#[derive(Default)]
struct Counting {
    views: Mutex<HashMap<String, Vec<CachedView>>>,
    hits: Mutex<u32>,
    puts: Mutex<u32>,
}

impl RenderCache for Counting {
    fn get(&self, key: &str) -> Option<Vec<CachedView>> {
        let found = self.views.lock().unwrap().get(key).cloned();
        *self.hits.lock().unwrap() += u32::from(found.is_some());
        found
    }
    fn put(&self, key: &str, views: &[CachedView]) -> Result<(), String> {
        *self.puts.lock().unwrap() += 1;
        self.views
            .lock()
            .unwrap()
            .insert(key.to_string(), views.to_vec());
        Ok(())
    }
}

fn volume_image(path: &Path, options: &str) -> Image {
    let mut image = Image::new("t1", ImageSource::File(path.to_path_buf()));
    image.render = Some(serde_json::from_str::<RenderOptions>(options).unwrap());
    image
}

fn load(
    renders: &Arc<Counting>,
    image: &Image,
    max_side: Option<u32>,
) -> Vec<nmb_plan::LoadedImage> {
    let cache = ImageCache::default()
        .with_render_cache(renders.clone())
        .with_max_side(max_side);
    cache.load("case", image).unwrap()
}

#[test]
fn a_rerun_reuses_the_render_and_a_changed_option_or_byte_renders_again() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t1.nii");
    std::fs::copy(dir.join("anatomical.nii"), &path).unwrap();
    let renders = Arc::new(Counting::default());
    let image = volume_image(&path, r#"{"slices":"even:3"}"#);

    let first = load(&renders, &image, None);
    assert_eq!(first.len(), 3, "one image per slice");
    assert!(first
        .iter()
        .all(|l| l.part.mime == "image/png" && l.view.is_some()));
    assert_eq!(*renders.puts.lock().unwrap(), 1);

    // A new ImageCache is a new process as far as rendering goes: it must find the stored views.
    let again = load(&renders, &image, None);
    assert_eq!(
        (*renders.puts.lock().unwrap(), *renders.hits.lock().unwrap()),
        (1, 1)
    );
    let hashes =
        |v: &[nmb_plan::LoadedImage]| v.iter().map(|l| l.part.sha256.clone()).collect::<Vec<_>>();
    assert_eq!(hashes(&again), hashes(&first));

    let other = volume_image(&path, r#"{"slices":"even:2"}"#);
    assert_eq!(load(&renders, &other, None).len(), 2);
    assert_eq!(
        *renders.puts.lock().unwrap(),
        2,
        "another option renders again"
    );

    let small = load(&renders, &image, Some(16));
    assert_eq!(
        *renders.puts.lock().unwrap(),
        3,
        "another size limit renders again"
    );
    assert!(small
        .iter()
        .all(|l| l.width.unwrap().max(l.height.unwrap()) <= 16));

    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] = bytes[last].wrapping_add(1);
    std::fs::write(&path, bytes).unwrap();
    load(&renders, &image, None);
    assert_eq!(
        *renders.puts.lock().unwrap(),
        4,
        "changed bytes render again"
    );
}
