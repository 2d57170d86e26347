//! The suite content hash: SHA-256 over a canonical serialisation of every case, task, reference and image hash.
//!
//! It is stable across machines (no paths, no map iteration order, no timestamps) and changes when any case text,
//! image byte or answer changes.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::model::{Case, Image, Suite, Task};
use crate::SuiteError;

/// Computes the content hash, reading file-backed images that have not been hashed yet.
pub fn suite_hash(suite: &Suite) -> Result<String, SuiteError> {
    let mut h = Sha256::new();
    h.update(b"nmb-suite-hash-v1\n");
    h.update(canonical(&json!({"id": suite.id, "version": suite.version})).as_bytes());
    for case in &suite.cases {
        h.update(b"\n");
        h.update(canonical(&case_value(case)?).as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

/// Hash of what one task is asked from and scored by: its case's text and images (not the case's other tasks)
/// and the task itself, reference included. A few-shot run records it for each example it shows.
pub fn task_hash(case: &Case, task: &Task) -> Result<String, SuiteError> {
    let mut value = case_value(&Case {
        tasks: Vec::new(),
        ..case.clone()
    })?;
    value["tasks"] = Value::Array(vec![task_value(task)?]);
    Ok(hex::encode(Sha256::digest(canonical(&value).as_bytes())))
}

/// Hash of one image's bytes (cached value if the loader already computed it).
pub fn image_hash(image: &Image) -> Result<String, SuiteError> {
    if let Some(h) = &image.sha256 {
        return Ok(h.clone());
    }
    if image.render.is_some() {
        if let Some(path) = image.source.path() {
            return Ok(nmb_imaging::source_hash(path)?);
        }
    }
    let bytes = image.source.read()?;
    Ok(nmb_imaging::content_hash(&bytes))
}

fn images_value(images: &[Image]) -> Result<Value, SuiteError> {
    images
        .iter()
        .map(|i| {
            let mut value = json!({
                "id": i.id,
                "sha256": image_hash(i)?,
                "modality": i.modality.map(|m| m.as_str()),
                "sequence": i.sequence.map(|s| s.as_str()),
                "plane": i.plane.map(|p| p.as_str()),
                "caption": i.caption,
            });
            // Only volumes carry the key, so the hashes of suites without volumes stay as they were.
            if let Some(render) = &i.render {
                value["render"] = json!(render.key());
            }
            Ok(value)
        })
        .collect::<Result<Vec<_>, SuiteError>>()
        .map(Value::Array)
}

fn case_value(case: &Case) -> Result<Value, SuiteError> {
    let tasks = case
        .tasks
        .iter()
        .map(task_value)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "id": case.id,
        "language": case.language,
        "images": images_value(&case.images)?,
        "ehr": case.ehr,
        "notes": case.notes,
        "metadata": case.metadata,
        "tasks": tasks,
    }))
}

fn task_value(task: &Task) -> Result<Value, SuiteError> {
    let turns = task
        .turns
        .iter()
        .map(|t| {
            Ok(json!({"text": t.text, "question": t.question, "images": images_value(&t.images)?}))
        })
        .collect::<Result<Vec<_>, SuiteError>>()?;
    Ok(json!({
        "id": task.id,
        "family": task.family.as_str(),
        "level": task.level.as_str(),
        "question": task.question,
        "options": task.options,
        "turns": turns,
        "reference": task.reference,
        "metadata": task.metadata,
    }))
}

/// JSON with object keys sorted (serde_json's default map is a BTreeMap, so `to_string` is canonical).
fn canonical(v: &Value) -> String {
    serde_json::to_string(v).expect("serialising a serde_json::Value cannot fail")
}
