//! What the end-to-end benches share: the workload (a native suite of single-sample tasks sharing three noise
//! PNGs) and small helpers for their JSON figures.
#![allow(dead_code)]

use std::path::Path;

use nmb_fake_server::support::noise_png;
use serde_json::{json, Value};

const IMAGE_SIDE: u32 = 124; // a ~46 KB noise PNG

/// A native suite of `tasks` cases, each with its own EHR and notes and the same 3 images. Returns the size
/// of one image.
pub fn write_suite(dir: &Path, tasks: usize) -> usize {
    let root = dir.join("suite");
    std::fs::create_dir_all(root.join("images")).expect("suite dir");
    let mut size = 0;
    for (i, seq) in ["FLAIR", "DWI", "T1"].iter().enumerate() {
        let png = noise_png(IMAGE_SIDE, i as u64);
        size = png.len();
        std::fs::write(root.join(format!("images/{seq}.png")), png).expect("png");
    }
    std::fs::write(
        root.join("suite.toml"),
        "id = \"bench\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\nsamples = 1\n",
    )
    .expect("suite.toml");
    let mut lines = String::new();
    for i in 0..tasks {
        let images: Vec<Value> = ["FLAIR", "DWI", "T1"]
            .iter()
            .map(|s| {
                json!({"path": format!("images/{s}.png"), "modality": "MRI", "sequence": s, "plane": "axial"})
            })
            .collect();
        let case = json!({
            "case_id": format!("case{i:04}"),
            "images": images,
            "ehr": {"Age": 30 + i % 60, "Sex": if i % 2 == 0 { "female" } else { "male" },
                    "Onset": format!("{} days", 1 + i % 30)},
            "notes": format!("Case {i}: subacute cognitive decline and myoclonus over weeks."),
            "tasks": [{"id": format!("case{i:04}/dx"), "family": "differential",
                       "question": "What is the most likely diagnosis?"}],
        });
        lines.push_str(&case.to_string());
        lines.push('\n');
    }
    std::fs::write(root.join("cases.jsonl"), lines).expect("cases.jsonl");
    size
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}
