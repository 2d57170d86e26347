//! Hugging Face `datasets` folders (`hf-disk:`): folders written by PyPI `datasets` itself (save_to_disk, offline)
//! from the shared VQA-RAD and SLAKE files load with the same tasks as the JSON loaders (counts and ids equal,
//! VQA-RAD's images from the Arrow data), and so does SLAKE from the Hub cache (`hf-cache:`); a DatasetDict needs --split where it has several splits; a folder
//! without state.json, an Arrow file whose columns differ from the features, a truncated Arrow file and image
//! bytes that are no image are clear errors naming what is wrong.

use std::path::{Path, PathBuf};

use nmb_suite::{load, LoadOptions, Loaded};

/// The shared data folder and the datasets written from it, or `None` (skipped locally) without them.
fn datasets() -> Option<(PathBuf, tempfile::TempDir)> {
    let python = nmb_test_support::assets::tools_python("datasets")?;
    let data = nmb_test_support::assets::shared_dir()?.join("data");
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/make_datasets.py");
    let made = std::process::Command::new(python)
        .arg(script)
        .arg(&data)
        .arg(out.path())
        .env("HF_HOME", out.path().join("hf-home"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    Some((data, out))
}

fn opts(text_only: bool, split: Option<&str>) -> LoadOptions {
    LoadOptions {
        text_only,
        split: split.map(String::from),
        ..LoadOptions::default()
    }
}

fn task_ids(loaded: &Loaded) -> Vec<String> {
    let mut ids: Vec<String> = loaded
        .suite
        .cases
        .iter()
        .flat_map(|c| c.tasks.iter().map(|t| t.id.clone()))
        .collect();
    ids.sort();
    ids
}

fn errors(loaded: &Loaded) -> Vec<String> {
    loaded
        .problems
        .iter()
        .filter(|p| p.is_error())
        .map(|p| p.to_string())
        .collect()
}

fn error_of(spec: &str, opts: &LoadOptions) -> String {
    match load(spec, opts) {
        Ok(l) => errors(&l).join("\n"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn datasets_folders_load_the_same_tasks_as_the_json_files() {
    let Some((data, out)) = datasets() else {
        return;
    };
    let json = load(
        &format!("vqa-rad:{}", data.join("vqa-rad/trainset.json").display()),
        &opts(false, None),
    )
    .unwrap();
    let disk = load(
        &format!("hf-disk:{}", out.path().join("vqa-rad").display()),
        &opts(false, None),
    )
    .unwrap();
    assert!(errors(&disk).is_empty(), "{:?}", errors(&disk));
    assert!(!task_ids(&json).is_empty());
    assert_eq!(task_ids(&disk), task_ids(&json));
    assert_eq!(disk.suite.cases.len(), json.suite.cases.len());
    for case in &disk.suite.cases {
        assert_eq!(
            case.images.len(),
            1,
            "{}: its image from the Arrow data",
            case.id
        );
        let bytes = case.images[0].source.read().unwrap();
        assert!(nmb_imaging::sniff(&bytes).is_some(), "{}", case.id);
    }

    let slake_json = load(
        &format!("slake:{}", data.join("slake/test.json").display()),
        &opts(true, None),
    )
    .unwrap();
    let slake = out.path().join("slake");
    let slake_disk = load(
        &format!("hf-disk:slake:{}", slake.display()),
        &opts(true, Some("test")),
    )
    .unwrap();
    assert!(!task_ids(&slake_json).is_empty());
    assert_eq!(task_ids(&slake_disk), task_ids(&slake_json));

    // The Hub cache: HF_DATASETS_CACHE names it (the loader reads the environment, as `datasets` does).
    std::env::set_var("HF_DATASETS_CACHE", out.path().join("hf-cache"));
    let cached = load("hf-cache:slake:json", &opts(true, Some("test"))).unwrap();
    assert_eq!(task_ids(&cached), task_ids(&slake_json));

    let no_split = error_of(&format!("hf-disk:{}", slake.display()), &opts(true, None));
    assert!(
        no_split.contains("train, test") && no_split.contains("--split"),
        "{no_split}"
    );
}

#[test]
fn bad_folders_get_clear_errors() {
    let Some((_data, out)) = datasets() else {
        return;
    };
    let o = opts(false, None);

    let bad = out.path().join("bad-image");
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("no image nmb can read") && err.contains("image") && err.contains("row 1"),
        "{err}"
    );

    let info = bad.join("dataset_info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["features"]["extra"] = serde_json::json!({"dtype": "string", "_type": "Value"});
    std::fs::write(&info, doc.to_string()).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("differ from the features") && err.contains("extra"),
        "{err}"
    );
    std::fs::write(&info, text).unwrap();

    let arrow = bad.join("data-00000-of-00001.arrow");
    let bytes = std::fs::read(&arrow).unwrap();
    std::fs::write(&arrow, &bytes[..bytes.len() / 2]).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("data-00000-of-00001.arrow") && err.contains("Arrow"),
        "{err}"
    );

    std::fs::remove_file(bad.join("state.json")).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(err.contains("no state.json"), "{err}");
}
