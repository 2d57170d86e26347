//! The case page (`/runs/{id}/cases/{case}`): one patient of a run, drawn from what the store holds. The store
//! keeps no suite, so the case is read back from its prompts as sent (the images by hash, the EHR fields, notes
//! and questions as the template rendered them) and from the run's latest score report (levels, families,
//! disease group, and the reference answers when the report is small enough to read for one page).

use std::fmt::Write as _;

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use nmb_chat::{Role, StoredConversation, StoredPart};
use nmb_store::{CaseLookup, CasePage, Store};
use serde::Deserialize;

use crate::common::{
    case_path, references, references_note, run_link, sample_href, verdict, PageError, References,
    TaskReference,
};
use crate::html::{escape, page, url_encode};
use crate::pages::{render_prompt, sample_table};

/// Samples per page of a case.
pub const CASE_PAGE_SIZE: u64 = 100;
/// The heading under which the built-in templates list a case's EHR fields, one `key: value` per line.
const EHR_HEADING: &str = "Electronic health record:";
/// The heading before a case's clinical notes in the built-in templates.
const NOTES_HEADING: &str = "Clinical notes:";

/// The query of a case's page.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CaseQuery {
    /// 1-based page of the case's samples.
    pub page: Option<u64>,
}

pub(crate) async fn handler(
    State(app): State<crate::App>,
    Path((id, case_id)): Path<(String, String)>,
    Query(q): Query<CaseQuery>,
) -> Response {
    crate::blocking(&app, move |s| {
        case(s, &id, &case_id, &q).map(IntoResponse::into_response)
    })
    .await
}

/// `/runs/{id}/cases/{case}`: the case's images at full size, EHR fields and notes, references, samples (each
/// answer's thinking collapsed above it), and each task's prompt as sent.
pub(crate) fn case(
    store: &Store,
    run_id: &str,
    case_id: &str,
    query: &CaseQuery,
) -> Result<Html<String>, PageError> {
    let Some(run) = store.get_run(run_id)? else {
        return Err(PageError::NotFound(format!("no run {run_id}")));
    };
    let page_no = query.page.unwrap_or(1).max(1);
    let first = (page_no - 1).saturating_mul(CASE_PAGE_SIZE);
    let found = store.case_samples(run_id, case_id, first, CASE_PAGE_SIZE)?;
    if found.page.total == 0 {
        return Err(PageError::NotFound(format!(
            "run {run_id} has no case {case_id}"
        )));
    }
    let refs = references(store, run_id, case_id)?;
    let prompts = Prompts::read(store, &found)?;

    let mut body = format!(
        "<p>{} · <a href=\"/runs/{}\">{}</a></p><h1>Case {} <span class=\"muted\">{}</span></h1>",
        run_link(run_id),
        escape(&url_encode(run_id)),
        escape(&run.manifest.display_name()),
        escape(case_id),
        escape(&run.manifest.display_name()),
    );
    facts(&mut body, &run, case_id, &found, &refs);
    tasks_table(&mut body, run_id, &found, &refs, &prompts);
    images(&mut body, &prompts);
    case_text(&mut body, &prompts);

    let _ = write!(
        body,
        "<h2>Samples</h2><p class=\"muted\" id=\"count\">{} samples</p>",
        found.page.total
    );
    sample_table(&mut body, run_id, &found.page, false, true);
    pager(&mut body, run_id, case_id, page_no, found.page.total);

    body.push_str("<h2>Prompts as sent</h2><p class=\"muted\">Each task's first turn; later turns are on the sample pages.</p>");
    for (task, hash) in &prompts.first_turns {
        let _ = write!(body, "<h3>{}</h3>", escape(task));
        render_prompt(&mut body, hash, prompts.json(hash), false);
    }
    crate::compare::compare_form(&mut body, store, &run, Some(case_id))?;
    Ok(page(&format!("Case {case_id}"), &body))
}

/// The case's prompts on this page: each distinct body once, in the order the samples' turns use them.
struct Prompts {
    /// (prompt hash, stored JSON) in first-use order.
    bodies: Vec<(String, Option<String>)>,
    /// Each task's first-turn prompt: (task id, prompt hash).
    first_turns: Vec<(String, String)>,
}

impl Prompts {
    fn read(store: &Store, found: &CasePage) -> Result<Prompts, PageError> {
        let mut bodies: Vec<(String, Option<String>)> = Vec::new();
        let mut first_turns: Vec<(String, String)> = Vec::new();
        for s in &found.page.samples {
            for t in &s.turns {
                let hash = &t.call.prompt_hash;
                if t.turn_index == 0 && !first_turns.iter().any(|(task, _)| *task == s.task_id) {
                    first_turns.push((s.task_id.clone(), hash.clone()));
                }
                if !bodies.iter().any(|(h, _)| h == hash) {
                    bodies.push((hash.clone(), store.prompt_body(hash)?));
                }
            }
        }
        Ok(Prompts {
            bodies,
            first_turns,
        })
    }

    fn json(&self, hash: &str) -> Option<&str> {
        self.bodies
            .iter()
            .find(|(h, _)| h == hash)
            .and_then(|(_, j)| j.as_deref())
    }

    /// The text of the first user message of a prompt, its text parts joined.
    fn user_text(&self, hash: &str) -> Option<String> {
        let conv = StoredConversation::parse(self.json(hash)?).ok()?;
        let message = conv.messages.iter().find(|m| m.role == Role::User)?;
        let texts: Vec<&str> = message
            .parts
            .iter()
            .filter_map(|p| match p {
                StoredPart::Text { text } => Some(text.as_str()),
                StoredPart::Image { .. } => None,
            })
            .collect();
        Some(texts.join("\n"))
    }

    /// Every image the prompts show, once each, in the order they first appear: (hash, MIME type).
    fn images(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (_, json) in &self.bodies {
            let Some(conv) = json
                .as_deref()
                .and_then(|j| StoredConversation::parse(j).ok())
            else {
                continue;
            };
            for part in conv.messages.iter().flat_map(|m| &m.parts) {
                if let StoredPart::Image { image, mime } = part {
                    if !out.iter().any(|(h, _)| h == image) {
                        out.push((image.clone(), mime.clone()));
                    }
                }
            }
        }
        out
    }
}

fn facts(
    body: &mut String,
    run: &nmb_store::RunInfo,
    case_id: &str,
    found: &CasePage,
    refs: &References,
) {
    let rows = &found.page.scores;
    let group = rows.iter().find_map(|r| r.disease_group.clone());
    let mut facts: Vec<(String, String)> = vec![
        ("model".into(), run.manifest.model.clone()),
        (
            "suite".into(),
            format!("{} ({})", run.manifest.suite_id, run.manifest.suite_hash),
        ),
        ("samples".into(), found.page.total.to_string()),
        (
            "disease group".into(),
            group.unwrap_or_else(|| "—".to_string()),
        ),
    ];
    if let References::Read { metadata, .. } = refs {
        // The score rows' disease group is the case's `disease_group` metadata: shown once.
        let metadata = metadata
            .iter()
            .filter(|(k, _)| k.as_str() != "disease_group");
        facts.extend(metadata.map(|(k, v)| (k.clone(), v.clone())));
    }
    body.push_str("<dl id=\"case\">");
    for (k, v) in &facts {
        let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    }
    body.push_str("</dl>");
    if found.found_by == CaseLookup::TaskPrefix {
        let _ = write!(
            body,
            "<p class=\"note\" id=\"lookup\">This run has no score rows for this case (it is not scored, or its \
             latest score report does not cover the case), so its tasks were found by their id prefix <code>{}/</code>; a task named otherwise is not listed.</p>",
            escape(case_id)
        );
    }
    if let Some(note) = references_note(refs) {
        let _ = write!(body, "<p class=\"note\" id=\"reference-note\">{note}</p>");
    }
}

/// One row per task: family, level, the question as the prompt put it, the reference, and its samples.
fn tasks_table(
    body: &mut String,
    run_id: &str,
    found: &CasePage,
    refs: &References,
    prompts: &Prompts,
) {
    body.push_str(
        "<h2>Tasks</h2><table id=\"case-tasks\"><tr><th>task</th><th>family</th><th>level</th>\
         <th>question</th><th>reference diagnosis</th><th>reference lesion</th><th>samples</th></tr>",
    );
    let mut tasks: Vec<&str> = found
        .page
        .samples
        .iter()
        .map(|s| s.task_id.as_str())
        .collect();
    tasks.dedup();
    for task in tasks {
        task_row(body, run_id, found, task, refs, prompts);
    }
    body.push_str("</table>");
}

fn task_row(
    body: &mut String,
    run_id: &str,
    found: &CasePage,
    task: &str,
    refs: &References,
    prompts: &Prompts,
) {
    let first = found.page.scores.iter().find(|r| r.task_id == task);
    let question = prompts
        .first_turns
        .iter()
        .find(|(t, _)| t == task)
        .and_then(|(_, h)| prompts.user_text(h))
        .and_then(|text| question_of(&text))
        .unwrap_or_else(|| "—".to_string());
    let reference = match refs {
        References::Read { tasks, .. } => tasks.get(task).cloned().unwrap_or_default(),
        _ => TaskReference::default(),
    };
    let lesion = match (&reference.lesion_type, &reference.lesion_location) {
        (Some(t), Some(l)) => format!("{t}, {l}"),
        (Some(x), None) | (None, Some(x)) => x.clone(),
        (None, None) => String::new(),
    };
    let _ = write!(
        body,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}{}<td>{}</td></tr>",
        escape(task),
        escape(first.map_or("—", |r| r.family.as_str())),
        escape(first.map_or("—", |r| r.level.as_str())),
        escape(&question),
        reference_cell(reference.diagnosis.as_deref().unwrap_or("")),
        reference_cell(&lesion),
        sample_links(run_id, found, task),
    );
}

/// A task's samples as links, each coloured by its verdict.
fn sample_links(run_id: &str, found: &CasePage, task: &str) -> String {
    let links: Vec<String> = found
        .page
        .samples
        .iter()
        .filter(|s| s.task_id == task)
        .map(|s| {
            let row = found
                .page
                .scores
                .iter()
                .find(|r| r.task_id == task && r.sample_index == s.sample_index);
            let (class, word) = row.map_or(("muted", s.status.as_str().to_string()), verdict);
            format!(
                "<a class=\"sample-link {class}\" href=\"{}\" title=\"{}\">{}</a>",
                sample_href(run_id, &s.task_id, s.sample_index),
                escape(&word),
                s.sample_index
            )
        })
        .collect();
    links.join(" ")
}

/// A reference in a table cell (escaped), or a muted dash without one.
fn reference_cell(text: &str) -> String {
    if text.is_empty() {
        "<td class=\"muted\">—</td>".to_string()
    } else {
        format!("<td class=\"reference\">{}</td>", escape(text))
    }
}

/// The question of a prompt's text: what follows its first `Question:` line.
fn question_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Question:"))
        .map(|q| q.trim().to_string())
        .filter(|q| !q.is_empty())
}

fn images(body: &mut String, prompts: &Prompts) {
    let images = prompts.images();
    body.push_str("<h2>Images</h2>");
    if images.is_empty() {
        body.push_str("<p class=\"muted\">The prompts of this case show no image.</p>");
        return;
    }
    body.push_str("<div id=\"case-images\">");
    for (k, (hash, mime)) in images.iter().enumerate() {
        let _ = write!(
            body,
            "<figure><a href=\"/images/{0}\"><img class=\"full\" src=\"/images/{0}\" alt=\"{1}\"></a>\
             <figcaption>image {2} · {3} · <span class=\"muted\">{4}</span></figcaption></figure>",
            escape(&url_encode(hash)),
            escape(&format!("image {} of the case", k + 1)),
            k + 1,
            escape(mime),
            escape(hash.get(..12).unwrap_or(hash)),
        );
    }
    body.push_str("</div>");
}

/// The EHR fields and clinical notes, as the first prompt that labels them rendered them.
fn case_text(body: &mut String, prompts: &Prompts) {
    let parsed = prompts
        .first_turns
        .iter()
        .filter_map(|(_, h)| prompts.user_text(h))
        .map(|t| parse_case_text(&t))
        .find(|c| !c.ehr.is_empty() || c.notes.is_some())
        .unwrap_or_default();
    body.push_str("<h2>EHR fields</h2>");
    if parsed.ehr.is_empty() {
        let _ = write!(
            body,
            "<p class=\"muted\" id=\"no-ehr\">No EHR fields under the heading <code>{}</code> in this case's \
             prompts: the case has none, or its template labels them otherwise (see the prompts below).</p>",
            escape(EHR_HEADING)
        );
    } else {
        body.push_str("<dl id=\"ehr\">");
        for (k, v) in &parsed.ehr {
            let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
        }
        body.push_str("</dl>");
    }
    body.push_str("<h2>Clinical notes</h2>");
    match &parsed.notes {
        Some(notes) => {
            let _ = write!(body, "<pre id=\"notes\">{}</pre>", escape(notes));
        }
        None => {
            let _ = write!(
                body,
                "<p class=\"muted\" id=\"no-notes\">No clinical notes under the heading <code>{}</code> in this \
                 case's prompts.</p>",
                escape(NOTES_HEADING)
            );
        }
    }
}

/// A case's EHR fields and notes read back from a prompt's text.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct CaseText {
    pub ehr: Vec<(String, String)>,
    pub notes: Option<String>,
}

/// Reads the sections the built-in templates write: `Electronic health record:` then `key: value` lines up to
/// a blank line, and `Clinical notes:` then text up to the images or the question.
pub(crate) fn parse_case_text(text: &str) -> CaseText {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = CaseText::default();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        i += 1;
        if line == EHR_HEADING {
            while let Some(l) = lines.get(i).filter(|l| !l.trim().is_empty()) {
                let (k, v) = l.split_once(':').unwrap_or((l, ""));
                out.ehr.push((k.trim().to_string(), v.trim().to_string()));
                i += 1;
            }
        } else if line == NOTES_HEADING && out.notes.is_none() {
            let start = i;
            while lines.get(i).is_some_and(|l| !ends_notes(l)) {
                i += 1;
            }
            let notes = lines[start..i].join("\n").trim().to_string();
            out.notes = (!notes.is_empty()).then_some(notes);
        }
    }
    out
}

/// A line that starts the section after the notes in the built-in templates.
fn ends_notes(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("Images (") || l.starts_with("Question:") || l == EHR_HEADING
}

fn pager(body: &mut String, run_id: &str, case_id: &str, page_no: u64, total: u64) {
    let pages = total.div_ceil(CASE_PAGE_SIZE).max(1);
    if pages == 1 {
        return;
    }
    let href = |p: u64| escape(&format!("{}?page={p}", case_path(run_id, case_id)));
    body.push_str("<nav class=\"pager\">");
    if page_no > 1 {
        let _ = write!(
            body,
            "<a rel=\"prev\" href=\"{}\">← previous</a>",
            href(page_no - 1)
        );
    }
    let _ = write!(body, "<span>page {page_no} of {pages}</span>");
    if page_no < pages {
        let _ = write!(
            body,
            "<a rel=\"next\" href=\"{}\">next →</a>",
            href(page_no + 1)
        );
    }
    body.push_str("</nav>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_sections_are_read_back() {
        let text = "Electronic health record:\nAge: 64\nSex: female\nHistory: AF: on warfarin\n\n\
                    Clinical notes:\nSudden weakness.\n\nAphasia since 09:00.\n\nImages (2):\n\nImage 1\n\n\
                    Question: What is the diagnosis?\n";
        let c = parse_case_text(text);
        assert_eq!(
            c.ehr,
            [
                ("Age".to_string(), "64".to_string()),
                ("Sex".to_string(), "female".to_string()),
                ("History".to_string(), "AF: on warfarin".to_string())
            ]
        );
        assert_eq!(
            c.notes.as_deref(),
            Some("Sudden weakness.\n\nAphasia since 09:00.")
        );
        assert_eq!(question_of(text).as_deref(), Some("What is the diagnosis?"));
        assert_eq!(parse_case_text("Question: x"), CaseText::default());
    }
}
