//! A corpus of hostile inputs, written on the fly: DICOM files and series, NIfTI volumes and raster images whose
//! headers lie (lengths, sizes, geometry), bombs that inflate past any budget, render options that ask for too
//! much, and series members that lead out of their directory. Each input lives in its own native suite, so the
//! same file is checked by `nmb suite validate`, `nmb image info` and `nmb image render`.
//!
//! DICOM and NIfTI bytes are built here by hand (a few dozen bytes of header each), so the corpus needs no
//! download and no Python.

use std::path::{Path, PathBuf};

mod dicom;
mod nifti;
mod raster;

/// One hostile input.
pub struct Hostile {
    pub name: &'static str,
    /// The suite directory: `suite.toml`, `cases.jsonl` naming the input, and the input itself.
    pub suite: PathBuf,
    /// The input's path relative to the suite (a file, or a series directory).
    pub entry: String,
    /// Render options as `(key, value)`: the suite's `render` object, and `nmb image render --KEY VALUE`.
    pub options: Vec<(&'static str, String)>,
    /// What every refusal of it says (the validation problem or the rendering error).
    pub expect: &'static str,
    /// True where only the render options are hostile: `nmb image info` ignores them and succeeds.
    pub info_ok: bool,
    /// True for PNG, JPEG and other raster images: checked by decoding, not rendering.
    pub raster: bool,
}

impl Hostile {
    pub fn path(&self) -> PathBuf {
        self.suite.join(&self.entry)
    }

    /// The `render` object of the suite file.
    pub fn render_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.options {
            let value = match v.parse::<u64>() {
                Ok(n) if *k == "max_side" => serde_json::json!(n),
                _ => serde_json::json!(v),
            };
            map.insert(k.to_string(), value);
        }
        serde_json::Value::Object(map)
    }

    /// `nmb image render` flags for the options.
    pub fn render_flags(&self) -> Vec<String> {
        self.options
            .iter()
            .flat_map(|(k, v)| [format!("--{}", k.replace('_', "-")), v.clone()])
            .collect()
    }
}

/// Writes the whole corpus under `dir`, one suite per input, and returns it.
pub fn write_corpus(dir: &Path) -> Vec<Hostile> {
    let mut corpus = Corpus {
        dir: dir.to_path_buf(),
        items: Vec::new(),
    };
    dicom::lengths(&mut corpus);
    dicom::geometry(&mut corpus);
    dicom::pixels(&mut corpus);
    dicom::escapes(&mut corpus);
    nifti::headers(&mut corpus);
    nifti::streams(&mut corpus);
    nifti::render_bounds(&mut corpus);
    raster::images(&mut corpus);
    for item in &corpus.items {
        write_suite(item);
    }
    corpus.items
}

struct Corpus {
    dir: PathBuf,
    items: Vec<Hostile>,
}

impl Corpus {
    /// A file input: `bytes` written as `file` in a suite of its own.
    fn file(&mut self, name: &'static str, file: &str, bytes: Vec<u8>, expect: &'static str) {
        let suite = self.suite_dir(name);
        std::fs::write(suite.join(file), bytes).unwrap();
        self.push(name, suite, file, expect, &[]);
    }

    /// A volume file rendered with hostile options (`info` reads it fine).
    fn with_options(
        &mut self,
        name: &'static str,
        file: &str,
        bytes: Vec<u8>,
        options: &[(&'static str, &str)],
        expect: &'static str,
    ) {
        self.file(name, file, bytes, expect);
        let item = self.items.last_mut().unwrap();
        item.options = options.iter().map(|(k, v)| (*k, v.to_string())).collect();
        item.info_ok = true;
    }

    fn raster(&mut self, name: &'static str, file: &str, bytes: Vec<u8>, expect: &'static str) {
        self.file(name, file, bytes, expect);
        self.items.last_mut().unwrap().raster = true;
    }

    fn suite_dir(&self, name: &str) -> PathBuf {
        let suite = self.dir.join(name);
        std::fs::create_dir_all(&suite).unwrap();
        suite
    }

    fn push(
        &mut self,
        name: &'static str,
        suite: PathBuf,
        entry: &str,
        expect: &'static str,
        options: &[(&'static str, &str)],
    ) {
        self.items.push(Hostile {
            name,
            suite,
            entry: entry.to_string(),
            options: options.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            expect,
            info_ok: false,
            raster: false,
        });
    }
}

fn write_suite(item: &Hostile) {
    std::fs::write(
        item.suite.join("suite.toml"),
        "id = \"hostile\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let mut image = serde_json::json!({"path": item.entry});
    if !item.raster {
        image["render"] = item.render_json();
    }
    let case = serde_json::json!({
        "case_id": "c1",
        "images": [image],
        "tasks": [{"id": "c1/dx", "family": "differential", "question": "What is the diagnosis?"}],
    });
    std::fs::write(item.suite.join("cases.jsonl"), format!("{case}\n")).unwrap();
}
