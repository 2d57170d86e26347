//! Hugging Face `datasets` folders: what `Dataset.save_to_disk` writes (`state.json` naming the Arrow IPC stream
//! files, `dataset_info.json` with the features, the `data-NNNNN-of-NNNNN.arrow` files) and what
//! `DatasetDict.save_to_disk` writes (`dataset_dict.json` listing the splits, one such folder per split). The
//! local Hub cache (`hf-cache:NAME[:CONFIG]`) is read through the same code: the cached dataset's Arrow files are
//! found under `HF_DATASETS_CACHE` (else `HF_HOME/datasets`, else `~/.cache/huggingface/datasets`), offline, as
//! `load_dataset` wrote them (`OWNER___NAME/CONFIG/VERSION/HASH/`). A dataset `load_dataset` never prepared but
//! the Hub cache holds (`huggingface-cli download`, `snapshot_download`: `HF_HUB_CACHE`, else `HF_HOME/hub`,
//! `datasets--OWNER--NAME/snapshots/REVISION/` with `refs/main`) is read from the snapshot's Parquet files.
//!
//! The rows go to the loader their columns are for: `PRESET:PATH` names it (`vqa-rad`, `slake`, `table`,
//! `pmc-vqa`, `omnimedvqa`, `pathvqa`); without one, VQA-RAD (`qid`, `image_name`) and SLAKE (`img_name`,
//! `q_lang`) are recognised by their columns and anything else is a `table` (with `--map`). An image column is
//! a struct `{bytes, path}` (the `Image` feature): its bytes are the image, else its path is.
//!
//! Every Arrow file is capped like any file nmb reads whole (`--max-file-mib`), and its messages' lengths are
//! checked against the bytes the file really holds before the Arrow reader sees them. A folder without
//! `state.json`, a file whose columns differ from the features, or image bytes that are no image are errors naming
//! the folder, file, row and column.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::DataType;
use serde_json::Value;

use super::rows::{Cell, Row};
use super::{paths, table, vqa_rad, LoadOptions, Loaded};
use crate::{Problem, SuiteError};

/// The presets `hf-disk:PRESET:PATH` accepts.
const PRESETS: &[&str] = &[
    "table",
    "vqa-rad",
    "slake",
    "pmc-vqa",
    "omnimedvqa",
    "pathvqa",
];

/// `hf-disk:[PRESET:]PATH`.
pub(super) fn load(rest: &str, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    let (preset, path) = split_preset(rest);
    let folder = dataset_folder(Path::new(path), opts.split.as_deref())?;
    let (dir, files) = data_files(&folder)?;
    load_files(preset, &dir, &files, opts)
}

/// `hf-cache:NAME[:CONFIG]`: the newest cached Arrow files of the dataset `NAME` (`owner/name`), offline.
pub(super) fn load_cache(rest: &str, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    let (preset, spec) = split_preset(rest);
    let (name, config) = match spec.split_once(':') {
        Some((n, c)) => (n, Some(c)),
        None => (spec, None),
    };
    let root = cache_root();
    let arrow_cached = root.join(name.replace('/', "___")).is_dir();
    if !arrow_cached {
        if let Some(snapshot) = hub_snapshot(name)? {
            return load_snapshot(preset, &snapshot, config, opts);
        }
    }
    let (dir, files) = cache_folder(&root, name, config, opts.split.as_deref())?;
    load_files(preset, &dir, &files, opts)
}

/// The Hub cache's folder (`HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`), where
/// `huggingface_hub` downloads repositories.
fn hub_root() -> PathBuf {
    if let Some(d) = std::env::var_os("HF_HUB_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(h) = std::env::var_os("HF_HOME") {
        return PathBuf::from(h).join("hub");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/huggingface/hub")
}

/// The snapshot `refs/main` names of the dataset repository `OWNER/NAME` in the Hub cache
/// (`datasets--OWNER--NAME/snapshots/REVISION/`, huggingface_hub's documented layout); `None` when the cache
/// has no such repository.
fn hub_snapshot(name: &str) -> Result<Option<PathBuf>, SuiteError> {
    let repo = hub_root().join(format!("datasets--{}", name.replace('/', "--")));
    if !repo.is_dir() {
        return Ok(None);
    }
    let main = repo.join("refs/main");
    let revision = std::fs::read_to_string(&main)
        .map_err(|source| SuiteError::Read {
            path: main.display().to_string(),
            source,
        })?
        .trim()
        .to_string();
    let valid = !revision.is_empty() && revision.chars().all(|c| c.is_ascii_alphanumeric());
    let snapshot = repo.join("snapshots").join(&revision);
    if !valid || !snapshot.is_dir() {
        return Err(fatal(
            &main,
            format!("names revision {revision:?}, which has no folder under snapshots/"),
        ));
    }
    Ok(Some(snapshot))
}

/// A dataset as the Hub stores it, read from its snapshot's Parquet files: those of the split (a file named
/// `SPLIT-…parquet` or `SPLIT.parquet`, or any Parquet file in a folder named `SPLIT`), under `CONFIG/` when a
/// configuration is named, in name order.
fn load_snapshot(
    preset: Option<&str>,
    snapshot: &Path,
    config: Option<&str>,
    opts: &LoadOptions,
) -> Result<Loaded, SuiteError> {
    let base = match config {
        Some(c) => snapshot.join(c),
        None => snapshot.to_path_buf(),
    };
    let split = opts.split.as_deref().unwrap_or("test");
    let mut files = Vec::new();
    parquet_files(&base, 0, &mut files);
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| {
            let stem = f
                .file_stem()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let parent = f
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy());
            stem == split
                || stem.starts_with(&format!("{split}-"))
                || parent.is_some_and(|p| p == split)
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(SuiteError::Spec(format!(
            "no Parquet file of split {split} under {} (choose the split with --split)",
            base.display()
        )));
    }
    let mut rows = Vec::new();
    for file in &files {
        rows.extend(table::parquet_rows(file)?);
    }
    rows_loaded(preset, &files[0], rows, Vec::new(), opts)
}

/// The Parquet files under `dir`, a few folders deep (a snapshot holds `data/` or `CONFIG/SPLIT/`).
fn parquet_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 {
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            parquet_files(&path, depth + 1, out);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
}

fn split_preset(rest: &str) -> (Option<&str>, &str) {
    match rest.split_once(':') {
        Some((p, path)) if PRESETS.contains(&p) => (Some(p), path),
        _ => (None, rest),
    }
}

/// The folder of one dataset: `path` itself, or the split of a `DatasetDict` folder (the only split, or `split`).
fn dataset_folder(path: &Path, split: Option<&str>) -> Result<PathBuf, SuiteError> {
    let dict = path.join("dataset_dict.json");
    if !dict.is_file() {
        if let Some(s) = split {
            if path.join(s).join("state.json").is_file() {
                return Ok(path.join(s));
            }
        }
        return Ok(path.to_path_buf());
    }
    let value: Value = super::json::read(&dict)?;
    let splits: Vec<String> = value["splits"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let chosen = match (split, splits.as_slice()) {
        (Some(s), _) if splits.iter().any(|x| x == s) => s.to_string(),
        (Some(s), _) => {
            return Err(fatal(
                &dict,
                format!("no split {s:?}; the splits are {}", splits.join(", ")),
            ))
        }
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(fatal(
                &dict,
                format!(
                    "a DatasetDict with the splits {}; choose one with --split",
                    splits.join(", ")
                ),
            ))
        }
    };
    // A split is a folder name inside the dataset's folder, never a path out of it.
    let plain =
        !chosen.is_empty() && !chosen.contains(['/', '\\']) && chosen != "." && chosen != "..";
    let dir = path.join(&chosen);
    if !plain || !dir.is_dir() {
        return Err(fatal(
            &dict,
            format!("split {chosen:?} is not a folder of the dataset"),
        ));
    }
    Ok(dir)
}

fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("HF_DATASETS_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(h) = std::env::var_os("HF_HOME") {
        return PathBuf::from(h).join("datasets");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/huggingface/datasets")
}

/// `ROOT/OWNER___NAME/CONFIG/VERSION/HASH/` holds `NAME-SPLIT.arrow` (or `-NNNNN-of-NNNNN.arrow` shards) and
/// `dataset_info.json`, as `datasets` caches a downloaded dataset.
fn cache_folder(
    root: &Path,
    name: &str,
    config: Option<&str>,
    split: Option<&str>,
) -> Result<(PathBuf, Vec<String>), SuiteError> {
    let dir = root.join(name.replace('/', "___"));
    let configs = subdirs(&dir);
    let config_dir = match (config, configs.as_slice()) {
        (Some(c), _) => dir.join(c),
        (None, [only]) => only.clone(),
        (None, []) => {
            return Err(SuiteError::Spec(format!(
                "dataset {name} is neither in the datasets cache at {} nor in the Hub cache at {} (set \
                 HF_DATASETS_CACHE, HF_HUB_CACHE or HF_HOME)",
                root.display(),
                hub_root().display()
            )))
        }
        (None, many) => {
            let names: Vec<String> = many
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect();
            return Err(SuiteError::Spec(format!(
                "dataset {name} has the configurations {} in the Hub cache; name one as hf-cache:{name}:CONFIG",
                names.join(", ")
            )));
        }
    };
    // The newest version and fingerprint folder holding dataset_info.json.
    let mut found: Vec<PathBuf> = subdirs(&config_dir)
        .iter()
        .flat_map(|v| subdirs(v))
        .filter(|d| d.join("dataset_info.json").is_file())
        .collect();
    found.sort_by_key(|d| std::fs::metadata(d).and_then(|m| m.modified()).ok());
    let Some(dir) = found.pop() else {
        return Err(SuiteError::Spec(format!(
            "no cached Arrow files of {name} under {}",
            config_dir.display()
        )));
    };
    let short = name.rsplit('/').next().unwrap_or(name);
    let split = split.unwrap_or("test");
    let prefix = format!("{short}-{split}");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|source| SuiteError::Read {
            path: dir.display().to_string(),
            source,
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&prefix) && f.ends_with(".arrow"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(SuiteError::Spec(format!(
            "no {prefix}*.arrow in {} (choose the split with --split)",
            dir.display()
        )));
    }
    Ok((dir, files))
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The data files a dataset folder's `state.json` names.
fn data_files(folder: &Path) -> Result<(PathBuf, Vec<String>), SuiteError> {
    let state = folder.join("state.json");
    if !state.is_file() {
        return Err(fatal(
            folder,
            "no state.json: not a folder written by Dataset.save_to_disk (a DatasetDict folder has \
             dataset_dict.json and one such folder per split)",
        ));
    }
    let value: Value = super::json::read(&state)?;
    let files: Vec<String> = value["_data_files"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["filename"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if files.is_empty() {
        return Err(fatal(
            &state,
            "expected _data_files, a list of {\"filename\": ...} naming the Arrow files",
        ));
    }
    Ok((folder.to_path_buf(), files))
}

/// The column names `dataset_info.json` declares.
fn features(dir: &Path) -> Result<Vec<String>, SuiteError> {
    let info = dir.join("dataset_info.json");
    if !info.is_file() {
        return Err(fatal(dir, "no dataset_info.json (the dataset's features)"));
    }
    let value: Value = super::json::read(&info)?;
    match value["features"].as_object() {
        Some(f) => Ok(f.keys().cloned().collect()),
        None => Err(fatal(&info, "expected features, an object of column types")),
    }
}

fn load_files(
    preset: Option<&str>,
    dir: &Path,
    files: &[String],
    opts: &LoadOptions,
) -> Result<Loaded, SuiteError> {
    let declared = features(dir)?;
    let root = paths::canonical_root(dir)?;
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let path = paths::resolve(&root, file).map_err(|msg| fatal(dir, msg))?;
        read_arrow(&path, &declared, &mut rows, &mut problems)?;
    }
    let name = dir.join(files.first().map(String::as_str).unwrap_or(""));
    rows_loaded(preset, &name, rows, problems, opts)
}

/// Rows handed to the loader their columns are for, `problems` found reading them first.
fn rows_loaded(
    preset: Option<&str>,
    name: &Path,
    rows: Vec<Row>,
    mut problems: Vec<Problem>,
    opts: &LoadOptions,
) -> Result<Loaded, SuiteError> {
    let preset = preset.unwrap_or_else(|| detect(&rows));
    let mut loaded = match preset {
        "vqa-rad" | "slake" => {
            let (values, images) = json_rows(&rows, image_key(preset), &mut problems);
            vqa_rad::load_rows(preset == "slake", name, values, images, opts.text_only)?
        }
        other => {
            let preset = match other {
                "pmc-vqa" => table::Preset::PmcVqa,
                "omnimedvqa" => table::Preset::OmniMedVqa,
                "pathvqa" => table::Preset::PathVqa,
                _ => table::Preset::Table,
            };
            table::load_rows(preset, name, rows, &opts.map, opts.text_only)?
        }
    };
    loaded.problems.splice(0..0, problems);
    Ok(loaded)
}

fn detect(rows: &[Row]) -> &'static str {
    let has = |k: &str| rows.first().is_some_and(|r| r.cells.contains_key(k));
    if has("qid") && has("image_name") {
        "vqa-rad"
    } else if has("img_name") && has("q_lang") {
        "slake"
    } else {
        "table"
    }
}

fn image_key(preset: &str) -> &'static str {
    if preset == "slake" {
        "img_name"
    } else {
        "image_name"
    }
}

/// Rows as JSON objects for the VQA-RAD and SLAKE loaders, and the embedded images by their image name. A
/// bytes cell that is no image format nmb knows is an error naming its row and column.
fn json_rows(
    rows: &[Row],
    key: &str,
    problems: &mut Vec<Problem>,
) -> (Vec<Value>, HashMap<String, Arc<[u8]>>) {
    let mut images = HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut obj = serde_json::Map::new();
        for (k, cell) in &row.cells {
            match cell {
                Cell::Text(t) => {
                    obj.insert(k.clone(), Value::String(t.clone()));
                }
                Cell::List(l) => {
                    obj.insert(k.clone(), Value::from(l.clone()));
                }
                Cell::Bytes(b) => {
                    let name = row.cells.get(key).and_then(Cell::text).unwrap_or("");
                    if nmb_imaging::sniff(b).is_none() {
                        let msg = format!(
                            "column {k:?} holds {} bytes that are no image nmb can read (PNG, JPEG, GIF, WebP, \
                             BMP, TIFF, DICOM)",
                            b.len()
                        );
                        problems.push(Problem::error(&row.at, msg).case(name).field(k.clone()));
                    } else if !name.is_empty() {
                        images.insert(name.to_string(), b.clone());
                    }
                }
                Cell::Null => {}
            }
        }
        out.push(Value::Object(obj));
    }
    (out, images)
}

/// The rows of one Arrow IPC stream file, after checking its framing and its columns against `declared`.
fn read_arrow(
    path: &Path,
    declared: &[String],
    rows: &mut Vec<Row>,
    problems: &mut Vec<Problem>,
) -> Result<(), SuiteError> {
    let bytes = crate::limits::read(path)?;
    check_framing(&bytes)
        .map_err(|msg| fatal(path, format!("not an Arrow IPC stream nmb can read: {msg}")))?;
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(|e| fatal(path, format!("not a readable Arrow IPC stream: {e}")))?;
    let schema = reader.schema();
    let mut names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    names.sort();
    let mut declared = declared.to_vec();
    declared.sort();
    if names != declared {
        return Err(fatal(
            path,
            format!(
                "its columns ({}) differ from the features dataset_info.json declares ({})",
                names.join(", "),
                declared.join(", ")
            ),
        ));
    }
    let file = path.display().to_string();
    for batch in reader {
        let batch =
            batch.map_err(|e| fatal(path, format!("not a readable Arrow record batch: {e}")))?;
        batch_rows(&file, &batch, rows, problems);
    }
    Ok(())
}

/// Walks the stream's messages (`0xFFFFFFFF`, metadata length, metadata, body) and checks that every declared
/// length fits in the bytes that follow, so no reader allocates from a length the file does not hold.
fn check_framing(bytes: &[u8]) -> Result<(), String> {
    let mut at = 0usize;
    while at < bytes.len() {
        let word = |i: usize| -> Result<u32, String> {
            bytes
                .get(i..i + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| format!("truncated at byte {i}"))
        };
        let mut len = word(at)?;
        at += 4;
        if len == 0xFFFF_FFFF {
            len = word(at)?;
            at += 4;
        }
        if len == 0 {
            return Ok(()); // end of stream
        }
        let meta_end = at
            .checked_add(len as usize)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| {
                format!("a message at byte {at} declares {len} bytes of metadata past the end")
            })?;
        let message = arrow_ipc::root_as_message(&bytes[at..meta_end])
            .map_err(|e| format!("a message at byte {at} is not valid: {e}"))?;
        let body = u64::try_from(message.bodyLength())
            .map_err(|_| "a negative body length".to_string())?;
        at = u64::try_from(meta_end)
            .ok()
            .and_then(|m| m.checked_add(body))
            .filter(|&e| e <= bytes.len() as u64)
            .ok_or_else(|| {
                format!("a message declares a {body}-byte body past the end of the file")
            })? as usize;
    }
    Ok(())
}

fn batch_rows(file: &str, batch: &RecordBatch, rows: &mut Vec<Row>, problems: &mut Vec<Problem>) {
    let schema = batch.schema();
    for i in 0..batch.num_rows() {
        let number = rows.len() + 1;
        let mut cells = BTreeMap::new();
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            match cell(column.as_ref(), i) {
                Ok(c) => {
                    cells.insert(field.name().clone(), c);
                }
                Err(msg) => problems.push(
                    Problem::error(format!("{file}: row {number}"), msg)
                        .field(field.name().clone()),
                ),
            }
        }
        rows.push(Row {
            at: format!("{file}: row {number}"),
            number,
            cells,
        });
    }
}

/// One Arrow value as a cell: strings and numbers as text, binary as bytes, an `Image` struct as its bytes (else
/// its path), a list of strings as a list.
fn cell(array: &dyn Array, i: usize) -> Result<Cell, String> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if array.is_null(i) {
        return Ok(Cell::Null);
    }
    Ok(match array.data_type() {
        DataType::Utf8 => Cell::Text(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Cell::Text(array.as_string::<i64>().value(i).to_string()),
        DataType::Binary => Cell::Bytes(Arc::from(array.as_binary::<i32>().value(i))),
        DataType::LargeBinary => Cell::Bytes(Arc::from(array.as_binary::<i64>().value(i))),
        DataType::Boolean => Cell::Text(array.as_boolean().value(i).to_string()),
        DataType::Int8 => Cell::Text(array.as_primitive::<Int8Type>().value(i).to_string()),
        DataType::Int16 => Cell::Text(array.as_primitive::<Int16Type>().value(i).to_string()),
        DataType::Int32 => Cell::Text(array.as_primitive::<Int32Type>().value(i).to_string()),
        DataType::Int64 => Cell::Text(array.as_primitive::<Int64Type>().value(i).to_string()),
        DataType::UInt8 => Cell::Text(array.as_primitive::<UInt8Type>().value(i).to_string()),
        DataType::UInt16 => Cell::Text(array.as_primitive::<UInt16Type>().value(i).to_string()),
        DataType::UInt32 => Cell::Text(array.as_primitive::<UInt32Type>().value(i).to_string()),
        DataType::UInt64 => Cell::Text(array.as_primitive::<UInt64Type>().value(i).to_string()),
        DataType::Float32 => Cell::Text(array.as_primitive::<Float32Type>().value(i).to_string()),
        DataType::Float64 => Cell::Text(array.as_primitive::<Float64Type>().value(i).to_string()),
        DataType::Struct(_) => image_struct(array.as_struct(), i)?,
        DataType::List(_) => {
            let list = array.as_list::<i32>().value(i);
            Cell::List(
                (0..list.len())
                    .filter_map(|j| match cell(list.as_ref(), j) {
                        Ok(Cell::Text(t)) => Some(t),
                        _ => None,
                    })
                    .collect(),
            )
        }
        other => return Err(format!("a {other} column, which nmb does not read")),
    })
}

/// Hugging Face's `Image` feature: `{bytes, path}`; the bytes win.
fn image_struct(s: &StructArray, i: usize) -> Result<Cell, String> {
    if let Some(b) = s.column_by_name("bytes") {
        if let Ok(c @ Cell::Bytes(_)) = cell(b.as_ref(), i) {
            return Ok(c);
        }
    }
    if let Some(p) = s.column_by_name("path") {
        if let Ok(c @ Cell::Text(_)) = cell(p.as_ref(), i) {
            return Ok(c);
        }
    }
    Err("a struct column that is not an image ({bytes, path})".into())
}

fn fatal(path: &Path, message: impl Into<String>) -> SuiteError {
    super::json::fatal(path, message)
}
