//! The JSONL that NeuroVLM-Bench's runner (`run_async.py`, also called by `run_async_splits.py`, of
//! ChatMED/neurovlm-bench at 6e87ba4) writes, read into one [`Replay`] per model it asked ([`read_file`]).
//!
//! Each line is one object: `input.image_path` (the dataset folder's prefix, then the manifest's `file_path`),
//! `input.model_requested`, `input.system_prompt_type`, `output.status` (`success` or `error`),
//! `output.parsed_response` (the object the runner cut from the answer's first `{` to its last `}`, or
//! `{"error", "raw_response"}` when that did not parse), `output.error`, `api_response` (`id`, `model`,
//! `prompt_tokens`, `completion_tokens`, `total_tokens`; null on an error line) and `processing.parameters`
//! (`temperature`, `seed`). A line is matched to the suite's case whose image path is the longest tail of
//! `image_path`. The file is checked whole: any line that is not JSON or lacks a field is a problem named with
//! `FILE:LINE` and the field, and then nothing is imported.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use nmb_chat::GenParams;
use nmb_requests::{ModelSpec, Usage};
use nmb_suite::Suite;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{read_text, ImportError};
use crate::stored::{Replay, StoredAnswer};

/// The format's name, as `nmb import --format` takes it and the model identity records it.
pub const FORMAT: &str = "neurovlm-run";

/// The key in an imported run's model identity that holds the SHA-256 of the prompt file the runner sent.
pub const PROMPT_KEY: &str = "prompt_sha256";

/// How many lines of one kind a warning lists before it only counts the rest.
const EXAMPLES: usize = 10;

/// One model's answers from the file.
#[derive(Debug, Clone)]
pub struct ImportedModel {
    /// `imported:MODEL`, MODEL as the runner's `model_requested`.
    pub spec: ModelSpec,
    /// `params` with what the runner recorded (temperature, seed; top_p and max_tokens when present).
    pub params: GenParams,
    pub replay: Replay,
    /// Lines that answered, lines the runner recorded as errors, and suite tasks the file has no line for.
    pub answered: usize,
    pub errored: usize,
    pub unanswered: usize,
}

impl ImportedModel {
    /// The answers with what the file says of the model, and with `prompt` (the prompt file the runner sent)
    /// the SHA-256 of its bytes ([`PROMPT_KEY`]), so another prompt is another run.
    pub fn replay_with_prompt(&self, prompt: Option<&Path>) -> std::io::Result<Replay> {
        let mut replay = self.replay.clone();
        if let Some(path) = prompt {
            let sha = file_sha256(path)?;
            replay.identity.insert(PROMPT_KEY.into(), sha.into());
        }
        Ok(replay)
    }
}

/// The SHA-256 of a file's bytes, lower-case hex (as `sha256sum` prints it); the file is streamed through the
/// hash, never read whole.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// What reading a file found.
#[derive(Debug, Default)]
pub struct RunFile {
    /// The file as named in problems and warnings.
    pub file: String,
    /// One per model, in the order the file first names them.
    pub models: Vec<ImportedModel>,
    /// `FILE:LINE: FIELD: what is wrong`; any one means nothing may be imported.
    pub problems: Vec<String>,
    /// Lines skipped: images the suite does not hold, errors superseded by an answer to the same image.
    pub warnings: Vec<String>,
}

/// One line, checked.
struct Line {
    number: usize,
    model: String,
    image_path: String,
    outcome: Result<String, String>,
    usage: Usage,
    latency: Duration,
    parameters: Option<Map<String, Value>>,
    prompt_type: Option<String>,
    served_model: Option<String>,
    raw: String,
}

impl RunFile {
    /// The models to import, or every problem found as one error (nothing may be imported then), or an error
    /// when no line matched a case of the suite.
    pub fn models(&self) -> Result<&[ImportedModel], ImportError> {
        if !self.problems.is_empty() {
            return Err(ImportError::Problems {
                file: self.file.clone(),
                problems: self.problems.clone(),
                kept: "imported",
            });
        }
        if self.models.is_empty() {
            let file = self.file.clone();
            return Err(ImportError::NoMatch { file });
        }
        Ok(&self.models)
    }
}

/// Reads the runner's JSONL at `path` against `suite` ([`read`]).
pub fn read_file(path: &Path, suite: &Suite, base: &GenParams) -> Result<RunFile, ImportError> {
    let (file, text) = read_text(path)?;
    Ok(read(&file, &text, suite, base))
}

/// Reads the runner's JSONL `text` (named `file` in messages) against `suite`; `base` holds the parameters a
/// field the runner did not record keeps.
pub fn read(file: &str, text: &str, suite: &Suite, base: &GenParams) -> RunFile {
    let mut out = RunFile {
        file: file.to_string(),
        ..RunFile::default()
    };
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        match line(file, i + 1, raw) {
            Ok(l) => lines.push(l),
            Err(p) => out.problems.push(p),
        }
    }
    let index = ImageIndex::new(suite);
    let mut unmatched = Vec::new();
    // model -> image path -> its lines, each model in the order the file first names it.
    let mut by_model: Vec<(String, BTreeMap<String, Vec<Line>>)> = Vec::new();
    for l in lines {
        let Some(path) = index.find(&l.image_path) else {
            unmatched.push(format!("{file}:{}: {}", l.number, l.image_path));
            continue;
        };
        let slot = match by_model.iter().position(|(m, _)| *m == l.model) {
            Some(i) => i,
            None => {
                by_model.push((l.model.clone(), BTreeMap::new()));
                by_model.len() - 1
            }
        };
        by_model[slot]
            .1
            .entry(path.to_string())
            .or_default()
            .push(l);
    }
    if !unmatched.is_empty() {
        out.warnings.push(listed(
            &format!(
                "{} line(s) name an image no case of the suite has (matched by the end of input.image_path); skipped",
                unmatched.len()
            ),
            &unmatched,
        ));
    }
    for (model, paths) in by_model {
        if let Some(m) = model_run(file, &model, paths, &index, base, &mut out) {
            out.models.push(m);
        }
    }
    out
}

/// `what`, then the first [`EXAMPLES`] of `items`, one per line, and how many more there are.
fn listed(what: &str, items: &[String]) -> String {
    let mut text = what.to_string();
    for item in items.iter().take(EXAMPLES) {
        text.push_str("\n  ");
        text.push_str(item);
    }
    if items.len() > EXAMPLES {
        text.push_str(&format!("\n  ... and {} more", items.len() - EXAMPLES));
    }
    text
}

/// One model's lines, assigned to its tasks: answers first, then the errors of images left without one.
fn model_run(
    file: &str,
    model: &str,
    paths: BTreeMap<String, Vec<Line>>,
    index: &ImageIndex,
    base: &GenParams,
    out: &mut RunFile,
) -> Option<ImportedModel> {
    let first = paths
        .values()
        .flatten()
        .map(|l| l.number)
        .min()
        .unwrap_or(0);
    let spec = match ModelSpec::parse(&format!("imported:{model}")) {
        Ok(s) => s,
        Err(e) => {
            out.problems.push(format!(
                "{file}:{first}: input.model_requested: {model:?} cannot name a model: {e}"
            ));
            return None;
        }
    };
    let all: Vec<&Line> = paths.values().flatten().collect();
    let parameters = parameters(file, model, &all, out);
    let identity = identity(&all, &parameters);
    let mut answers = Vec::new();
    let (mut answered, mut errored, mut superseded) = (0, 0, Vec::new());
    for (path, mut lines) in paths {
        let tasks = index.tasks(&path);
        // Answers before errors: an error the runner recorded for an image it answered in another line (a
        // rerun appended to the file) is superseded by the answer.
        lines.sort_by_key(|l| (l.outcome.is_err(), l.number));
        let successes = lines.iter().filter(|l| l.outcome.is_ok()).count();
        if successes > tasks.len() {
            let numbers: Vec<String> = lines
                .iter()
                .filter(|l| l.outcome.is_ok())
                .map(|l| l.number.to_string())
                .collect();
            out.problems.push(format!(
                "{file}:{}: input.image_path: {model} answered {path} on lines {}, but the suite has it {} time(s); \
                 expected one answer per case",
                lines[tasks.len()].number,
                numbers.join(", "),
                tasks.len()
            ));
            continue;
        }
        let mut rest = lines.into_iter();
        for task in tasks {
            let Some(l) = rest.next() else { break };
            match l.outcome.is_ok() {
                true => answered += 1,
                false => errored += 1,
            }
            answers.push(answer(task, l));
        }
        superseded.extend(rest.map(|l| format!("{file}:{}: {}", l.number, l.image_path)));
    }
    if !superseded.is_empty() {
        let what = format!(
            "{model}: {} error line(s) skipped: another line of the same image counts (an answer before an error)",
            superseded.len()
        );
        out.warnings.push(listed(&what, &superseded));
    }
    let unanswered = index.task_count() - answers.len();
    let params = gen_params(base, &parameters);
    Some(ImportedModel {
        spec,
        params,
        replay: Replay { answers, identity },
        answered,
        errored,
        unanswered,
    })
}

fn answer(task: &str, l: Line) -> StoredAnswer {
    StoredAnswer {
        task_id: task.to_string(),
        turn: 0,
        outcome: l.outcome,
        usage: l.usage,
        latency: l.latency,
        raw: l.raw,
    }
}

/// The one parameter set the model's answered lines record (its error lines' when none answered). The runner
/// writes its default `PARAMETERS` on error lines whatever it ran with, so those do not count against it. The
/// first answered line that records another set is a problem (one, not one per line of a second experiment).
fn parameters(file: &str, model: &str, lines: &[&Line], out: &mut RunFile) -> Map<String, Value> {
    let mut ordered = lines.to_vec();
    ordered.sort_by_key(|l| (l.outcome.is_err(), l.number));
    let Some(first) = ordered.first() else {
        return Map::new();
    };
    let found = first.parameters.clone().unwrap_or_default();
    let other = ordered
        .iter()
        .filter(|l| l.outcome.is_ok())
        .find(|l| l.parameters.clone().unwrap_or_default() != found);
    if let Some(l) = other {
        out.problems.push(format!(
            "{file}:{}: processing.parameters: {} differ from line {}'s {} for {model}; expected one experiment \
             per model in a file (import each experiment's file on its own)",
            l.number,
            Value::Object(l.parameters.clone().unwrap_or_default()),
            first.number,
            Value::Object(found.clone())
        ));
    }
    found
}

/// `base` with the parameters the runner recorded.
fn gen_params(base: &GenParams, recorded: &Map<String, Value>) -> GenParams {
    let mut params = base.clone();
    if let Some(t) = recorded.get("temperature").and_then(Value::as_f64) {
        params.temperature = t;
    }
    if let Some(p) = recorded.get("top_p").and_then(Value::as_f64) {
        params.top_p = p;
    }
    if let Some(m) = recorded.get("max_tokens").and_then(Value::as_u64) {
        params.max_tokens = u32::try_from(m).unwrap_or(u32::MAX);
    }
    params.seed = recorded.get("seed").and_then(Value::as_u64);
    params
}

/// What the file says of the model beyond its name: the format, the prompt's name, the parameters as recorded
/// and the models the API reports it served.
fn identity(lines: &[&Line], parameters: &Map<String, Value>) -> Map<String, Value> {
    let prompts: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.prompt_type.as_deref())
        .collect();
    let served: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.served_model.as_deref())
        .collect();
    let mut identity = Map::new();
    identity.insert("imported_format".into(), json!(FORMAT));
    identity.insert("system_prompt_type".into(), json!(prompts));
    identity.insert("parameters".into(), Value::Object(parameters.clone()));
    identity.insert("served_models".into(), json!(served));
    identity
}

/// One line checked: `FILE:LINE: FIELD: what is wrong` when it is not.
fn line(file: &str, number: usize, raw: &str) -> Result<Line, String> {
    let at = |field: &str, what: String| format!("{file}:{number}: {field}: {what}");
    let value: Value = serde_json::from_str(&python_json(raw)).map_err(|e| {
        let e = nmb_suite::limits::json_error(&e);
        format!(
            "{file}:{number}: not JSON ({e}); expected one object per line as run_async.py writes"
        )
    })?;
    let text = |field: &str| -> Result<String, String> {
        match lookup(&value, field) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(other) => Err(at(
                field,
                format!("{other} is not a text; expected a non-empty string"),
            )),
            None => Err(at(field, "missing; expected a string".into())),
        }
    };
    let image_path = text("input.image_path")?;
    let model = text("input.model_requested")?;
    let status = text("output.status")?;
    let outcome = match status.as_str() {
        "success" => match lookup(&value, "output.parsed_response") {
            Some(parsed) => Ok(answer_text(parsed)),
            None => {
                return Err(at(
                    "output.parsed_response",
                    "missing; expected the parsed answer".into(),
                ))
            }
        },
        "error" => match lookup(&value, "output.error") {
            Some(Value::String(e)) => Err(e.clone()),
            Some(Value::Null) => Err("no error message recorded".into()),
            Some(other) => Err(other.to_string()),
            None => {
                return Err(at(
                    "output.error",
                    "missing; expected the error the runner recorded".into(),
                ))
            }
        },
        other => {
            return Err(at(
                "output.status",
                format!("{other:?}; expected \"success\" or \"error\""),
            ))
        }
    };
    let usage = usage(&value).map_err(|(field, what)| at(&field, what))?;
    let latency = lookup(&value, "api_response.latency_ms")
        .and_then(Value::as_f64)
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map_or(Duration::ZERO, |ms| Duration::from_secs_f64(ms / 1000.0));
    let parameters = match lookup(&value, "processing.parameters") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            return Err(at(
                "processing.parameters",
                format!("{other} is not an object"),
            ))
        }
    };
    let string_at = |field: &str| {
        lookup(&value, field)
            .and_then(Value::as_str)
            .map(String::from)
    };
    let raw_body = json!({
        "imported_from": format!("{file}:{number}"),
        "experiment_id": lookup(&value, "experiment_id"),
        "timestamp": lookup(&value, "timestamp"),
        "api_response": lookup(&value, "api_response"),
    });
    Ok(Line {
        number,
        prompt_type: string_at("input.system_prompt_type"),
        served_model: string_at("api_response.model"),
        model,
        image_path,
        outcome,
        usage,
        latency,
        parameters,
        raw: raw_body.to_string(),
    })
}

/// The line with Python's non-finite numbers (`NaN`, `Infinity`, `-Infinity`, which `json.dumps` writes for a
/// model's NaN and which are not JSON) as strings of the same text, so the line reads and the answer keeps what
/// the model wrote; text inside strings is left as it is.
fn python_json(raw: &str) -> Cow<'_, str> {
    const TOKENS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];
    if !TOKENS.iter().any(|t| raw.contains(t)) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len() + 8);
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        let token = TOKENS.iter().find(|t| rest.starts_with(**t));
        match (in_string, token) {
            (false, Some(t)) => {
                out.push_str(&format!("\"{t}\""));
                rest = &rest[t.len()..];
                continue;
            }
            (true, _) if escaped => escaped = false,
            (true, _) if c == '\\' => escaped = true,
            (_, _) if c == '"' => in_string = !in_string,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The answer as nmb stores it: the model's own text where the runner could not parse it (it keeps that in
/// `raw_response`), else the parsed object written back as JSON.
fn answer_text(parsed: &Value) -> String {
    if let Value::Object(m) = parsed {
        let runner_failed = m.len() == 2 && m.contains_key("error");
        if let (true, Some(Value::String(raw))) = (runner_failed, m.get("raw_response")) {
            return raw.clone();
        }
    }
    parsed.to_string()
}

/// The tokens `api_response` reports (none on an error line, whose `api_response` is null).
fn usage(value: &Value) -> Result<Usage, (String, String)> {
    let count = |field: &str| -> Result<u64, (String, String)> {
        let path = format!("api_response.{field}");
        match lookup(value, &path) {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| {
                (
                    path,
                    format!("{v} is not a token count; expected a whole number >= 0"),
                )
            }),
        }
    };
    Ok(Usage {
        input_tokens: count("prompt_tokens")?,
        output_tokens: count("completion_tokens")?,
        ..Usage::default()
    })
}

/// The value at a dotted path of objects, `None` where a step is missing or not an object.
fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |v, key| v.as_object()?.get(key))
}

/// The suite's tasks by the path of their case's one image, to match the runner's image paths by their tail.
struct ImageIndex {
    by_path: HashMap<String, Vec<String>>,
    tasks: usize,
}

impl ImageIndex {
    fn new(suite: &Suite) -> ImageIndex {
        let mut by_path: HashMap<String, Vec<String>> = HashMap::new();
        let mut tasks = 0;
        for case in &suite.cases {
            tasks += case.tasks.len();
            let [image] = case.images.as_slice() else {
                continue;
            };
            let path = normal(&image.id);
            let ids = case.tasks.iter().map(|t| t.id.clone());
            by_path.entry(path).or_default().extend(ids);
        }
        ImageIndex { by_path, tasks }
    }

    /// The suite's path that is the longest tail of `image_path` (whole components), if any.
    fn find(&self, image_path: &str) -> Option<&str> {
        let path = normal(image_path);
        let mut tail = path.as_str();
        loop {
            if let Some((key, _)) = self.by_path.get_key_value(tail) {
                return Some(key);
            }
            tail = tail.split_once('/')?.1;
        }
    }

    fn tasks(&self, path: &str) -> &[String] {
        self.by_path.get(path).map_or(&[], Vec::as_slice)
    }

    fn task_count(&self) -> usize {
        self.tasks
    }
}

/// A path with `/` for every separator and no leading `./`.
fn normal(path: &str) -> String {
    let path = path.replace('\\', "/");
    path.trim_start_matches("./").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_matches_by_its_longest_tail() {
        let mut by_path = HashMap::new();
        by_path.insert(
            "images-17/a b/x.jpg".to_string(),
            vec!["row2/neurovlm".to_string()],
        );
        by_path.insert("x.jpg".to_string(), vec!["row3/neurovlm".to_string()]);
        let index = ImageIndex { by_path, tasks: 2 };
        assert_eq!(
            index.find("../../ivan/dataset/images-17/a b/x.jpg"),
            Some("images-17/a b/x.jpg")
        );
        assert_eq!(index.find("other/x.jpg"), Some("x.jpg"));
        // Whole components only: "bx.jpg" does not end in the component "x.jpg".
        assert_eq!(index.find("../bx.jpg"), None);
        assert_eq!(
            index.find("..\\..\\images-17\\a b\\x.jpg"),
            Some("images-17/a b/x.jpg")
        );
    }

    #[test]
    fn the_runners_parse_failure_keeps_the_models_own_text() {
        let failed =
            json!({"error": "JSON parsing failed: x", "raw_response": "I think it is a tumour."});
        assert_eq!(answer_text(&failed), "I think it is a tumour.");
        let parsed = json!({"diagnosis_name": "tumor", "error": null});
        assert_eq!(answer_text(&parsed), parsed.to_string());
    }

    #[test]
    fn pythons_non_finite_numbers_read_as_strings_outside_strings_only() {
        let raw = r#"{"a": NaN, "b": [-Infinity, Infinity], "c": "NaN \" Infinity", "d": 1}"#;
        let v: Value = serde_json::from_str(&python_json(raw)).unwrap();
        assert_eq!(
            v,
            json!({"a": "NaN", "b": ["-Infinity", "Infinity"], "c": "NaN \" Infinity", "d": 1})
        );
        assert!(matches!(python_json(r#"{"a": 1}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn a_line_without_a_field_names_it() {
        let e = line(
            "r.jsonl",
            3,
            r#"{"input": {"image_path": "a.png"}, "output": {"status": "success"}}"#,
        )
        .err()
        .unwrap();
        assert_eq!(
            e,
            "r.jsonl:3: input.model_requested: missing; expected a string"
        );
        let e = line("r.jsonl", 4, "{not json").err().unwrap();
        assert!(e.starts_with("r.jsonl:4: not JSON"), "{e}");
        let ok = r#"{"input": {"image_path": "a.png", "model_requested": "m"}, "output": {"status": "success"}}"#;
        let e = line("r.jsonl", 5, ok).err().unwrap();
        assert!(
            e.starts_with("r.jsonl:5: output.parsed_response: missing"),
            "{e}"
        );
    }
}
