//! The pages: each reads what it shows from the store, a page at a time, and renders it with everything the store
//! holds escaped.

use std::fmt::Write as _;

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use nmb_chat::{StoredConversation, StoredPart};
use nmb_results::ErrorCategory;
use nmb_stats::Estimate;
use nmb_store::{
    RunInfo, SampleFilter, SampleRecord, SampleScoreRow, SampleStatus, ScoreOutcome, Store,
};
use nmb_table::{Cell, Table};
use serde::Deserialize;

use crate::common::{
    case_href, headline, nonempty, run_link, sample_href, verdict, Headline, PageError,
};
use crate::html::{escape, num, opt, page, thinking_block, url_encode};

/// Samples per page of a run's table.
pub const PAGE_SIZE: u64 = 50;
/// Characters of an answer shown in a run's table.
const EXCERPT_CHARS: usize = 160;

/// `0.420 [0.300, 0.550]`, or an em dash.
fn estimate(e: Option<&Estimate>) -> String {
    e.map_or_else(
        || "—".to_string(),
        |e| format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci_low, e.ci_high),
    )
}

/// `/`: one row per run.
pub(crate) fn runs(store: &Store) -> Result<Html<String>, PageError> {
    let runs = store.list_runs()?;
    let mut body = String::from("<h1>Runs</h1>");
    if runs.is_empty() {
        body.push_str("<p>No runs in this store yet.</p>");
        return Ok(page("Runs", &body));
    }
    let mut table = Table::new(
        "",
        &[
            ("run", false),
            ("name", false),
            ("suite", false),
            ("status", false),
            ("created", false),
            ("ok", true),
            ("errored", true),
            ("samples", true),
            ("pass@1 (a) [95% CI]", false),
            ("pass@5 (a) [95% CI]", false),
        ],
    );
    table.id = Some("runs".into());
    for run in &runs {
        let summary = store.summary(&run.run_id)?;
        let head = headline(store, &run.run_id)?;
        let (p1, p5) = match &head {
            Some(h) => (
                estimate(h.overall.pass_at_1.unbiased_estimator.as_ref()),
                estimate(h.overall.pass_at_5.unbiased_estimator.as_ref()),
            ),
            None => ("not scored".to_string(), "not scored".to_string()),
        };
        table.push(vec![
            Cell::new(&run.run_id).linked(format!("/runs/{}", url_encode(&run.run_id))),
            Cell::new(run.manifest.display_name()),
            Cell::new(&run.manifest.suite_id),
            Cell::new(run.status.as_str()),
            Cell::new(&summary.created_at),
            Cell::new(summary.samples_ok.to_string()),
            Cell::new(summary.samples_errored.to_string()),
            Cell::new(summary.samples_total.to_string()),
            Cell::new(p1),
            Cell::new(p5),
        ]);
    }
    body.push_str(&table.html());
    Ok(page("Runs", &body))
}

/// The query of a run's page: which page of samples, and the filters.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RunQuery {
    /// 1-based.
    pub page: Option<u64>,
    /// `ok`, `errored` or `pending`.
    pub status: Option<String>,
    /// A final error class.
    pub error: Option<String>,
    /// A task id prefix.
    pub task: Option<String>,
    /// Text the answers contain.
    pub q: Option<String>,
    /// `correct`, `wrong` or `unparseable`, in the latest score report.
    pub score: Option<String>,
    /// An error-taxonomy category, in the latest score report.
    pub category: Option<String>,
    /// A level, in the latest score report.
    pub level: Option<String>,
    /// A family, in the latest score report.
    pub family: Option<String>,
    /// A disease group, in the latest score report.
    pub group: Option<String>,
}

impl RunQuery {
    fn filter(&self) -> Result<SampleFilter, PageError> {
        let status = match nonempty(&self.status) {
            None => None,
            Some(s) => Some(SampleStatus::parse(&s).ok_or_else(|| {
                PageError::BadRequest(format!(
                    "unknown status {s:?}: expected ok, errored or pending"
                ))
            })?),
        };
        let outcome = match nonempty(&self.score) {
            None => None,
            Some(s) => Some(ScoreOutcome::parse(&s).ok_or_else(|| {
                PageError::BadRequest(format!(
                    "unknown score {s:?}: expected correct, wrong or unparseable"
                ))
            })?),
        };
        Ok(SampleFilter {
            status,
            error_class: nonempty(&self.error),
            task_prefix: nonempty(&self.task),
            text: nonempty(&self.q),
            outcome,
            error_category: nonempty(&self.category),
            level: nonempty(&self.level),
            family: nonempty(&self.family),
            disease_group: nonempty(&self.group),
        })
    }

    /// The filters that read the latest score report, with their values.
    fn score_filters(&self) -> [(&'static str, &Option<String>); 5] {
        [
            ("score", &self.score),
            ("category", &self.category),
            ("level", &self.level),
            ("family", &self.family),
            ("group", &self.group),
        ]
    }

    /// The query string of these filters on another page (`&`-joined, escaped for an attribute).
    fn link(&self, run_id: &str, page: u64) -> String {
        let mut q = vec![format!("page={page}")];
        let plain = [
            ("status", &self.status),
            ("error", &self.error),
            ("task", &self.task),
            ("q", &self.q),
        ];
        for (key, value) in plain.into_iter().chain(self.score_filters()) {
            if let Some(v) = nonempty(value) {
                q.push(format!("{key}={}", url_encode(&v)));
            }
        }
        escape(&format!("/runs/{}?{}", url_encode(run_id), q.join("&")))
    }
}

/// `/runs/{id}`: the manifest, the headline, the level × family table and a page of samples.
/// Resamples behind the run page's agreement intervals: fewer than the report's 10,000, so the page stays quick;
/// `nmb report` and `nmb agreement --review` give the full ones.
const REVIEW_RESAMPLES: usize = 1000;

/// Judges against clinicians, for each review set that covers the run (nothing when none does; no score report
/// is read then).
fn review_block(body: &mut String, store: &Store, run_id: &str, name: &str) {
    let options = nmb_calibration::AgreementOptions {
        bootstrap: nmb_stats::BootstrapConfig {
            resamples: REVIEW_RESAMPLES,
            ..nmb_stats::BootstrapConfig::default()
        },
        ..nmb_calibration::AgreementOptions::default()
    };
    let calibrations = match nmb_review::run_calibrations(store, run_id, None, &options) {
        Ok(c) => c,
        // A review the page cannot measure (say, a score report of an older layout) must not hide the run.
        Err(e) => {
            tracing::warn!("nmb serve: review calibration of run {run_id}: {e}");
            let _ = write!(
                body,
                "<p class=\"muted\" id=\"review-error\">A review set covers this run, but its judges could not be \
                 measured here: {}</p>",
                escape(&e.to_string())
            );
            return;
        }
    };
    let tables: Vec<_> = calibrations
        .iter()
        .map(|c| nmb_review::tables::tables(name, c))
        .collect();
    body.push_str(&nmb_review::tables::section_html(&tables));
    if !calibrations.is_empty() {
        let _ = write!(
            body,
            "<p class=\"muted\">Intervals from {REVIEW_RESAMPLES} bootstrap resamples; <code>nmb report</code> and \
             <code>nmb agreement --review</code> use more.</p>"
        );
    }
}

pub(crate) fn run(
    store: &Store,
    run_id: &str,
    query: &RunQuery,
) -> Result<Html<String>, PageError> {
    let Some(run) = store.get_run(run_id)? else {
        return Err(PageError::NotFound(format!("no run {run_id}")));
    };
    let filter = query.filter()?;
    let page_no = query.page.unwrap_or(1).max(1);
    let first = (page_no - 1).saturating_mul(PAGE_SIZE);
    let samples = store.sample_page(run_id, &filter, first, PAGE_SIZE)?;
    let summary = store.summary(run_id)?;
    let head = headline(store, run_id)?;

    let mut body = format!(
        "<h1>{} <span class=\"muted\">{}</span></h1>",
        escape(&run.manifest.display_name()),
        escape(run_id)
    );
    manifest_block(&mut body, &run, &summary);
    scores_block(&mut body, head.as_ref());
    crate::repeats::run_block(&mut body, run_id, head.as_ref());
    review_block(&mut body, store, run_id, &run.manifest.display_name());

    body.push_str("<h2 id=\"samples\">Samples</h2>");
    filter_form(
        &mut body,
        run_id,
        query,
        &summary.errors_by_class,
        head.as_ref(),
    );
    if head.is_none() && query_reads_scores(query) {
        body.push_str(
            "<p class=\"muted\" id=\"unscored\">This run is not scored, so the score filters match nothing.</p>",
        );
    }
    let shown = samples.samples.len() as u64;
    let _ = write!(
        body,
        "<p class=\"muted\" id=\"count\">{}{} matching; showing {}–{}</p>",
        if samples.total_exact { "" } else { "over " },
        samples.total,
        if shown == 0 { 0 } else { first + 1 },
        first.saturating_add(shown)
    );
    // The run page lists up to a page of samples: their thinking is left to the case and sample pages.
    sample_table(&mut body, run_id, &samples, true, false);
    let pages = samples.total.div_ceil(PAGE_SIZE).max(1);
    body.push_str("<nav class=\"pager\">");
    if page_no > 1 {
        let _ = write!(
            body,
            "<a rel=\"prev\" href=\"{}\">← previous</a>",
            query.link(run_id, page_no - 1)
        );
    }
    // A search stops counting at a cap, so past it the last page is unknown.
    let more = if samples.total_exact { "" } else { "+" };
    let _ = write!(body, "<span>page {page_no} of {pages}{more}</span>");
    if page_no < pages || !samples.total_exact {
        let _ = write!(
            body,
            "<a rel=\"next\" href=\"{}\">next →</a>",
            query.link(run_id, page_no + 1)
        );
    }
    body.push_str("</nav>");
    crate::compare::compare_form(&mut body, store, &run, None)?;
    Ok(page(&format!("Run {run_id}"), &body))
}

fn manifest_block(body: &mut String, run: &RunInfo, summary: &nmb_store::RunSummary) {
    let m = &run.manifest;
    let params = serde_json::to_string(&m.params).unwrap_or_default();
    let rows: [(&str, String); 12] = [
        ("model", m.model.clone()),
        ("suite", format!("{} ({})", m.suite_id, m.suite_hash)),
        (
            "template",
            format!("{} ({})", m.template_id, m.template_hash),
        ),
        ("parameters", params),
        ("inputs", m.input_mode.to_string()),
        ("samples per task", m.samples.to_string()),
        (
            "dropped inputs",
            if m.dropped_inputs.is_empty() {
                "none".to_string()
            } else {
                m.dropped_inputs.join(", ")
            },
        ),
        ("status", run.status.as_str().to_string()),
        ("created", summary.created_at.clone()),
        ("nmb", m.nmb_version.clone()),
        (
            "samples",
            format!(
                "{} ok, {} errored, {} pending of {}",
                summary.samples_ok,
                summary.samples_errored,
                summary.samples_pending,
                summary.samples_total
            ),
        ),
        (
            "tokens",
            format!(
                "{} in, {} out; latency p50 {} ms, p90 {} ms",
                summary.tokens_in,
                summary.tokens_out,
                summary.latency_ms.p50,
                summary.latency_ms.p90
            ),
        ),
    ];
    body.push_str("<dl id=\"manifest\">");
    for (k, v) in rows {
        let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    body.push_str("</dl>");
}

fn scores_block(body: &mut String, head: Option<&Headline>) {
    body.push_str("<h2>Scores</h2>");
    let Some(h) = head else {
        body.push_str("<p class=\"muted\">Not scored yet (<code>nmb score RUN_ID</code>).</p>");
        return;
    };
    let o = &h.overall;
    let _ = write!(
        body,
        "<table id=\"headline\"><tr><th></th><th>(a) unbiased over n samples [95% CI]</th>\
         <th>(b) within one answer's top k [95% CI]</th></tr>\
         <tr><th>pass@1</th><td>{}</td><td>{}</td></tr>\
         <tr><th>pass@5</th><td>{}</td><td>{}</td></tr>\
         <tr><th>accuracy</th><td colspan=\"2\">{}</td></tr></table>",
        escape(&estimate(o.pass_at_1.unbiased_estimator.as_ref())),
        escape(&estimate(o.pass_at_1.top_k_in_answer.as_ref())),
        escape(&estimate(o.pass_at_5.unbiased_estimator.as_ref())),
        escape(&estimate(o.pass_at_5.top_k_in_answer.as_ref())),
        escape(&estimate(o.accuracy.as_ref())),
    );
    if h.by_level_family.is_empty() {
        return;
    }
    let mut table = Table::new(
        "",
        &[
            ("level", false),
            ("family", false),
            ("tasks", true),
            ("n", true),
            ("pass@1 (a) [95% CI]", false),
            ("pass@5 (a) [95% CI]", false),
            ("accuracy [95% CI]", false),
        ],
    );
    table.id = Some("level-family".into());
    for g in &h.by_level_family {
        table.push(vec![
            Cell::new(g.level.map_or("—", |l| l.as_str())),
            Cell::new(g.family.map_or("—", |f| f.as_str())),
            Cell::new(g.tasks.to_string()),
            Cell::new(g.n.to_string()),
            Cell::new(estimate(g.pass_at_1.unbiased_estimator.as_ref())),
            Cell::new(estimate(g.pass_at_5.unbiased_estimator.as_ref())),
            Cell::new(estimate(g.accuracy.as_ref())),
        ]);
    }
    body.push_str("<h2>By level and family</h2>");
    body.push_str(&table.html());
}

fn query_reads_scores(query: &RunQuery) -> bool {
    query
        .score_filters()
        .iter()
        .any(|(_, v)| nonempty(v).is_some())
}

fn filter_form(
    body: &mut String,
    run_id: &str,
    query: &RunQuery,
    errors: &std::collections::BTreeMap<String, u64>,
    head: Option<&Headline>,
) {
    let value = |v: &Option<String>| escape(&nonempty(v).unwrap_or_default());
    let _ = write!(
        body,
        "<form class=\"filters\" method=\"get\" action=\"/runs/{}\">",
        escape(&url_encode(run_id))
    );
    select(
        body,
        "status",
        "status",
        &query.status,
        &["ok", "errored", "pending"],
    );
    let _ = write!(
        body,
        "<label>error class<input name=\"error\" value=\"{}\"></label>\
         <label>task prefix<input name=\"task\" value=\"{}\"></label>\
         <label>answer contains<input name=\"q\" value=\"{}\"></label>",
        value(&query.error),
        value(&query.task),
        value(&query.q),
    );
    if let Some(h) = head {
        score_filter_fields(body, query, h);
    }
    let _ = write!(
        body,
        "<button type=\"submit\">filter</button> <a href=\"/runs/{}\">clear</a></form>",
        escape(&url_encode(run_id)),
    );
    if !errors.is_empty() {
        body.push_str("<p>Errored samples by class: ");
        let links: Vec<String> = errors
            .iter()
            .map(|(class, n)| {
                let q = RunQuery {
                    error: Some(class.clone()),
                    ..Default::default()
                };
                format!(
                    "<a class=\"error-filter\" href=\"{}\">{}</a> ({n})",
                    q.link(run_id, 1),
                    escape(class)
                )
            })
            .collect();
        body.push_str(&links.join(", "));
        body.push_str("</p>");
    }
}

/// The filters on the latest score report: the outcome, the error category, the level and family (those the
/// headline's table has), and the disease group.
fn score_filter_fields(body: &mut String, query: &RunQuery, head: &Headline) {
    let outcomes: Vec<&str> = ScoreOutcome::ALL.iter().map(|o| o.as_str()).collect();
    select(body, "score", "score", &query.score, &outcomes);
    let categories: Vec<&str> = ErrorCategory::ALL.iter().map(|c| c.as_str()).collect();
    select(
        body,
        "error category",
        "category",
        &query.category,
        &categories,
    );
    let mut levels: Vec<&str> = head
        .by_level_family
        .iter()
        .filter_map(|g| g.level.map(|l| l.as_str()))
        .collect();
    let mut families: Vec<&str> = head
        .by_level_family
        .iter()
        .filter_map(|g| g.family.map(|f| f.as_str()))
        .collect();
    for list in [&mut levels, &mut families] {
        list.sort_unstable();
        list.dedup();
    }
    select(body, "level", "level", &query.level, &levels);
    select(body, "family", "family", &query.family, &families);
    let _ = write!(
        body,
        "<label>disease group<input name=\"group\" value=\"{}\"></label>",
        escape(&nonempty(&query.group).unwrap_or_default())
    );
}

/// A `<select>` with "any" first, then `options`, and the current value (kept even when it is not one of them).
fn select(body: &mut String, label: &str, name: &str, current: &Option<String>, options: &[&str]) {
    let current = nonempty(current).unwrap_or_default();
    let _ = write!(
        body,
        "<label>{}<select name=\"{}\"><option value=\"\">any</option>",
        escape(label),
        escape(name)
    );
    let extra =
        (!current.is_empty() && !options.contains(&current.as_str())).then_some(current.as_str());
    for o in options.iter().copied().chain(extra) {
        let _ = write!(
            body,
            "<option value=\"{}\"{}>{}</option>",
            escape(o),
            if o == current { " selected" } else { "" },
            escape(o)
        );
    }
    body.push_str("</select></label>");
}

/// The case a sample belongs to: its score row's, else the task id up to its first `/` (what the built-in
/// formats name tasks by).
pub(crate) fn case_of(task_id: &str, score: Option<&SampleScoreRow>) -> Option<String> {
    match score {
        Some(r) if !r.case_id.is_empty() => Some(r.case_id.clone()),
        _ => task_id
            .split_once('/')
            .map(|(case, _)| case.to_string())
            .filter(|c| !c.is_empty()),
    }
}

/// A table of samples with links to each sample (and, when `with_case`, to its case), their status, score and
/// the start of their answer.
/// The samples of a page, one row each: `with_case` adds a column linking each to its case, `with_thinking`
/// the thinking behind each answer, collapsed, above its excerpt.
pub(crate) fn sample_table(
    body: &mut String,
    run_id: &str,
    page: &nmb_store::SamplePage,
    with_case: bool,
    with_thinking: bool,
) {
    let _ = write!(
        body,
        "<table id=\"sample-table\"><tr><th>task</th>{}<th>sample</th><th>status</th><th>score</th>\
         <th>error</th><th>turns</th><th>answer</th></tr>",
        if with_case { "<th>case</th>" } else { "" }
    );
    let mut scores = page.scores.iter().peekable();
    for s in &page.samples {
        let score = scores.next_if(|r| r.task_id == s.task_id && r.sample_index == s.sample_index);
        sample_row(body, run_id, s, score, with_case, with_thinking);
    }
    body.push_str("</table>");
}

pub(crate) fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        out.push('…');
    }
    out
}

fn sample_row(
    body: &mut String,
    run_id: &str,
    s: &SampleRecord,
    score: Option<&SampleScoreRow>,
    with_case: bool,
    with_thinking: bool,
) {
    let last = s.turns.last();
    let mut answer = String::new();
    if let Some(t) = last.filter(|_| with_thinking) {
        if let Some(thinking) = &t.thinking {
            thinking_block(&mut answer, thinking, t.call.tokens.reasoning);
        }
    }
    answer.push_str(&escape(
        &last
            .and_then(|t| t.text.as_deref())
            .map(excerpt)
            .unwrap_or_default(),
    ));
    let case = if with_case {
        match case_of(&s.task_id, score) {
            Some(c) => format!(
                "<td><a class=\"case-link\" href=\"{}\">{}</a></td>",
                case_href(run_id, &c),
                escape(&c)
            ),
            None => "<td></td>".to_string(),
        }
    } else {
        String::new()
    };
    let (class, word) = score.map_or(("muted", String::new()), verdict);
    let category = score
        .and_then(|r| r.error_category.as_deref())
        .map(|c| format!(" · {}", escape(c)))
        .unwrap_or_default();
    let _ = write!(
        body,
        "<tr><td><a class=\"sample-link\" href=\"{}\">{}</a></td>{case}<td class=\"num\">{}</td>\
         <td class=\"{}\">{}</td><td class=\"{class}\">{}{category}</td><td>{}</td><td class=\"num\">{}</td>\
         <td>{}</td></tr>",
        sample_href(run_id, &s.task_id, s.sample_index),
        escape(&s.task_id),
        s.sample_index,
        s.status.as_str(),
        s.status.as_str(),
        escape(&word),
        escape(s.error_class.as_deref().unwrap_or("")),
        s.turns.len(),
        answer,
    );
}

/// The query of a sample's page: its task id (task ids hold `/`, so they are not a path segment).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct SampleQuery {
    pub task: Option<String>,
}

/// `/runs/{id}/samples/{index}?task=TASK`: every turn, the prompts as sent, and the sample's score row.
pub(crate) fn sample(
    store: &Store,
    run_id: &str,
    index: &str,
    query: &SampleQuery,
) -> Result<Html<String>, PageError> {
    let Some(task_id) = nonempty(&query.task) else {
        return Err(PageError::BadRequest(
            "which task? (add ?task=TASK_ID)".into(),
        ));
    };
    let Ok(sample_index) = index.parse::<u32>() else {
        return Err(PageError::NotFound(format!("no sample {index}")));
    };
    let Some(run) = store.get_run(run_id)? else {
        return Err(PageError::NotFound(format!("no run {run_id}")));
    };
    let Some(s) = store.sample_record(run_id, &task_id, sample_index)? else {
        return Err(PageError::NotFound(format!(
            "run {run_id} has no sample {sample_index} of task {task_id}"
        )));
    };
    let score = store.latest_sample_score(run_id, &task_id, sample_index)?;

    let case = case_of(&task_id, score.as_ref())
        .map(|c| {
            format!(
                " · case <a id=\"case-link\" href=\"{}\">{}</a>",
                case_href(run_id, &c),
                escape(&c)
            )
        })
        .unwrap_or_default();
    let mut body = format!(
        "<p>{} · <a href=\"/runs/{}?task={}\">{}</a>{case}</p><h1>{} <span class=\"muted\">sample {}</span></h1>",
        run_link(run_id),
        escape(&url_encode(run_id)),
        escape(&url_encode(&task_id)),
        escape(&run.manifest.display_name()),
        escape(&task_id),
        sample_index
    );
    let _ = write!(
        body,
        "<dl id=\"sample\"><dt>status</dt><dd class=\"{}\">{}</dd>",
        s.status.as_str(),
        s.status.as_str()
    );
    if let Some(class) = &s.error_class {
        let _ = write!(
            body,
            "<dt>error</dt><dd>{}: {}</dd>",
            escape(class),
            escape(s.error_message.as_deref().unwrap_or(""))
        );
    }
    let _ = write!(body, "<dt>turns done</dt><dd>{}</dd></dl>", s.turns_done);
    score_block(&mut body, score.as_ref());
    crate::repeats::sample_block(&mut body, store, run_id, &task_id, sample_index)?;
    crate::perturbed::block(&mut body, store, &run, &task_id, sample_index)?;

    body.push_str("<h2>Turns</h2>");
    if s.turns.is_empty() {
        body.push_str("<p class=\"muted\">No answer yet.</p>");
    }
    let mut prompts_seen: Vec<String> = Vec::new();
    for t in &s.turns {
        let c = &t.call;
        let _ = write!(
            body,
            "<section class=\"turn\" id=\"turn-{}\"><h3>turn {} · <span class=\"{}\">{}</span></h3>\
             <table><tr><th>model</th><th>cached</th><th>tokens in</th><th>tokens out</th>\
             <th>latency ms</th><th>attempts</th><th>replica</th><th>call</th></tr>\
             <tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td></tr></table>",
            t.turn_index,
            t.turn_index,
            if t.ok { "ok" } else { "errored" },
            if t.ok { "ok" } else { "errored" },
            escape(&c.model),
            if t.cached { "yes" } else { "no" },
            opt(c.tokens_in),
            opt(c.tokens_out),
            opt(c.latency_ms),
            c.attempts,
            escape(c.replica.as_deref().unwrap_or("")),
            c.call_id,
        );
        if let Some(class) = &t.error_class {
            let _ = write!(
                body,
                "<p class=\"errored\">{}: {}</p>",
                escape(class),
                escape(t.error_message.as_deref().unwrap_or(""))
            );
        }
        if let Some(thinking) = &t.thinking {
            thinking_block(&mut body, thinking, c.tokens.reasoning);
        }
        if let Some(text) = &t.text {
            let _ = write!(body, "<pre class=\"answer\">{}</pre>", escape(text));
        }
        if !prompts_seen.contains(&c.prompt_hash) {
            let open = prompts_seen.is_empty();
            prompts_seen.push(c.prompt_hash.clone());
            prompt_block(store, &mut body, &c.prompt_hash, open)?;
        }
        body.push_str("</section>");
    }
    Ok(page(&format!("{task_id} sample {sample_index}"), &body))
}

pub(crate) fn score_block(body: &mut String, score: Option<&SampleScoreRow>) {
    body.push_str("<h2>Score</h2>");
    let Some(r) = score else {
        body.push_str("<p class=\"muted\">Not scored.</p>");
        return;
    };
    let correct = match r.correct {
        Some(true) => "correct",
        Some(false) => "wrong",
        None => "not counted",
    };
    let rows = [
        ("case", r.case_id.clone()),
        ("level", r.level.clone()),
        ("family", r.family.clone()),
        ("disease group", opt(r.disease_group.as_deref())),
        ("scored as", format!("{} ({correct})", r.status)),
        ("matched rank", opt(r.matched_rank)),
        ("match method", opt(r.match_method.as_deref())),
        ("rubric", num(r.rubric_overall, 2)),
        ("BERTScore F1", num(r.bertscore_f, 3)),
        (
            "error category",
            match (&r.error_category, &r.error_source) {
                (Some(c), Some(s)) => format!("{c} ({s})"),
                (Some(c), None) => c.clone(),
                _ => "—".to_string(),
            },
        ),
    ];
    body.push_str("<dl id=\"score\">");
    for (k, v) in rows {
        let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    body.push_str("</dl>");
}

pub(crate) fn prompt_block(
    store: &Store,
    body: &mut String,
    prompt_hash: &str,
    open: bool,
) -> Result<(), PageError> {
    let json = store.prompt_body(prompt_hash)?;
    render_prompt(body, prompt_hash, json.as_deref(), open);
    Ok(())
}

/// A prompt as sent, from its stored JSON (`None`: not in the store), in a `<details>` block.
pub(crate) fn render_prompt(body: &mut String, prompt_hash: &str, json: Option<&str>, open: bool) {
    let _ = write!(
        body,
        "<details class=\"prompt\"{}><summary>prompt as sent <span class=\"muted\">{}</span></summary>",
        if open { " open" } else { "" },
        escape(prompt_hash)
    );
    match json {
        None => body.push_str("<p class=\"muted\">The prompt is not in the store.</p>"),
        Some(json) => match StoredConversation::parse(json) {
            Err(_) => {
                let _ = write!(body, "<pre>{}</pre>", escape(json));
            }
            Ok(conv) => {
                for m in &conv.messages {
                    let role = serde_json::to_value(m.role)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    let _ = write!(
                        body,
                        "<div class=\"message\"><strong>{}</strong>",
                        escape(&role)
                    );
                    for part in &m.parts {
                        match part {
                            StoredPart::Text { text } => {
                                let _ = write!(body, "<pre>{}</pre>", escape(text));
                            }
                            StoredPart::Image { image, mime } => {
                                let _ = write!(
                                    body,
                                    "<img class=\"prompt\" src=\"/images/{}\" alt=\"{}\">",
                                    escape(&url_encode(image)),
                                    escape(&format!("{mime} {image}"))
                                );
                            }
                        }
                    }
                    body.push_str("</div>");
                }
            }
        },
    }
    body.push_str("</details>");
}

/// `/images/{sha256}`: the stored bytes, for a well-formed hash that the store holds.
pub(crate) fn image(store: &Store, sha256: &str) -> Result<Response, PageError> {
    let well_formed = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(PageError::NotFound("no such image".into()));
    }
    let Some(img) = store.image(sha256)? else {
        return Err(PageError::NotFound("no such image".into()));
    };
    // Only an image type goes out as itself; anything else the store holds is opaque bytes.
    let mime = if img.mime.starts_with("image/")
        && img
            .mime
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/+.-".contains(&b))
    {
        img.mime
    } else {
        "application/octet-stream".to_string()
    };
    Ok(([(header::CONTENT_TYPE, mime)], img.bytes).into_response())
}
