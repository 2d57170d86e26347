//! The run manifest: what a run was made with, typed, and stored as canonical JSON in `runs.manifest`.
//!
//! Model runs (`nmb eval`) and judge runs (one per scored run and judge, written by `nmb-score`) share it. The
//! fields each kind leaves out are skipped when serialising, so a manifest reads and writes back to the same
//! bytes that stores made before it was typed (a stored manifest enters configuration and scoring hashes).
//! Every field has a default, so any JSON object reads; keys this version does not know survive in `extra`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// What a run is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// An evaluation of a model on a suite (the manifest has no `kind` key).
    #[default]
    Model,
    /// The calls one judge made while scoring another run (`scored_run_id`).
    Judge,
}

impl RunKind {
    pub fn is_model(&self) -> bool {
        *self == RunKind::Model
    }
}

/// What evidence the model was shown (`--inputs`), as the manifest records it. The planner's own enum lives in
/// `nmb-plan`, which this crate may not depend on; `nmb-run` converts between them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputMode {
    /// EHR, notes and images.
    #[default]
    Full,
    /// No images.
    Text,
    /// Images and the question only.
    Images,
}

impl InputMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InputMode::Full => "full",
            InputMode::Text => "text",
            InputMode::Images => "images",
        }
    }
}

impl std::fmt::Display for InputMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the suite was named on the command line, so that scoring can load the same suite again. Not part of the
/// configuration hash: the suite hash is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SuiteSource {
    /// `sample`, a path, or `FORMAT:PATH`, with the path made absolute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite_spec: Option<String>,
    /// The answer key file (`--answers`), absolute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers_path: Option<String>,
    /// `--filter FIELD=VALUE` as typed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<String>>,
    /// `--level`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `--map FIELD=COLUMN` as typed (row-per-image manifests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map: Option<Vec<String>>,
    /// `--images-root`, absolute (NeuroVLM-Bench manifests whose image paths are under another folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images_root: Option<String>,
    /// `--split` (Hugging Face `datasets` folders and cached datasets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
}

/// One family's prompt template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateRef {
    pub hash: String,
    pub id: String,
    pub version: String,
}

/// A field that model runs always write, `null` included, and other runs leave out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Recorded<T> {
    #[default]
    Absent,
    Present(Option<T>),
}

impl<T> Recorded<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Recorded::Absent)
    }

    /// The value, when one was recorded.
    pub fn get(&self) -> Option<&T> {
        match self {
            Recorded::Present(Some(v)) => Some(v),
            _ => None,
        }
    }
}

impl<T: Serialize> Serialize for Recorded<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Recorded::Present(Some(v)) => v.serialize(s),
            _ => s.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Recorded<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(d).map(Recorded::Present)
    }
}

/// The manifest recorded with a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    pub nmb_version: String,
    #[serde(skip_serializing_if = "RunKind::is_model")]
    pub kind: RunKind,
    /// For a judge run: the run it scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scored_run_id: Option<String>,
    pub suite_id: String,
    pub suite_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite_version: Option<String>,
    /// `site`, `native`, `vqa-rad`, `mcq`, `sample`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite_format: Option<String>,
    #[serde(flatten)]
    pub suite_source: SuiteSource,
    /// `--limit`: only the first N tasks.
    #[serde(skip_serializing_if = "Recorded::is_absent")]
    pub limit: Recorded<u64>,
    /// `per-family` for model runs (see `templates`), `judge` for judge runs.
    pub template_id: String,
    pub template_hash: String,
    /// By family: the template each family's tasks were rendered with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<BTreeMap<String, TemplateRef>>,
    /// `BACKEND:MODEL[@BASE_URL]`.
    pub model: String,
    /// What identifies the model beyond its spec (a local model's content hash, chat template hash, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_identity: Option<Map<String, Value>>,
    /// The name reports show for the run (`--name`); see [`Manifest::display_name`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The study (`nmb eval --config`) the run belongs to; like the name, not part of the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<String>,
    pub params: Value,
    pub input_mode: InputMode,
    /// The answer language the templates asked for (`null`: the suite's default).
    #[serde(skip_serializing_if = "Recorded::is_absent")]
    pub answer_language: Recorded<String>,
    pub samples: u32,
    /// Inputs the model could not take and that were left out, e.g. "images (text-only local model)".
    pub dropped_inputs: Vec<String>,
    /// Why the run asks each sample in a request of its own although the API has `n`: the server rejected
    /// `n > 1` (with its message), or `--no-n`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_unsupported: Option<String>,
    /// Request parameters the model refuses, which the run stopped sending or sent under another name, by what
    /// changed (`max_completion_tokens`, `no_temperature`, `no_top_p`), each with why: the server's refusal in its
    /// words, the model's family (OpenAI's reasoning models), or `--reasoning-model`. The recorded parameters
    /// stay those asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_adjusted: Option<BTreeMap<String, String>>,
    /// How answers in JSON (differential, lesion, structured) were constrained to their schema on this backend
    /// (`response_format json_schema`, `responseJsonSchema`, `forced tool call`), or `none` where only the prompt
    /// asks for it; absent when no task answers in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained_output: Option<String>,
    /// A context probe (`nmb eval --probe`): its kind, seed and the wrong diagnosis suggested to each probed
    /// task (the `nmb_plan::Probe` as JSON). Part of the configuration hash when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Value>,
    /// Written by earlier versions: the `nmb eval` arguments that made the run. Kept so that such manifests read
    /// and write back unchanged; workers use `eval_config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_args: Option<Vec<String>>,
    /// The evaluation's typed configuration (`nmb_run::EvalConfig`, versioned), from which `nmb worker` runs the
    /// same evaluation (suite and file paths absolute). Not part of the configuration hash, which covers only
    /// what can change an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_config: Option<Value>,
    /// Fields this version does not know (written by a newer nmb, or by a caller's own manifest).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Manifest {
    /// For a judge run, the run it scored.
    pub fn judged_run(&self) -> Option<&str> {
        match self.kind {
            RunKind::Judge => self.scored_run_id.as_deref(),
            RunKind::Model => None,
        }
    }

    /// The model spec without its base URL (`openai:gpt-4o@http://...` -> `openai:gpt-4o`).
    pub fn model_without_url(&self) -> &str {
        self.model.split('@').next().unwrap_or(&self.model)
    }

    /// The name reports show: `--name` when given, else a local model's file stem, else the model id.
    pub fn display_name(&self) -> String {
        if let Some(name) = self
            .display_name
            .as_deref()
            .filter(|n| !n.trim().is_empty())
        {
            return name.to_string();
        }
        default_display_name(&self.model)
    }
}

/// The name a run gets without `--name`: the file stem of a `local:` model (no directories, no `.gguf`), else
/// the model id without backend prefix and base URL.
pub fn default_display_name(spec: &str) -> String {
    let spec = spec.split('@').next().unwrap_or(spec);
    let (backend, model) = spec.split_once(':').unwrap_or(("", spec));
    if backend != "local" {
        return model.to_string();
    }
    let file = model.rsplit(['/', '\\']).next().unwrap_or(model);
    file.strip_suffix(".gguf").unwrap_or(file).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::canonical_json;

    /// A model run's manifest as `nmb eval` wrote it before the manifest was typed.
    fn model_run_json() -> Value {
        serde_json::json!({
            "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": "ab12", "template_id": "per-family",
            "template_hash": "cd34", "model": "local:/x/SmolLM2-135M-Instruct.Q4_1.gguf",
            "params": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 192, "seed": 7},
            "input_mode": "full", "samples": 1, "dropped_inputs": ["images (text-only model: image parts are not sent)"],
            "suite_spec": "sample", "filters": [], "suite_version": "1", "suite_format": "sample", "limit": null,
            "templates": {"differential": {"id": "depth-v1", "version": "1", "hash": "ef56"}},
            "answer_language": null, "model_identity": {"local_model_id": "sha256:00", "context_length": 8192}
        })
    }

    /// A judge run's manifest as `nmb-score` wrote it.
    fn judge_run_json() -> Value {
        serde_json::json!({
            "kind": "judge", "scored_run_id": "r20260101-000000-ab12", "nmb_version": "0.1.0",
            "suite_id": "sample", "suite_hash": "ab12", "template_id": "judge", "template_hash": "",
            "model": "openai:judge-a@http://127.0.0.1:9/v1", "params": {"temperature": 0.0}, "input_mode": "text",
            "samples": 1, "dropped_inputs": ["images (judges read text only)"], "model_identity": {}
        })
    }

    #[test]
    fn older_manifests_read_and_write_back_to_the_same_bytes() {
        for old in [model_run_json(), judge_run_json()] {
            let typed: Manifest = serde_json::from_value(old.clone()).unwrap();
            assert!(
                typed.extra.is_empty(),
                "every key is typed: {:?}",
                typed.extra
            );
            let again = serde_json::to_value(&typed).unwrap();
            assert_eq!(canonical_json(&again), canonical_json(&old));
        }
    }

    #[test]
    fn typed_fields_say_what_string_keys_said() {
        let m: Manifest = serde_json::from_value(model_run_json()).unwrap();
        assert_eq!(m.kind, RunKind::Model);
        assert_eq!(m.judged_run(), None);
        assert_eq!(m.suite_source.suite_spec.as_deref(), Some("sample"));
        assert_eq!(m.limit, Recorded::Present(None));
        assert_eq!(m.templates.unwrap()["differential"].id, "depth-v1");
        let j: Manifest = serde_json::from_value(judge_run_json()).unwrap();
        assert_eq!(j.judged_run(), Some("r20260101-000000-ab12"));
        assert!(j.limit.is_absent() && j.templates.is_none());
    }

    #[test]
    fn unknown_keys_survive_and_any_object_reads() {
        let mut v = judge_run_json();
        v["future_field"] = serde_json::json!({"x": 1});
        let m: Manifest = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(m.extra["future_field"]["x"], 1);
        assert_eq!(
            canonical_json(&serde_json::to_value(&m).unwrap()),
            canonical_json(&v)
        );
        let empty: Manifest = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Manifest::default());
    }

    #[test]
    fn display_names() {
        let mut m: Manifest = serde_json::from_value(model_run_json()).unwrap();
        assert_eq!(m.display_name(), "SmolLM2-135M-Instruct.Q4_1");
        m.display_name = Some("SmolLM2 (Q4_1)".into());
        assert_eq!(m.display_name(), "SmolLM2 (Q4_1)");
        assert_eq!(
            default_display_name("openai:gpt-4o@http://127.0.0.1:8000/v1"),
            "gpt-4o"
        );
        assert_eq!(
            default_display_name("openai:Qwen/Qwen2-VL-7B"),
            "Qwen/Qwen2-VL-7B"
        );
        assert_eq!(default_display_name("local:C:\\models\\m.gguf"), "m");
    }
}
