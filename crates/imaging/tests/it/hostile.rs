//! The hostile corpus (`nmb_test_support::hostile`) read in process: every input is refused with an error that
//! says what was wrong, and none takes long. `crates/cli/tests/it/hostile.rs` runs the same corpus through the
//! binary, with its exit code, stderr, time and memory.

use std::time::{Duration, Instant};

use nmb_imaging::{describe_volume, render_path, RenderOptions};
use nmb_test_support::hostile::{write_corpus, Hostile};

fn refusal(item: &Hostile) -> Result<(), String> {
    let path = item.path();
    if item.raster {
        let bytes = std::fs::read(&path).unwrap();
        return nmb_imaging::verify(&bytes)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let opts: RenderOptions =
        serde_json::from_value(item.render_json()).map_err(|e| e.to_string())?;
    let headers = describe_volume(&path, &opts);
    render_path(&path, &opts).map_err(|e| e.to_string())?;
    headers.map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn every_hostile_input_is_refused_quickly_with_what_was_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path());
    assert!(corpus.len() >= 60, "{} inputs", corpus.len());
    let mut wrong = Vec::new();
    for item in &corpus {
        let started = Instant::now();
        let outcome = refusal(item);
        let took = started.elapsed();
        match outcome {
            Ok(()) => wrong.push(format!("{}: accepted", item.name)),
            Err(e) if !e.contains(item.expect) => wrong.push(format!(
                "{}: {e:?} does not say {:?}",
                item.name, item.expect
            )),
            Err(_) if took > Duration::from_secs(5) => {
                wrong.push(format!("{}: took {took:?}", item.name))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_one_voxel_wide_volume_makes_a_montage_without_zooming_it_128_times() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("thin.nii");
    let mut header = vec![0u8; 352];
    header[0..4].copy_from_slice(&348i32.to_le_bytes());
    for (i, d) in [3i16, 1, 8192, 64].iter().enumerate() {
        header[40 + 2 * i..42 + 2 * i].copy_from_slice(&d.to_le_bytes());
    }
    header[70..72].copy_from_slice(&2i16.to_le_bytes());
    header[72..74].copy_from_slice(&8i16.to_le_bytes());
    for i in 0..4 {
        header[76 + 4 * i..80 + 4 * i].copy_from_slice(&1f32.to_le_bytes());
    }
    header[108..112].copy_from_slice(&352f32.to_le_bytes());
    header[344..348].copy_from_slice(b"n+1\0");
    header.resize(352 + 8192 * 64, 9);
    std::fs::write(&path, header).unwrap();
    let opts: RenderOptions = serde_json::from_str(r#"{"layout":"montage:2x2"}"#).unwrap();
    let started = Instant::now();
    let (views, _) = render_path(&path, &opts).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (w, h) = (views[0].width, views[0].height);
    assert!(
        w.max(h) <= 8192 && u64::from(w) * u64::from(h) <= 2 * 8192,
        "{w} x {h}"
    );
}
