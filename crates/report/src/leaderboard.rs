//! The Neural-MedBench site's leaderboard (`js/data.js`), as the site's own script reads it.
//!
//! The site's `main.js` reads `modelData[version][dataset]`, with `version` a key such as `"1.0"` and `dataset` one
//! of `verified` (L1 Direct Diagnosis), `lite` (L2 Complex Diseases) and `multimodal` (L3 Multi-round Dialogue).
//! Each row has `id, name, resolved, pass5, bertscore, modelSize, version, logs, trajs, new, verified,
//! Accuracy_Pass5, date`; the site shows `Accuracy_Pass5` as the organisation and its search calls
//! `.toLowerCase()` on `name`, `Accuracy_Pass5` and `version`, so those are always strings.
//!
//! nmb's rows: `resolved` and `pass5` are percentages with one decimal from pass@k reading (a) (the unbiased
//! estimator) of the differential-diagnosis family at that level (all depth families of the level when it has no
//! differential tasks); `bertscore` is the level's mean raw BERTScore F1, or null; `name` is the run's display
//! name; `version` is nmb's version; `modelSize` is null unless given; `logs` and `trajs` are true (the store
//! and `report.json` hold every call and answer); `new` is true and `verified` false (the benchmark's authors did
//! not verify these numbers); `run_id` (which the site ignores) says where they came from. The site inserts `name`
//! and `Accuracy_Pass5` into the page as HTML, so `data.js` carries nmb's HTML-escaped; `leaderboard.json` carries
//! the same rows unescaped.
//!
//! Merging (`--leaderboard-merge FILE`) reads an existing `data.js` (JavaScript: unquoted keys, comments and
//! trailing commas are fine), replaces the rows whose `name` equals one of nmb's (keeping their `id`), appends the
//! others with new ids, and keeps every other row and version untouched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nmb_chat::{BackendKind, ModelSpec};
use nmb_results::{GroupAggregate, ScoreReport};
use nmb_suite::{Family, Level};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::input::RunData;
use crate::render::html::escape;

/// Every field the site's rows have.
pub const SITE_FIELDS: [&str; 13] = [
    "id",
    "name",
    "resolved",
    "pass5",
    "bertscore",
    "modelSize",
    "version",
    "logs",
    "trajs",
    "new",
    "verified",
    "Accuracy_Pass5",
    "date",
];

/// The site's version key nmb writes under unless told otherwise.
pub const DEFAULT_VERSION_KEY: &str = "1.0";

/// The site's datasets, in its order, with the level each holds.
pub const DATASETS: [(&str, Level); 3] = [
    ("verified", Level::Direct),
    ("lite", Level::Complex),
    ("multimodal", Level::MultiTurn),
];

/// How to export.
#[derive(Debug, Clone, Default)]
pub struct LeaderboardOptions {
    /// The `modelData` key (`--leaderboard-version`, default [`DEFAULT_VERSION_KEY`]).
    pub version_key: Option<String>,
    /// Organisation by model (`--org MODEL=NAME`); MODEL is a display name, a model spec or a model id.
    pub orgs: BTreeMap<String, String>,
    /// Model size in billions of parameters by model (`--model-size MODEL=N`).
    pub sizes: BTreeMap<String, f64>,
    /// An existing `data.js` to merge into (`--leaderboard-merge FILE`).
    pub merge: Option<PathBuf>,
}

impl LeaderboardOptions {
    pub fn version_key(&self) -> &str {
        self.version_key.as_deref().unwrap_or(DEFAULT_VERSION_KEY)
    }
}

/// One row, in the site's field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderboardEntry {
    pub id: u64,
    pub name: String,
    /// pass@1 in percent, reading (a).
    pub resolved: Option<f64>,
    /// pass@5 in percent, reading (a).
    pub pass5: Option<f64>,
    pub bertscore: Option<f64>,
    #[serde(rename = "modelSize")]
    pub model_size: Option<f64>,
    /// nmb's version.
    pub version: String,
    pub logs: bool,
    pub trajs: bool,
    pub new: bool,
    pub verified: bool,
    /// The organisation (the site's name for the column).
    #[serde(rename = "Accuracy_Pass5")]
    pub organisation: String,
    /// The run's creation date, `YYYY-MM-DD`.
    pub date: String,
    /// Not read by the site: where the numbers came from.
    pub run_id: String,
}

/// nmb's rows per dataset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Leaderboard {
    pub verified: Vec<LeaderboardEntry>,
    pub lite: Vec<LeaderboardEntry>,
    pub multimodal: Vec<LeaderboardEntry>,
}

impl Leaderboard {
    fn list(&self, dataset: &str) -> &[LeaderboardEntry] {
        match dataset {
            "verified" => &self.verified,
            "lite" => &self.lite,
            _ => &self.multimodal,
        }
    }

    fn list_mut(&mut self, level: Level) -> &mut Vec<LeaderboardEntry> {
        match level {
            Level::Direct => &mut self.verified,
            Level::Complex => &mut self.lite,
            Level::MultiTurn => &mut self.multimodal,
        }
    }
}

/// A `data.js` to merge into could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct MergeError {
    pub path: PathBuf,
    pub message: String,
}

/// nmb's rows for the scored runs, best pass@1 first, ids from 1.
pub fn leaderboard(runs: &[RunData], opts: &LeaderboardOptions) -> Leaderboard {
    let mut board = Leaderboard::default();
    for r in runs {
        let Some(s) = &r.scores else { continue };
        for (_, level) in DATASETS {
            if let Some(e) = entry(r, s, level, opts) {
                board.list_mut(level).push(e);
            }
        }
    }
    for (_, level) in DATASETS {
        let list = board.list_mut(level);
        list.sort_by(|a, b| {
            b.resolved
                .unwrap_or(-1.0)
                .total_cmp(&a.resolved.unwrap_or(-1.0))
        });
        for (i, e) in list.iter_mut().enumerate() {
            e.id = i as u64 + 1;
        }
    }
    board
}

fn entry(
    r: &RunData,
    s: &ScoreReport,
    level: Level,
    opts: &LeaderboardOptions,
) -> Option<LeaderboardEntry> {
    let cell = s
        .by_level_family
        .iter()
        .find(|g| g.level == Some(level) && g.family == Some(Family::Differential) && g.n > 0);
    let depth_level = s
        .by_level
        .iter()
        .find(|g| g.level == Some(level) && g.n > 0 && r.has_depth());
    let g: &GroupAggregate = cell.or(depth_level)?;
    let percent = |e: Option<&nmb_stats::Estimate>| e.map(|e| (e.value * 1000.0).round() / 10.0);
    let bert = depth_level
        .and_then(|l| l.bertscore.as_ref())
        .and_then(|b| b.f.as_ref())
        .map(|f| (f.value * 100.0).round() / 100.0);
    let keys = model_keys(r);
    Some(LeaderboardEntry {
        id: 0,
        name: r.name(),
        resolved: percent(g.pass_at_1.unbiased_estimator.as_ref()),
        pass5: percent(g.pass_at_5.unbiased_estimator.as_ref()),
        bertscore: bert,
        model_size: keys.iter().find_map(|k| opts.sizes.get(k).copied()),
        version: env!("CARGO_PKG_VERSION").to_string(),
        logs: true,
        trajs: true,
        new: true,
        verified: false,
        organisation: keys
            .iter()
            .find_map(|k| opts.orgs.get(k).cloned())
            .unwrap_or_else(|| vendor(&r.manifest.model)),
        date: nmb_store::format_utc_ms(r.info.created_ms)
            .chars()
            .take(10)
            .collect(),
        run_id: r.info.run_id.clone(),
    })
}

/// The names `--org` and `--model-size` may use for a run: display name, full spec, spec without URL, model id.
fn model_keys(r: &RunData) -> Vec<String> {
    let spec = r.manifest.model.clone();
    let no_url = r.model().to_string();
    let id = no_url
        .split_once(':')
        .map_or(no_url.clone(), |(_, m)| m.to_string());
    vec![r.name(), spec, no_url, id]
}

/// The organisation when `--org` names none: the API's vendor; for a model behind another server, the owner in
/// an `OWNER/NAME` model id, else the server's host; `local` for an in-process model.
pub fn vendor(spec: &str) -> String {
    let Ok(s) = ModelSpec::parse(spec) else {
        return "unknown".into();
    };
    if s.backend == BackendKind::Local {
        return "local".into();
    }
    if s.backend == BackendKind::Human {
        return "human".into();
    }
    if !s.has_custom_base_url() {
        return match s.backend {
            BackendKind::OpenAi => "OpenAI",
            BackendKind::Anthropic => "Anthropic",
            BackendKind::Gemini => "Google",
            BackendKind::Local => "local",
            BackendKind::Human => "human",
            // The runner's OpenRouter names are OWNER/NAME: the owner is the vendor.
            BackendKind::Imported => return imported_vendor(&s.model),
        }
        .into();
    }
    if let Some((owner, _)) = s.model.split_once('/') {
        return owner.to_string();
    }
    let url = s.effective_base_url().unwrap_or_default();
    let host = url.split("://").nth(1).unwrap_or(url);
    host.split(['/', ':']).next().unwrap_or(host).to_string()
}

/// The whole `modelData` object: `existing` (or nothing) with nmb's rows added or replaced under the version key.
pub fn model_data(
    board: &Leaderboard,
    opts: &LeaderboardOptions,
    existing: Option<Value>,
) -> Value {
    let mut data = match existing {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let version = data
        .entry(opts.version_key().to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !version.is_object() {
        *version = Value::Object(Map::new());
    }
    if let Value::Object(datasets) = version {
        for (dataset, _) in DATASETS {
            let list = datasets
                .entry(dataset.to_string())
                .or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(Vec::new());
            }
            if let Value::Array(rows) = list {
                merge_rows(rows, board.list(dataset));
            }
        }
    }
    Value::Object(data)
}

/// Replaces rows with the same name in place (keeping their id), appends the rest with fresh ids.
fn merge_rows(rows: &mut Vec<Value>, ours: &[LeaderboardEntry]) {
    let mut next_id = rows
        .iter()
        .filter_map(|r| r["id"].as_u64())
        .max()
        .unwrap_or(0)
        + 1;
    for e in ours {
        let mut row = serde_json::to_value(e).unwrap_or(Value::Null);
        match rows
            .iter_mut()
            .find(|r| r["name"].as_str() == Some(e.name.as_str()))
        {
            Some(old) => {
                row["id"] = old["id"].clone();
                *old = row;
            }
            None => {
                row["id"] = Value::from(next_id);
                next_id += 1;
                rows.push(row);
            }
        }
    }
}

/// `leaderboard.json`: the `modelData` object as JSON.
pub fn to_json(data: &Value) -> String {
    serde_json::to_string_pretty(data).unwrap_or_default()
}

/// `data.js`: `const modelData = {...};` with the strings the site inserts as HTML escaped.
pub fn to_data_js(data: &Value) -> String {
    let mut data = data.clone();
    escape_html_fields(&mut data);
    // JSON is valid JavaScript; `</` is escaped in case the file is ever inlined into a page.
    let body = serde_json::to_string_pretty(&data)
        .unwrap_or_default()
        .replace("</", "<\\/");
    format!(
        "// Neural-MedBench leaderboard (js/data.js), written by nmb {}.\n\
         // resolved = pass@1 %, pass5 = pass@5 % (reading (a): unbiased estimator over n samples per task);\n\
         // verified = L1 Direct Diagnosis, lite = L2 Complex Diseases, multimodal = L3 Multi-round Dialogue.\n\
         const modelData = {body};\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Escapes `name` and `Accuracy_Pass5` of nmb's rows (those with a `run_id`): the site writes them into the page
/// with `innerHTML`. Other rows are left as they were.
fn escape_html_fields(data: &mut Value) {
    map_nmb_fields(data, escape);
}

/// Applies `f` to `name` and `Accuracy_Pass5` of every row nmb wrote (those with a `run_id`).
fn map_nmb_fields(data: &mut Value, f: fn(&str) -> String) {
    let Value::Object(versions) = data else {
        return;
    };
    for datasets in versions.values_mut() {
        let Value::Object(datasets) = datasets else {
            continue;
        };
        for rows in datasets.values_mut() {
            let Value::Array(rows) = rows else { continue };
            for row in rows.iter_mut().filter(|r| r.get("run_id").is_some()) {
                for field in ["name", "Accuracy_Pass5"] {
                    if let Some(Value::String(s)) = row.get_mut(field) {
                        *s = f(s);
                    }
                }
            }
        }
    }
}

/// The inverse of [`escape`], for the rows a data.js written by nmb carries escaped.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Reads the `modelData` object of an existing `data.js`.
pub fn read_data_js(path: &Path) -> Result<Value, MergeError> {
    let err = |message: String| MergeError {
        path: path.to_path_buf(),
        message,
    };
    let text = nmb_suite::limits::read_to_string_io(path)
        .map_err(|e| err(format!("cannot read it: {e}")))?;
    let expected =
        "expected a site data.js: `const modelData = { \"1.0\": { verified: [...], ... } };`";
    let start = text
        .find("modelData")
        .and_then(|i| text[i..].find('{').map(|j| i + j))
        .ok_or_else(|| err(format!("no `modelData = {{` found; {expected}")))?;
    let end = text
        .rfind('}')
        .filter(|&e| e > start)
        .ok_or_else(|| err(format!("the modelData object never closes; {expected}")))?;
    // Blank out what surrounds the object (keeping line breaks), so the parser's positions are the file's.
    let blank = |s: &str| {
        s.chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect::<String>()
    };
    let masked = format!(
        "{}{}{}",
        blank(&text[..start]),
        &text[start..=end],
        blank(&text[end + 1..])
    );
    let value: Value = json5::from_str(&masked)
        .map_err(|e| err(format!("not a JavaScript object literal: {e}; {expected}")))?;
    if !value.is_object() {
        return Err(err(format!("modelData is not an object; {expected}")));
    }
    let mut value = value;
    map_nmb_fields(&mut value, unescape);
    Ok(value)
}

/// An imported model's vendor: the owner of an `OWNER/NAME` id, else `imported`.
fn imported_vendor(model: &str) -> String {
    model
        .split_once('/')
        .map_or_else(|| "imported".into(), |(owner, _)| owner.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendors() {
        assert_eq!(vendor("openai:gpt-4o"), "OpenAI");
        assert_eq!(vendor("anthropic:claude-sonnet-4-5"), "Anthropic");
        assert_eq!(vendor("gemini:gemini-2.5-pro"), "Google");
        assert_eq!(vendor("local:/m/SmolLM2.gguf"), "local");
        assert_eq!(vendor("human:dr.lee"), "human");
        assert_eq!(vendor("imported:openai/gpt-4o"), "openai");
        assert_eq!(vendor("imported:mymodel"), "imported");
        assert_eq!(
            vendor("openai:Qwen/Qwen2-VL-7B-Instruct@http://gpu1:8000/v1"),
            "Qwen"
        );
        assert_eq!(vendor("openai:smollm2@http://127.0.0.1:9/v1"), "127.0.0.1");
    }

    #[test]
    fn the_sites_own_data_js_reads() {
        let js = "// comment\nconst modelData = {\n    \"1.0\": {      // note\n        verified: [\n            { id: 1, name: \"A\", resolved: 20.0, pass5: 36.7, modelSize: 180, version: \"1.0.0\", logs: true, Accuracy_Pass5: \"X\", date: \"2025-08-02\" },\n        ],\n    },\n};\n";
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data.js");
        std::fs::write(&p, js).unwrap();
        let v = read_data_js(&p).unwrap();
        assert_eq!(v["1.0"]["verified"][0]["name"], "A");
        assert_eq!(v["1.0"]["verified"][0]["pass5"], 36.7);

        std::fs::write(
            &p,
            "const modelData = {\n  \"1.0\": { verified: [ { id: 1 name: 2 } ] }\n};",
        )
        .unwrap();
        let e = read_data_js(&p).unwrap_err().to_string();
        assert!(e.contains("data.js") && e.contains('2'), "{e}");
        std::fs::write(&p, "var x = 1;").unwrap();
        assert!(read_data_js(&p)
            .unwrap_err()
            .to_string()
            .contains("no `modelData = {`"));
    }

    #[test]
    fn escaping_round_trips() {
        for s in ["Smol <Q4>", "A & B \"quoted\" 'x'", "&lt; stays text"] {
            assert_eq!(unescape(&escape(s)), s);
        }
    }
}
