//! What the viewer's pages share: the page error, the score report's headline and samples as the pages read
//! them, a case's references, the paths between pages and how a score row reads. It imports no page module, so
//! the pages (run, sample, case, compare, repeats) depend on it and never on each other in a circle.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nmb_results::{GroupAggregate, SampleScore};
use nmb_store::{SampleScoreRow, Store, StoreError};
use serde::Deserialize;

use crate::html::{escape, url_encode};

pub(crate) mod review;

/// The largest score report a page reads whole for its reference answers (2 MiB, about 2,000 samples). A larger
/// one is not read: a run of 100,000 samples has a report of about 100 MB.
pub const REPORT_READ_LIMIT: u64 = 2 * 1024 * 1024;

/// Why a page cannot be shown.
#[derive(Debug)]
pub(crate) enum PageError {
    NotFound(String),
    BadRequest(String),
    Store(StoreError),
    Internal,
}

impl From<StoreError> for PageError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::UnknownRun { run_id, .. } => {
                PageError::NotFound(format!("no run {run_id}"))
            }
            e => PageError::Store(e),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            PageError::Store(e) => {
                // The details (paths, the query that failed) go to the log, not to the browser.
                tracing::error!("nmb serve: {e}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the run store could not be read; the server's log says why".to_string(),
                )
            }
            PageError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be made".to_string(),
            ),
        };
        let title = format!(
            "{} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        (status, crate::html::error_page(&title, &text)).into_response()
    }
}

/// What a score report's headline needs. The store keeps these members of each report apart from it, so the
/// report itself (every sample's scoring, tens of megabytes for a large run) is never read.
#[derive(Deserialize)]
pub(crate) struct Headline {
    pub(crate) overall: GroupAggregate,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(crate) by_level_family: Vec<GroupAggregate>,
    /// The report's stability section and its judges, when they were asked more than once; the repeats page reads
    /// them apart, so that a layout this version cannot read hides only them.
    #[serde(default)]
    pub(crate) stability: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) judges: Option<serde_json::Value>,
}

/// A missing or null list as an empty one.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<GroupAggregate>, D::Error> {
    Ok(Option::<Vec<GroupAggregate>>::deserialize(d)?.unwrap_or_default())
}

pub(crate) fn headline(store: &Store, run_id: &str) -> Result<Option<Headline>, PageError> {
    Ok(store
        .latest_score_headline(run_id)?
        .and_then(|json| serde_json::from_str(&json).ok()))
}

/// A task's reference answer, as the score report recorded it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct TaskReference {
    pub diagnosis: Option<String>,
    pub lesion_type: Option<String>,
    pub lesion_location: Option<String>,
}

/// What the latest score report says about a case's references, or why it was not read.
pub(crate) enum References {
    NotScored,
    TooLarge(u64),
    Unreadable(String),
    Read {
        tasks: BTreeMap<String, TaskReference>,
        /// The case's metadata (source, organ, …), verbatim.
        metadata: BTreeMap<String, String>,
    },
}

/// The samples of the run's latest score report, or why they were not read.
pub(crate) enum ReportSamples {
    NotScored,
    TooLarge(u64),
    Unreadable(String),
    Read(Vec<SampleScore>),
}

/// The samples of the latest score report, read only when the report is at most [`REPORT_READ_LIMIT`] bytes:
/// the report keeps them inside one JSON document, which cannot be read in part.
pub(crate) fn report_samples(store: &Store, run_id: &str) -> Result<ReportSamples, PageError> {
    let Some(bytes) = store.latest_score_report_bytes(run_id)? else {
        return Ok(ReportSamples::NotScored);
    };
    if bytes > REPORT_READ_LIMIT {
        return Ok(ReportSamples::TooLarge(bytes));
    }
    let Some(json) = store.latest_score_report(run_id)? else {
        return Ok(ReportSamples::NotScored);
    };
    /// Only the samples of the report, as nmb-score wrote them.
    #[derive(Deserialize)]
    struct Samples {
        #[serde(default)]
        samples: Vec<SampleScore>,
    }
    Ok(match serde_json::from_str::<Samples>(&json) {
        Ok(s) => ReportSamples::Read(s.samples),
        Err(e) => ReportSamples::Unreadable(e.to_string()),
    })
}

/// The case's entries of the latest score report (see [`report_samples`]).
pub(crate) fn references(
    store: &Store,
    run_id: &str,
    case_id: &str,
) -> Result<References, PageError> {
    let samples = match report_samples(store, run_id)? {
        ReportSamples::NotScored => return Ok(References::NotScored),
        ReportSamples::TooLarge(bytes) => return Ok(References::TooLarge(bytes)),
        ReportSamples::Unreadable(why) => return Ok(References::Unreadable(why)),
        ReportSamples::Read(samples) => samples,
    };
    let mut tasks: BTreeMap<String, TaskReference> = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for s in samples.into_iter().filter(|s| s.case_id == case_id) {
        let r = tasks.entry(s.task_id.clone()).or_default();
        if let Some(d) = &s.diagnosis {
            r.diagnosis.get_or_insert_with(|| d.reference.clone());
        }
        if let Some(l) = &s.lesion {
            r.lesion_type = r.lesion_type.take().or_else(|| l.reference_type.clone());
            r.lesion_location = r
                .lesion_location
                .take()
                .or_else(|| l.reference_location.clone());
        }
        if metadata.is_empty() {
            metadata = s.case_metadata;
        }
    }
    Ok(References::Read { tasks, metadata })
}

/// Why a case page shows no reference answers, as a sentence (HTML), or `None` when it shows them.
pub(crate) fn references_note(refs: &References) -> Option<String> {
    match refs {
        References::Read { .. } => None,
        References::NotScored => Some(
            "This run is not scored, so no reference answers are shown: they come from the score report \
             (<code>nmb score RUN_ID</code>) or the suite's answer key."
                .to_string(),
        ),
        References::TooLarge(bytes) => Some(format!(
            "The reference answers are in the run's latest score report (under <code>samples[].diagnosis</code> \
             and <code>samples[].lesion</code>), which at {:.1} MB is too large to read for one page; the \
             score rows below hold the level, family, disease group and each answer's outcome, and the suite's \
             answer key holds the references.",
            *bytes as f64 / 1_048_576.0
        )),
        References::Unreadable(why) => Some(format!(
            "The run's latest score report could not be read for its reference answers ({}).",
            escape(why)
        )),
    }
}

pub(crate) fn run_link(run_id: &str) -> String {
    format!(
        "<a href=\"/runs/{}\">{}</a>",
        url_encode(run_id),
        escape(run_id)
    )
}

pub(crate) fn nonempty(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `/runs/RUN/cases/CASE`.
pub(crate) fn case_path(run_id: &str, case_id: &str) -> String {
    format!("/runs/{}/cases/{}", url_encode(run_id), url_encode(case_id))
}

/// [`case_path`], escaped for an attribute.
pub(crate) fn case_href(run_id: &str, case_id: &str) -> String {
    escape(&case_path(run_id, case_id))
}

/// How a score row reads in a table: a CSS class and a word.
pub(crate) fn verdict(r: &SampleScoreRow) -> (&'static str, String) {
    match (r.status.as_str(), r.correct) {
        ("parse_failed", _) => ("wrong", "unparseable".to_string()),
        (_, Some(true)) => ("ok", "correct".to_string()),
        (_, Some(false)) => ("wrong", "wrong".to_string()),
        (status, None) => ("muted", status.replace('_', " ")),
    }
}

/// `/runs/RUN/samples/INDEX?task=TASK`.
pub(crate) fn sample_path(run_id: &str, task_id: &str, sample_index: u32) -> String {
    format!(
        "/runs/{}/samples/{sample_index}?task={}",
        url_encode(run_id),
        url_encode(task_id)
    )
}

/// [`sample_path`], escaped for an attribute.
pub(crate) fn sample_href(run_id: &str, task_id: &str, sample_index: u32) -> String {
    escape(&sample_path(run_id, task_id, sample_index))
}
