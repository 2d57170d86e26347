//! A perturbed run's sample beside its original: the images the model was sent under a perturbation
//! (`nmb eval --perturb`), each next to the image it was made from.
//!
//! The originals are what the unperturbed run of the same sweep sent for the same task and sample: the run of the
//! same suite and model whose display name is this one's without the ` [PERTURBATION]` label and whose manifest
//! names no perturbation (the newest, if several). Pixel perturbations keep the images' order, so row `i` pairs
//! the `i`-th image of each prompt; under `mismatch` and `drop:SEQUENCE` the rows show what was sent in place of
//! the case's own images, in order.

use std::fmt::Write as _;

use nmb_chat::{StoredConversation, StoredPart};
use nmb_store::{RunInfo, Store};

use crate::common::{run_link, PageError};
use crate::html::{escape, url_encode};

/// The manifest field naming a run's perturbation (`nmb_run`'s `manifest::PERTURBATION`).
const PERTURBATION: &str = "perturbation";

fn perturbation(run: &RunInfo) -> Option<&str> {
    run.manifest
        .extra
        .get(PERTURBATION)
        .and_then(|v| v.as_str())
}

/// The unperturbed run `run` was swept beside, if the store holds it.
fn original_run(store: &Store, run: &RunInfo, label: &str) -> Result<Option<RunInfo>, PageError> {
    let name = run.manifest.display_name();
    let Some(base) = name.strip_suffix(&format!(" [{label}]")) else {
        return Ok(None);
    };
    Ok(store
        .list_runs()?
        .into_iter()
        .filter(|r| {
            r.run_id != run.run_id
                && perturbation(r).is_none()
                && r.manifest.suite_hash == run.manifest.suite_hash
                && r.manifest.model == run.manifest.model
                && r.manifest.display_name() == base
        })
        .max_by_key(|r| r.created_ms))
}

/// The images of the last prompt a sample was sent, in order.
fn images(
    store: &Store,
    run_id: &str,
    task_id: &str,
    sample: u32,
) -> Result<Vec<String>, PageError> {
    let Some(record) = store.sample_record(run_id, task_id, sample)? else {
        return Ok(Vec::new());
    };
    let Some(turn) = record.turns.last() else {
        return Ok(Vec::new());
    };
    let Some(json) = store.prompt_body(&turn.call.prompt_hash)? else {
        return Ok(Vec::new());
    };
    let Ok(conv) = StoredConversation::parse(&json) else {
        return Ok(Vec::new());
    };
    Ok(conv
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            StoredPart::Image { image, .. } => Some(image.clone()),
            StoredPart::Text { .. } => None,
        })
        .collect())
}

fn img(body: &mut String, class: &str, label: &str, sha256: Option<&String>) {
    match sha256 {
        Some(h) => {
            let _ = write!(
                body,
                "<td><img class=\"{class}\" src=\"/images/{}\" alt=\"{}\"><br><span class=\"muted\">{}</span></td>",
                escape(&url_encode(h)),
                escape(&format!("{label} {h}")),
                escape(label)
            );
        }
        None => body.push_str("<td class=\"muted\">—</td>"),
    }
}

/// The block of a sample page of a perturbed run: each perturbed image beside its original. Nothing for an
/// unperturbed run.
pub(crate) fn block(
    body: &mut String,
    store: &Store,
    run: &RunInfo,
    task_id: &str,
    sample: u32,
) -> Result<(), PageError> {
    let Some(label) = perturbation(run) else {
        return Ok(());
    };
    let _ = write!(
        body,
        "<h2>Perturbed images</h2><section id=\"perturbed\"><p>Perturbation <strong>{}</strong>.",
        escape(label)
    );
    let Some(original) = original_run(store, run, label)? else {
        body.push_str(
            " The unperturbed run of this sweep is not in this store, so the originals cannot be shown.</p></section>",
        );
        return Ok(());
    };
    let _ = write!(
        body,
        " Originals from the unperturbed run {} ({}).</p>",
        run_link(&original.run_id),
        escape(&original.manifest.display_name())
    );
    let sent = images(store, &run.run_id, task_id, sample)?;
    let before = images(store, &original.run_id, task_id, sample)?;
    if before.is_empty() {
        body.push_str(
            "<p class=\"muted\">The unperturbed run has not sent this sample yet.</p></section>",
        );
        return Ok(());
    }
    let _ = write!(
        body,
        "<table id=\"perturbed-images\"><tr><th>original</th><th>{}</th></tr>",
        escape(label)
    );
    for i in 0..sent.len().max(before.len()) {
        body.push_str("<tr>");
        img(body, "original", "original", before.get(i));
        img(body, "perturbed", label, sent.get(i));
        body.push_str("</tr>");
    }
    body.push_str("</table></section>");
    Ok(())
}
