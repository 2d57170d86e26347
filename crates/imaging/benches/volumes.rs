//! Rendering speed on two workloads, printed as one JSON object per line:
//! - `nifti_montage`: load a NIfTI volume, reorient it, and render a 3x3 axial montage to PNG;
//! - `dicom_series`: load a DICOM series directory (group, order, decode, rescale) and render its middle slice.
//!
//! `cargo bench -p nmb-imaging --bench volumes -- --nifti FILE --series DIR [--repeat N]`. Without paths it makes
//! a 256x256x180 NIfTI phantom in a temporary directory (a DICOM series needs a writer: run
//! `crates/imaging/benches/compare_python.py`, which makes both, runs this and times pydicom + numpy and nibabel
//! on the same files).

use std::path::{Path, PathBuf};
use std::time::Instant;

use nmb_imaging::{render_path, RenderOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let repeat: usize = value("--repeat").and_then(|r| r.parse().ok()).unwrap_or(5);
    let tmp = std::env::temp_dir().join(format!("nmb-bench-{}", std::process::id()));
    let nifti = value("--nifti")
        .map(PathBuf::from)
        .unwrap_or_else(|| phantom(&tmp));
    let montage: RenderOptions =
        serde_json::from_str(r#"{"view":"axial","layout":"montage:3x3","window":"auto"}"#).unwrap();
    report("nifti_montage", &nifti, &montage, repeat);
    if let Some(series) = value("--series") {
        let mid: RenderOptions =
            serde_json::from_str(r#"{"view":"axial","window":"auto"}"#).unwrap();
        report("dicom_series", Path::new(&series), &mid, repeat);
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

fn report(workload: &str, path: &Path, opts: &RenderOptions, repeat: usize) {
    let mut times = Vec::with_capacity(repeat);
    let mut png_bytes = 0;
    for _ in 0..repeat {
        let start = Instant::now();
        let (views, _) = render_path(path, opts).unwrap_or_else(|e| panic!("{e}"));
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        png_bytes = views.iter().map(|v| v.png.len()).sum::<usize>();
    }
    times.sort_by(f64::total_cmp);
    let line = serde_json::json!({
        "workload": workload,
        "tool": "nmb",
        "median_ms": times[times.len() / 2],
        "min_ms": times[0],
        "repeat": repeat,
        "png_bytes": png_bytes,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    });
    println!("{line}");
}

/// A 256x256x180 int16 NIfTI-1 phantom: an ellipsoid "head" with an inner "ventricle" and some texture.
fn phantom(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let (nx, ny, nz) = (256usize, 256usize, 180usize);
    let mut header = vec![0u8; 352];
    let put_i16 =
        |h: &mut Vec<u8>, at: usize, v: i16| h[at..at + 2].copy_from_slice(&v.to_le_bytes());
    let put_f32 =
        |h: &mut Vec<u8>, at: usize, v: f32| h[at..at + 4].copy_from_slice(&v.to_le_bytes());
    header[0..4].copy_from_slice(&348i32.to_le_bytes());
    for (i, d) in [3i16, nx as i16, ny as i16, nz as i16, 1, 1, 1, 1]
        .iter()
        .enumerate()
    {
        put_i16(&mut header, 40 + 2 * i, *d);
    }
    put_i16(&mut header, 70, 4); // datatype int16
    put_i16(&mut header, 72, 16);
    for (i, p) in [1.0f32, 1.0, 1.0, 1.0].iter().enumerate() {
        put_f32(&mut header, 76 + 4 * i, *p);
    }
    put_f32(&mut header, 108, 352.0);
    put_f32(&mut header, 112, 1.0);
    put_i16(&mut header, 254, 1); // sform_code
    let rows = [
        [1.0f32, 0.0, 0.0, -128.0],
        [0.0, 1.0, 0.0, -128.0],
        [0.0, 0.0, 1.0, -90.0],
    ];
    for (r, row) in rows.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            put_f32(&mut header, 280 + 16 * r + 4 * c, *v);
        }
    }
    header[344..348].copy_from_slice(b"n+1\0");
    let mut data = header;
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let (x, y, z) = (i as f64 - 128.0, j as f64 - 128.0, k as f64 - 90.0);
                let r =
                    (x * x / 90.0f64.powi(2) + y * y / 110.0f64.powi(2) + z * z / 80.0f64.powi(2))
                        .sqrt();
                let v = if r < 0.25 {
                    200.0
                } else if r < 0.95 {
                    800.0 + 50.0 * ((i * 7 + j * 13 + k * 3) % 11) as f64
                } else if r < 1.0 {
                    1400.0
                } else {
                    0.0
                };
                data.extend_from_slice(&(v as i16).to_le_bytes());
            }
        }
    }
    let path = dir.join("phantom.nii");
    std::fs::write(&path, data).unwrap();
    path
}
