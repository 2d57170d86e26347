//! Two runs side by side on one case (`/compare?a=RUN&b=RUN&case=CASE`): each task of the case with both runs'
//! answers next to each other and their score rows. Only runs made on the same suite (the same suite hash) are
//! compared; any other pair is a 400 page saying why.

use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use nmb_store::{CasePage, RunInfo, SampleRecord, SampleScoreRow, Store};
use serde::Deserialize;

use crate::common::{
    case_href, nonempty, references, references_note, run_link, sample_href, verdict, PageError,
    References,
};
use crate::html::{escape, page};

/// Samples of each run shown for one case (a case holds a few tasks of a few samples each).
pub const COMPARE_LIMIT: u64 = 100;

/// The query of the compare page.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CompareQuery {
    pub a: Option<String>,
    pub b: Option<String>,
    pub case: Option<String>,
}

pub(crate) async fn handler(
    State(app): State<crate::App>,
    Query(q): Query<CompareQuery>,
) -> Response {
    crate::blocking(&app, move |s| {
        compare(s, &q).map(IntoResponse::into_response)
    })
    .await
}

/// The runs `run` can be compared with: the other model runs of its suite hash, newest first.
fn comparable(store: &Store, run: &RunInfo) -> Result<Vec<RunInfo>, PageError> {
    Ok(store
        .list_runs()?
        .into_iter()
        .filter(|r| {
            r.run_id != run.run_id
                && r.manifest.kind.is_model()
                && r.manifest.suite_hash == run.manifest.suite_hash
        })
        .collect())
}

/// The form that picks another run of the same suite (and, on a run's page, the case) to compare `run` with.
pub(crate) fn compare_form(
    body: &mut String,
    store: &Store,
    run: &RunInfo,
    case_id: Option<&str>,
) -> Result<(), PageError> {
    let others = comparable(store, run)?;
    body.push_str("<h2>Compare</h2>");
    if others.is_empty() {
        let _ = write!(
            body,
            "<p class=\"muted\" id=\"compare-none\">No other run of this suite (hash {}) in the store to compare \
             with.</p>",
            escape(&run.manifest.suite_hash)
        );
        return Ok(());
    }
    let _ = write!(
        body,
        "<form class=\"filters\" id=\"compare-form\" method=\"get\" action=\"/compare\">\
         <input type=\"hidden\" name=\"a\" value=\"{}\"><label>other run of this suite<select name=\"b\">",
        escape(&run.run_id)
    );
    for r in &others {
        let _ = write!(
            body,
            "<option value=\"{}\">{} · {}</option>",
            escape(&r.run_id),
            escape(&r.manifest.display_name()),
            escape(&r.run_id)
        );
    }
    body.push_str("</select></label>");
    match case_id {
        Some(c) => {
            let _ = write!(
                body,
                "<input type=\"hidden\" name=\"case\" value=\"{}\">",
                escape(c)
            );
        }
        None => body.push_str("<label>case<input name=\"case\" required></label>"),
    }
    body.push_str("<button type=\"submit\">compare</button></form>");
    Ok(())
}

/// `/compare?a=RUN&b=RUN&case=CASE`.
pub(crate) fn compare(store: &Store, query: &CompareQuery) -> Result<Html<String>, PageError> {
    let (Some(a), Some(b), Some(case_id)) = (
        nonempty(&query.a),
        nonempty(&query.b),
        nonempty(&query.case),
    ) else {
        return Err(PageError::BadRequest(
            "a comparison needs two runs and a case: /compare?a=RUN_ID&b=RUN_ID&case=CASE_ID"
                .into(),
        ));
    };
    let run_a = get_run(store, &a)?;
    let run_b = get_run(store, &b)?;
    let (ma, mb) = (&run_a.manifest, &run_b.manifest);
    if ma.suite_hash != mb.suite_hash {
        return Err(PageError::BadRequest(format!(
            "run {a} was made on suite {} (hash {}) and run {b} on suite {} (hash {}): only runs of the same \
             suite can be compared",
            ma.suite_id, ma.suite_hash, mb.suite_id, mb.suite_hash
        )));
    }
    let case_a = store.case_samples(&a, &case_id, 0, COMPARE_LIMIT)?;
    let case_b = store.case_samples(&b, &case_id, 0, COMPARE_LIMIT)?;
    if case_a.page.total == 0 && case_b.page.total == 0 {
        return Err(PageError::NotFound(format!(
            "neither run {a} nor run {b} has case {case_id}"
        )));
    }
    // The references are the suite's, so either run's report gives them; A's unless only B's can be read.
    let refs = match references(store, &a, &case_id)? {
        r @ References::Read { .. } => r,
        not_read => match references(store, &b, &case_id)? {
            r @ References::Read { .. } => r,
            _ => not_read,
        },
    };

    let mut body = format!(
        "<h1>Case {} <span class=\"muted\">two runs side by side</span></h1>",
        escape(&case_id)
    );
    runs_table(&mut body, &case_id, [(&run_a, &case_a), (&run_b, &case_b)]);
    if let Some(note) = references_note(&refs) {
        let _ = write!(body, "<p class=\"note\" id=\"reference-note\">{note}</p>");
    }
    let mut tasks: Vec<&str> = case_a
        .page
        .samples
        .iter()
        .chain(&case_b.page.samples)
        .map(|s| s.task_id.as_str())
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    for task in tasks {
        task_section(
            &mut body,
            task,
            &refs,
            [(&run_a, &case_a), (&run_b, &case_b)],
        );
    }
    Ok(page(&format!("Compare case {case_id}"), &body))
}

fn get_run(store: &Store, run_id: &str) -> Result<RunInfo, PageError> {
    store
        .get_run(run_id)?
        .ok_or_else(|| PageError::NotFound(format!("no run {run_id}")))
}

/// Which run is A and which B: name, model, link to the run and its case page, samples shown.
fn runs_table(body: &mut String, case_id: &str, runs: [(&RunInfo, &CasePage); 2]) {
    body.push_str(
        "<table id=\"compare-runs\"><tr><th></th><th>run</th><th>name</th><th>model</th><th>case</th>\
         <th>samples</th></tr>",
    );
    for ((run, found), side) in runs.iter().zip(["A", "B"]) {
        let shown = found.page.samples.len() as u64;
        let count = if shown < found.page.total {
            format!("first {shown} of {}", found.page.total)
        } else {
            found.page.total.to_string()
        };
        let _ = write!(
            body,
            "<tr><th>{side}</th><td>{}</td><td>{}</td><td>{}</td><td><a href=\"{}\">{}</a></td>\
             <td class=\"num\">{}</td></tr>",
            run_link(&run.run_id),
            escape(&run.manifest.display_name()),
            escape(&run.manifest.model),
            case_href(&run.run_id, case_id),
            escape(case_id),
            escape(&count),
        );
    }
    body.push_str("</table>");
}

/// One task: its reference, then each run's samples in a column of its own.
fn task_section(
    body: &mut String,
    task: &str,
    refs: &References,
    sides: [(&RunInfo, &CasePage); 2],
) {
    let _ = write!(
        body,
        "<section class=\"compare-task\"><h2>{}</h2>",
        escape(task)
    );
    if let References::Read { tasks, .. } = refs {
        if let Some(d) = tasks.get(task).and_then(|r| r.diagnosis.as_deref()) {
            let _ = write!(
                body,
                "<p>reference diagnosis: <strong class=\"reference\">{}</strong></p>",
                escape(d)
            );
        }
    }
    body.push_str("<div class=\"pair\">");
    for ((run, found), side) in sides.iter().zip(["A", "B"]) {
        let run_id = &run.run_id;
        let _ = write!(
            body,
            "<div class=\"side\" data-side=\"{side}\"><h3>{side} · {} <span class=\"muted\">{}</span></h3>",
            escape(&run.manifest.display_name()),
            escape(run_id)
        );
        let samples: Vec<&SampleRecord> = found
            .page
            .samples
            .iter()
            .filter(|s| s.task_id == task)
            .collect();
        if samples.is_empty() {
            body.push_str("<p class=\"muted\">No sample of this task in this run.</p>");
        }
        for s in samples {
            let row = found
                .page
                .scores
                .iter()
                .find(|r| r.task_id == s.task_id && r.sample_index == s.sample_index);
            answer_card(body, run_id, s, row);
        }
        body.push_str("</div>");
    }
    body.push_str("</div></section>");
}

fn answer_card(body: &mut String, run_id: &str, s: &SampleRecord, row: Option<&SampleScoreRow>) {
    let (class, word) = row.map_or(("muted", "not scored".to_string()), verdict);
    let mut details = Vec::new();
    if let Some(rank) = row.and_then(|r| r.matched_rank) {
        details.push(format!("matched rank {rank}"));
    }
    if let Some(c) = row.and_then(|r| r.error_category.as_deref()) {
        details.push(c.to_string());
    }
    if let Some(class) = &s.error_class {
        details.push(class.clone());
    }
    let _ = write!(
        body,
        "<div class=\"answer-card\"><p><a class=\"sample-link\" href=\"{}\">sample {}</a> · \
         <span class=\"{}\">{}</span> · <span class=\"{class}\">{}</span> <span class=\"muted\">{}</span></p>",
        sample_href(run_id, &s.task_id, s.sample_index),
        s.sample_index,
        s.status.as_str(),
        s.status.as_str(),
        escape(&word),
        escape(&details.join(" · ")),
    );
    match s.turns.last().and_then(|t| t.text.as_deref()) {
        Some(text) => {
            let _ = write!(body, "<pre class=\"answer\">{}</pre>", escape(text));
        }
        None => body.push_str("<p class=\"muted\">No answer.</p>"),
    }
    body.push_str("</div>");
}
