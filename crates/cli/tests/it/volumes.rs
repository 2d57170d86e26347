//! A native suite whose case holds a DICOM series, a NIfTI volume and a DICOM file that carries identifying
//! tags, run end to end over the OpenAI wire: the loopback server decodes every PNG it receives and must get
//! exactly the views nmb renders; nothing identifying reaches the store, the report or the logs.

use std::path::{Path, PathBuf};

use crate::common::*;
use nmb_fake_server::{Config, ReceivedPart, Wire};
use nmb_imaging::RenderOptions;
use nmb_test_support::assets;

const IMAGES: [(&str, &str); 3] = [
    ("ct_brain", r#"{"window":"brain","layout":"montage:2x2"}"#),
    ("t1.nii", r#"{"view":"axial","slices":"even:2"}"#),
    ("ct_small.dcm", "{}"),
];

fn volume_suite(dir: &Path, pydicom: &Path, nibabel: &Path) -> PathBuf {
    let root = dir.join("suite");
    let series = root.join("ct_brain");
    std::fs::create_dir_all(&series).unwrap();
    let src = pydicom.join("dicomdirtests/77654033/CT2");
    for entry in std::fs::read_dir(&src).unwrap() {
        let file = entry.unwrap().path();
        std::fs::copy(&file, series.join(file.file_name().unwrap())).unwrap();
    }
    std::fs::copy(nibabel.join("anatomical.nii"), root.join("t1.nii")).unwrap();
    std::fs::copy(pydicom.join("CT_small.dcm"), root.join("ct_small.dcm")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"volumes\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let images: Vec<serde_json::Value> = IMAGES
        .iter()
        .map(|(path, render)| {
            let render: serde_json::Value = serde_json::from_str(render).unwrap();
            serde_json::json!({"path": path, "render": render})
        })
        .collect();
    let case = serde_json::json!({
        "case_id": "vol1",
        "images": images,
        "ehr": {"Age": 61},
        "notes": "Sudden left-sided weakness.",
        "tasks": [{"id": "vol1/dx", "family": "differential", "question": "What is the most likely diagnosis?"}],
    });
    std::fs::write(root.join("cases.jsonl"), format!("{case}\n")).unwrap();
    root
}

/// (sha256, width, height) of every view nmb should send, in prompt order, capped as for the OpenAI backend.
fn expected_views(root: &Path) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    for (path, render) in IMAGES {
        let mut opts: RenderOptions = serde_json::from_str(render).unwrap();
        opts.max_side = Some(2048);
        let (views, _) = nmb_imaging::render_path(&root.join(path), &opts).unwrap();
        out.extend(
            views
                .iter()
                .map(|v| (nmb_imaging::content_hash(&v.png), v.width, v.height)),
        );
    }
    out
}

/// Identifying values CT_small.dcm carries (name, ID, dates, institution, UIDs).
fn identifying(file: &Path) -> Vec<String> {
    use dicom_dictionary_std::tags;
    let obj = dicom_object::open_file(file).unwrap();
    let found: Vec<String> = [
        tags::PATIENT_NAME,
        tags::PATIENT_ID,
        tags::PATIENT_BIRTH_DATE,
        tags::STUDY_DATE,
        tags::INSTITUTION_NAME,
        tags::STUDY_INSTANCE_UID,
        tags::SERIES_INSTANCE_UID,
        tags::SOP_INSTANCE_UID,
    ]
    .iter()
    .filter_map(|t| {
        obj.element_opt(*t)
            .ok()
            .flatten()?
            .to_str()
            .ok()
            .map(|s| s.trim().to_string())
    })
    .filter(|s| s.len() >= 4)
    .collect();
    assert!(
        found.len() >= 5,
        "CT_small.dcm carries identifying tags: {found:?}"
    );
    found
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn volumes_run_end_to_end_and_nothing_identifying_leaves_the_files() {
    let (Some(pydicom), Some(nibabel)) = (assets::pydicom_files(), assets::nibabel_files()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = volume_suite(tmp.path(), &pydicom, &nibabel);
    let runs = tmp.path().join("runs");
    let report_dir = tmp.path().join("report");
    let server = server(Config::default());
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "test-key-volumes")
        .env("NMB_LOG", "debug")
        .args(["eval", "--suite"])
        .arg(&root)
        .args(["--model", &model_spec(Wire::OpenAi, &server)])
        .args(["--samples", "2", "--json", "-q", "--report"])
        .arg(&report_dir)
        .output()
        .unwrap();
    let logs = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{logs}");
    // stdout is the JSON object alone; the report's path goes to stderr.
    let result: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert!(text(&out.stderr).contains("report: "), "{logs}");
    assert_eq!(result["summary"]["samples_ok"], 2, "{result}");
    assert_eq!(server.bad_requests(), 0, "every PNG decoded on the server");

    let expected = expected_views(&root);
    assert_eq!(
        expected.len(),
        4,
        "a montage, two NIfTI slices, one CT slice"
    );
    for request in server.requests() {
        let received: Vec<(String, u32, u32)> = request
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                ReceivedPart::Image {
                    mime,
                    sha256,
                    width,
                    height,
                    ..
                } => {
                    assert_eq!(mime, "image/png");
                    Some((sha256.clone(), width.unwrap(), height.unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            received, expected,
            "the server got exactly the rendered views"
        );
        let prompt = request.all_text();
        assert!(prompt.contains("CT, axial montage 2x2"), "{prompt}");
        assert!(
            prompt.contains("axial slice") && prompt.contains(" mm)"),
            "{prompt}"
        );
    }

    let html = std::fs::read_to_string(report_dir.join("report.html")).unwrap();
    assert!(
        html.matches("data:image/png").count() >= 4,
        "the report shows the views"
    );
    let store = store(&runs);
    assert_eq!(store.render_view_count().unwrap(), 4, "each view kept once");

    let db = runs.join("nmb.sqlite");
    let mut files = vec![db.clone()];
    files_under(&report_dir, &mut files);
    for value in identifying(&pydicom.join("CT_small.dcm")) {
        let hits = nmb_store::find_bytes_in_store(&db, value.as_bytes()).unwrap();
        assert!(hits.is_empty(), "{value:?} is in the store: {hits:?}");
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            let found = bytes.windows(value.len()).any(|w| w == value.as_bytes());
            assert!(!found, "{value:?} is in {}", file.display());
        }
        assert!(!logs.contains(&value), "{value:?} is in the output or logs");
    }
}

#[test]
fn a_changed_render_option_makes_a_new_render_and_a_bad_one_is_named() {
    let (Some(pydicom), Some(nibabel)) = (assets::pydicom_files(), assets::nibabel_files()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = volume_suite(tmp.path(), &pydicom, &nibabel);
    let runs = tmp.path().join("runs");
    let server = server(Config::default());
    let eval = |root: &Path| {
        nmb_command(&runs)
            .env("OPENAI_API_KEY", "k")
            .args(["eval", "--suite"])
            .arg(root)
            .args([
                "--model",
                &model_spec(Wire::OpenAi, &server),
                "--json",
                "-q",
                "--no-score",
            ])
            .output()
            .unwrap()
    };
    json_of(&eval(&root));
    assert_eq!(store(&runs).render_view_count().unwrap(), 4);
    let cases = root.join("cases.jsonl");
    let changed = std::fs::read_to_string(&cases)
        .unwrap()
        .replace("\"brain\"", "\"subdural\"");
    std::fs::write(&cases, changed).unwrap();
    json_of(&eval(&root));
    assert_eq!(
        store(&runs).render_view_count().unwrap(),
        5,
        "the montage was rendered again"
    );

    let bad = std::fs::read_to_string(&cases)
        .unwrap()
        .replace("\"subdural\"", "\"lung\"");
    std::fs::write(&cases, bad).unwrap();
    let out = nmb(&runs, &["suite", "validate", root.to_str().unwrap()]);
    let msg = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        msg.contains("cases.jsonl:1")
            && msg.contains("images[0].render")
            && msg.contains("bad window"),
        "{msg}"
    );
}

/// `nmb image info` describes every real file (even one whose pixels cannot be decoded), and `nmb image render`
/// writes its views or refuses with the transfer syntax UID.
#[test]
fn image_info_and_render_work_on_every_real_file() {
    let (Some(pydicom), Some(data), Some(nibabel)) = (
        assets::pydicom_files(),
        assets::pydicom_data_files(),
        assets::nibabel_files(),
    ) else {
        return;
    };
    let mut paths: Vec<PathBuf> = [
        "MR_small.dcm",
        "MR_small_implicit.dcm",
        "MR_small_bigendian.dcm",
        "MR_small_RLE.dcm",
        "MR_small_jpeg_ls_lossless.dcm",
        "MR_small_jp2klossless.dcm",
        "CT_small.dcm",
        "dicomdirtests/77654033/CT2",
    ]
    .iter()
    .map(|f| pydicom.join(f))
    .collect();
    paths.extend(
        [
            "emri_small.dcm",
            "emri_small_RLE.dcm",
            "emri_small_jpeg_ls_lossless.dcm",
            "emri_small_jpeg_2k_lossless.dcm",
        ]
        .iter()
        .map(|f| data.join(f)),
    );
    paths.extend(
        ["anatomical.nii", "example4d.nii.gz"]
            .iter()
            .map(|f| nibabel.join(f)),
    );
    if let Some(dir) = assets::mricron_templates() {
        for atlas in [
            "ch2.nii.gz",
            "ch2bet.nii.gz",
            "aal.nii.gz",
            "brodmann.nii.gz",
            "JHU-WhiteMatter-labels-1mm.nii.gz",
        ] {
            paths.push(dir.join(atlas));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    for (i, path) in paths.iter().enumerate() {
        let p = path.to_str().unwrap();
        let described = nmb(tmp.path(), &["image", "info", p, "--json"]);
        let info: serde_json::Value = serde_json::from_slice(&described.stdout)
            .unwrap_or_else(|e| panic!("{p}: {e}: {}", text(&described.stderr)));
        assert_eq!(
            described.status.success(),
            info["decodable"] == true,
            "{p}: exit 1 exactly when the pixels cannot be decoded"
        );
        assert!(
            info["meta"]["source_dims"][0].as_u64().unwrap() > 0,
            "{p}: {info}"
        );
        let out_dir = tmp.path().join(format!("views{i}"));
        let out = nmb(
            tmp.path(),
            &["image", "render", p, "--out", out_dir.to_str().unwrap()],
        );
        if info["decodable"] == true {
            assert!(out.status.success(), "{p}: {}", text(&out.stderr));
            let png = std::fs::read(out_dir.join("view-01.png")).unwrap();
            assert!(image::load_from_memory(&png).is_ok(), "{p}: a PNG");
        } else {
            assert!(!out.status.success());
            assert!(
                text(&out.stderr).contains("1.2.840.10008.1.2.4.80"),
                "{p}: {}",
                text(&out.stderr)
            );
        }
    }
}
