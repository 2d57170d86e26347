use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use nmb_serve::{ServeError, ServeOptions, CSP};
use nmb_store::{CallRecord, ChoiceRecord, ErrorInfo, ImageInput, ScoreReportRecord, Store};
use sha2::{Digest, Sha256};

const MODEL: &str = "openai:test-model@http://127.0.0.1:9";
pub(crate) const XSS: &str = "<script>alert(1)</script> and <img src=x onerror=alert(1)>";
const TASKS: usize = 30;

pub(crate) fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn png() -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend((0..200u32).map(|i| (i * 7) as u8));
    out
}

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub store: Arc<Store>,
    pub run_id: String,
    /// Another run of the same suite, unscored: `case-05/dx` and `case-06/dx`, two samples each.
    pub second: String,
    /// A run of another suite (hash `other`) with `case-05/dx`.
    pub other_suite: String,
    pub image: String,
}

fn task(i: usize) -> String {
    format!("case-{i:02}/dx")
}

fn manifest(suite_hash: &str, name: &str) -> nmb_store::Manifest {
    serde_json::from_value(serde_json::json!({
        "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": suite_hash,
        "template_id": "depth-v1", "template_hash": "def", "model": MODEL, "display_name": name,
        "params": {"temperature": 0.7}, "input_mode": "full", "samples": 2, "dropped_inputs": []
    }))
    .unwrap()
}

/// What the EHR's history says for case `i` (case 05's holds a script).
pub(crate) fn history(i: usize) -> String {
    if i == 5 {
        XSS_EHR.to_string()
    } else {
        format!("hypertension for {i} years")
    }
}

pub(crate) const XSS_EHR: &str = "<script>alert(2)</script>";
pub(crate) const XSS_NOTES: &str = "Found <b onmouseover=alert(3)>confused</b> at home.";
pub(crate) const XSS_REFERENCE: &str = "<script>alert(4)</script> glioma";

/// The prompt of task `i` as depth-v1 renders it: EHR fields, notes, the image, then the question.
fn prompt_body(i: usize, image: &str) -> String {
    let t = task(i);
    let notes = if i == 5 {
        XSS_NOTES.to_string()
    } else {
        format!("Headache for {i} days.\n\nNo fever.")
    };
    let head = format!(
        "Electronic health record:\nAge: {}\nSex: female\nHistory: {}\n\nClinical notes:\n{notes}\n\n\
         Images (1):\n\nImage 1\n",
        40 + i,
        history(i)
    );
    let question = format!("\nQuestion: What is the diagnosis for {t}?\n\nAnswer concisely.");
    serde_json::json!({"messages": [
        {"parts": [{"text": "You are an experienced neurology expert."}], "role": "system"},
        {"parts": [{"text": head}, {"image": image, "mime": "image/png"}, {"text": question}], "role": "user"}
    ]})
    .to_string()
}

/// The reference diagnosis of case `i` (case 05's holds a script).
pub(crate) fn reference(i: usize) -> String {
    if i == 5 {
        XSS_REFERENCE.to_string()
    } else {
        format!("Glioblastoma {i}")
    }
}

/// Case `i`'s family: lesion for cases 07 and 08, else differential.
fn family(i: usize) -> &'static str {
    if matches!(i, 7 | 8) {
        "lesion"
    } else {
        "differential"
    }
}

/// One sample's score row. Sample 0 is correct, sample 1 wrong (reasoning failures for even cases, perceptual
/// ones for odd), except `case-03/dx` 1 (errored) and `case-04/dx` 1 (unparseable). Cases 20–29 are `complex`,
/// the rest `direct`; even cases are `Neoplasm`, odd ones `Vascular`.
fn score_row(i: usize, sample: u32) -> nmb_store::SampleScoreRow {
    let (failed, unparseable) = ((i, sample) == (3, 1), (i, sample) == (4, 1));
    let category = if i.is_multiple_of(2) {
        "reasoning_failure"
    } else {
        "perceptual_failure"
    };
    nmb_store::SampleScoreRow {
        task_id: task(i),
        sample_index: sample,
        case_id: format!("case-{i:02}"),
        family: family(i).into(),
        level: if i >= 20 { "complex" } else { "direct" }.into(),
        status: match (failed, unparseable) {
            (true, _) => "errored",
            (_, true) => "parse_failed",
            _ => "ok",
        }
        .into(),
        correct: (!failed).then_some(sample == 0),
        matched_rank: (!failed && sample == 0).then_some(1),
        match_method: Some("exact".into()),
        error_category: (sample == 1 && !failed && !unparseable).then(|| category.into()),
        disease_group: Some(
            if i.is_multiple_of(2) {
                "Neoplasm"
            } else {
                "Vascular"
            }
            .into(),
        ),
        ..Default::default()
    }
}

/// The score report's entry for a sample, as nmb-score writes it (checked against its type).
fn report_sample(r: &nmb_store::SampleScoreRow, i: usize) -> serde_json::Value {
    let lesion = family(i) == "lesion";
    let entry = serde_json::json!({
        "task_id": r.task_id, "sample_index": r.sample_index, "case_id": r.case_id, "family": r.family,
        "level": r.level, "disease_group": r.disease_group, "modality": "MRI",
        "case_metadata": {"organ": "brain", "source": "synthetic"},
        "status": r.status, "error_class": null, "parsed": null, "parse_error": null, "correct": r.correct,
        "unresolved": false,
        "diagnosis": if lesion { serde_json::Value::Null } else { serde_json::json!({
            "reference": reference(i), "matched_rank": r.matched_rank, "method": null,
            "top_1": r.correct == Some(true), "top_5": r.correct == Some(true), "candidates": []}) },
        "lesion": if lesion { serde_json::json!({
            "reference_type": "acute infarct", "reference_location": "left MCA territory",
            "type_match": null, "location_match": null}) } else { serde_json::Value::Null },
        "rubric": null, "bertscore": null, "taxonomy": null, "breadth": null
    });
    serde_json::from_value::<nmb_results::SampleScore>(entry.clone())
        .expect("the entry reads as nmb-score's SampleScore");
    entry
}

/// 30 tasks × 2 samples: `case-03/dx` sample 1 errored with a timeout, `case-05/dx` sample 0 answers with an
/// XSS payload, `case-07/dx` sample 1 mentions a needle; every prompt shows one image after the case's EHR
/// fields and notes. Scored (see [`score_row`]), with a report that holds every sample's reference. Beside it,
/// [`Fixture::second`] and [`Fixture::other_suite`].
pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    fill(dir, store)
}

/// The thinking `case-05/dx` sample 0 stored before its answer, with a payload of its own.
pub(crate) const XSS_THINKING: &str = "Weighing <script>alert(5)</script> glioma first";

fn record(store: &Store, run_id: &str, t: &str, prompt: &str, sample: u32, text: Option<&str>) {
    let thinks = (t, sample) == ("case-05/dx", 0);
    let call = CallRecord {
        tokens: nmb_store::TokenDetail {
            reasoning: thinks.then_some(321),
            ..Default::default()
        },
        run_id,
        task_id: t,
        turn_index: 0,
        prompt_hash: prompt,
        model: MODEL,
        params_json: r#"{"temperature":0.7}"#,
        template_id: "depth-v1",
        template_hash: "def",
        error: text.is_none().then_some(ErrorInfo {
            class: "timeout",
            message: "no answer in 60 s",
        }),
        attempts: if text.is_none() { 3 } else { 1 },
        raw: Some("{}"),
        tokens_in: Some(120),
        tokens_out: Some(9),
        latency_ms: Some(42),
        started_ms: 1_000,
        finished_ms: 1_042,
        batch_id: None,
    };
    let choice = ChoiceRecord {
        thinking: thinks.then_some(XSS_THINKING),
        finish_reason: None,
        sample_index: sample,
        choice_index: 0,
        text,
        error: None,
        final_turn: true,
    };
    store.record_call(&call, &[choice]).unwrap();
}

fn fill(dir: tempfile::TempDir, store: Store) -> Fixture {
    let run_id = store
        .create_run("cfg", &manifest("abc", "Test Model"))
        .unwrap()
        .run_id;
    let bytes = png();
    let image = sha(&bytes);
    let tasks: Vec<String> = (0..TASKS).map(task).collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (t.as_str(), 2)).collect();
    store.plan_samples(&run_id, &plan).unwrap();
    let mut rows = Vec::new();
    let mut entries = Vec::new();
    let mut prompts = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let body = prompt_body(i, &image);
        let prompt = sha(body.as_bytes());
        store
            .put_prompt(
                &prompt,
                &body,
                &[ImageInput {
                    sha256: &image,
                    mime: "image/png",
                    bytes: &bytes,
                }],
            )
            .unwrap();
        for sample in 0..2u32 {
            let text = match (t.as_str(), sample) {
                ("case-05/dx", 0) => XSS.to_string(),
                ("case-07/dx", 1) => "a needle in the haystack".to_string(),
                _ => format!("Glioblastoma for {t} sample {sample}"),
            };
            let failed = (t.as_str(), sample) == ("case-03/dx", 1);
            record(
                &store,
                &run_id,
                t,
                &prompt,
                sample,
                (!failed).then_some(text.as_str()),
            );
            let row = score_row(i, sample);
            entries.push(report_sample(&row, i));
            rows.push(row);
        }
        prompts.push(prompt);
    }
    let report = report_json(entries);
    store
        .save_score_report(&ScoreReportRecord {
            run_id: &run_id,
            config_hash: "score-cfg",
            schema_version: 1,
            report_json: &report.to_string(),
            samples: &rows,
        })
        .unwrap();

    let second = store
        .create_run("cfg-2", &manifest("abc", "Second Model"))
        .unwrap()
        .run_id;
    store
        .plan_samples(&second, &[("case-05/dx", 2), ("case-06/dx", 2)])
        .unwrap();
    for (i, t) in [(5, "case-05/dx"), (6, "case-06/dx")] {
        for sample in 0..2u32 {
            let text = format!("Second model thinks meningioma ({t} {sample})");
            record(&store, &second, t, &prompts[i], sample, Some(&text));
        }
    }
    let other_suite = store
        .create_run("cfg-3", &manifest("other", "Other Suite"))
        .unwrap()
        .run_id;
    store
        .plan_samples(&other_suite, &[("case-05/dx", 1)])
        .unwrap();
    record(
        &store,
        &other_suite,
        "case-05/dx",
        &prompts[5],
        0,
        Some("other"),
    );
    Fixture {
        _dir: dir,
        store: Arc::new(store),
        run_id,
        second,
        other_suite,
        image,
    }
}

/// A score report with the given samples and a fixed headline (parsed as nmb-score's own aggregate, so the
/// page reads what `nmb score` writes).
pub(crate) fn report_json(samples: Vec<serde_json::Value>) -> serde_json::Value {
    let est = |v: f64, lo: f64, hi: f64| {
        serde_json::json!({"value": v, "ci_low": lo, "ci_high": hi, "level": 0.95,
            "method": "cluster_percentile_bootstrap", "seed": 7, "resamples": 1000, "n": 59})
    };
    let group = |by: &str, level: &str, family: &str| {
        let overall = by == "overall";
        let name = |v: &str| {
            if overall {
                serde_json::Value::Null
            } else {
                v.into()
            }
        };
        serde_json::json!({
            "by": by, "level": name(level), "family": name(family),
            "tasks": 30, "cases": 30, "samples": 60, "n": 59, "correct": 30, "errored": 1, "pending": 0,
            "no_reference": 0, "parse_failed": 0, "unresolved": 0, "accuracy": est(0.508, 0.4, 0.6),
            "pass_at_1": {"k": 1, "unbiased_estimator": est(0.42, 0.3, 0.55), "unbiased_tasks": 30,
                          "top_k_in_answer": est(0.51, 0.4, 0.6), "top_k_samples": 59},
            "pass_at_5": {"k": 5, "unbiased_estimator": est(0.81, 0.7, 0.9), "unbiased_tasks": 30,
                          "top_k_in_answer": null, "top_k_samples": 0}
        })
    };
    let report = serde_json::json!({
        "samples": samples,
        "overall": group("overall", "", ""),
        "by_level_family": [group("level_family", "direct", "differential"),
                            group("level_family", "direct", "lesion"),
                            group("level_family", "complex", "differential")]
    });
    serde_json::from_value::<nmb_results::GroupAggregate>(report["overall"].clone()).unwrap();
    report
}

/// The viewer on a free loopback port; returns its base URL (`http://127.0.0.1:PORT`).
pub(crate) async fn start(store: Arc<Store>, token: Option<&str>) -> String {
    let bound = nmb_serve::bind(&ServeOptions {
        port: 0,
        token: token.map(str::to_string),
        ..ServeOptions::default()
    })
    .await
    .unwrap();
    let url = bound.url();
    tokio::spawn(bound.run(store));
    url.trim_end_matches('/').to_string()
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub(crate) async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = client().get(url).send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

pub(crate) fn rows(html: &str) -> usize {
    html.matches("class=\"sample-link\"").count()
}

pub(crate) fn assert_secure(headers: &reqwest::header::HeaderMap) {
    assert_eq!(headers["content-security-policy"], CSP);
    assert_eq!(headers["x-content-type-options"], "nosniff");
}

#[tokio::test]
async fn the_runs_list_shows_each_run_with_its_headline() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let (status, headers, html) = get(&format!("{base}/")).await;
    assert_eq!(status, 200);
    assert_secure(&headers);
    assert!(
        html.contains(&format!("href=\"/runs/{}\"", f.run_id)),
        "{html}"
    );
    assert!(html.contains("Test Model"));
    assert!(
        html.contains(">59<") && html.contains(">1<") && html.contains(">60<"),
        "ok / errored / total"
    );
    assert!(
        html.contains("0.420 [0.300, 0.550]"),
        "pass@1 (a) with its CI"
    );
    assert!(
        html.contains("0.810 [0.700, 0.900]"),
        "pass@5 (a) with its CI"
    );
    assert!(!html.contains("<script"), "no script on any page");

    let (status, headers, css) = get(&format!("{base}/style.css")).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
    assert!(css.contains("table"));
}

#[tokio::test]
async fn a_run_page_pages_and_filters_its_samples() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let run = format!("{base}/runs/{}", f.run_id);
    let (status, headers, first) = get(&run).await;
    assert_eq!(status, 200);
    assert_secure(&headers);
    assert_eq!(rows(&first), 50, "50 samples a page");
    assert!(first.contains("60 matching; showing 1–50"));
    assert!(first.contains("rel=\"next\""));
    assert!(first.contains("Test Model") && first.contains(MODEL) && first.contains("temperature"));
    assert!(first.contains("id=\"level-family\"") && first.contains("direct"));
    assert!(first.contains("0.510 [0.400, 0.600]"), "pass@1 (b)");
    assert!(first.contains("case-00/dx") && !first.contains("case-29/dx"));

    let (_, _, second) = get(&format!("{run}?page=2")).await;
    assert_eq!(rows(&second), 10);
    assert!(second.contains("showing 51–60") && second.contains("case-29/dx"));
    assert!(second.contains("rel=\"prev\"") && !second.contains("rel=\"next\""));

    let (_, _, errored) = get(&format!("{run}?status=errored")).await;
    assert_eq!(rows(&errored), 1);
    assert!(errored.contains("1 matching") && errored.contains("timeout"));
    let (_, _, timeouts) = get(&format!("{run}?error=timeout")).await;
    assert_eq!(rows(&timeouts), 1);
    assert!(timeouts.contains("case-03/dx"));
    let (_, _, prefix) = get(&format!("{run}?task=case-1")).await;
    assert_eq!(rows(&prefix), 20, "case-10 … case-19, two samples each");
    let (_, _, needle) = get(&format!("{run}?q=NEEDLE&status=")).await;
    assert_eq!(rows(&needle), 1);
    assert!(needle.contains("case-07/dx") && needle.contains("value=\"NEEDLE\""));
    let (_, _, none) = get(&format!("{run}?q=%25")).await;
    assert_eq!(rows(&none), 0, "a % searches for itself");
    // Filters survive paging.
    let (_, _, ok_page2) = get(&format!("{run}?status=ok&page=2")).await;
    assert_eq!(rows(&ok_page2), 9);
    assert!(ok_page2.contains("status=ok"), "the pager keeps the filter");

    let (status, _, far) = get(&format!("{run}?page={}", u64::MAX)).await;
    assert_eq!(status, 200, "a page past the end is empty, not an error");
    assert_eq!(rows(&far), 0);
    let (status, _, bad) = get(&format!("{run}?status=bogus")).await;
    assert_eq!(status, 400);
    assert!(bad.contains("unknown status"));
    // The XSS answer is listed, escaped.
    let (_, _, xss) = get(&format!("{run}?task=case-05")).await;
    assert!(!xss.contains("<script>alert") && !xss.contains("<img src=x"));
    assert!(xss.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

/// The count line of a run's page: `N matching`.
fn matching(html: &str) -> u64 {
    let at = html.find("id=\"count\">").expect("a count") + "id=\"count\">".len();
    html[at..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

#[tokio::test]
async fn score_filters_select_by_outcome_category_level_family_and_disease_group() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let run = format!("{base}/runs/{}", f.run_id);
    for (query, expected) in [
        ("score=correct", 30),
        ("score=wrong", 29),
        ("score=unparseable", 1),
        ("category=reasoning_failure", 14),
        ("category=perceptual_failure", 14),
        ("level=complex", 20),
        ("family=lesion", 4),
        ("group=NEOPLASM", 30),
        ("group=Vascular&score=wrong", 14),
        ("level=complex&family=lesion", 0),
        ("score=wrong&task=case-0&status=ok", 9),
        ("score=&category=&level=&family=&group=", 60),
    ] {
        let (status, headers, html) = get(&format!("{run}?{query}")).await;
        assert_eq!(status, 200, "{query}");
        assert_secure(&headers);
        assert_eq!(matching(&html), expected, "{query}");
        assert_eq!(rows(&html), expected.min(50) as usize, "{query}");
    }
    let (_, _, unparseable) = get(&format!("{run}?score=unparseable")).await;
    assert!(unparseable.contains("case-04/dx") && unparseable.contains(">unparseable<"));
    let (_, _, lesion) = get(&format!("{run}?family=lesion")).await;
    assert!(lesion.contains("case-07/dx") && lesion.contains("case-08/dx"));
    assert!(
        lesion.contains("perceptual_failure"),
        "the score column names the category"
    );
    // The form offers the headline's levels and families and keeps what was chosen; the pager keeps it too.
    let (_, _, wrong) = get(&format!("{run}?score=wrong&group=neoplasm")).await;
    assert!(wrong.contains("<option value=\"wrong\" selected>"));
    assert!(wrong.contains("<option value=\"complex\">complex</option>"));
    assert!(wrong.contains("<option value=\"lesion\">lesion</option>"));
    assert!(wrong.contains("<option value=\"reasoning_failure\">"));
    assert!(wrong.contains("name=\"group\" value=\"neoplasm\""));
    let (_, _, page1) = get(&format!("{run}?score=correct&page=1")).await;
    assert!(!page1.contains("rel=\"next\""), "30 fit on one page");
    let (_, _, all_ok) = get(&format!("{run}?group=neoplasm&level=direct")).await;
    assert_eq!(matching(&all_ok), 20);

    let (status, _, bad) = get(&format!("{run}?score=maybe")).await;
    assert_eq!(status, 400);
    assert!(bad.contains("unknown score") && bad.contains("correct, wrong or unparseable"));
    // An unscored run has no score fields, and says why a score filter in its address matches nothing.
    let second = format!("{base}/runs/{}", f.second);
    let (status, _, plain) = get(&second).await;
    assert_eq!(status, 200);
    assert!(!plain.contains("name=\"score\"") && !plain.contains("id=\"unscored\""));
    let (_, _, html) = get(&format!("{second}?score=correct")).await;
    assert_eq!(matching(&html), 0);
    assert!(html.contains("id=\"unscored\""));
}

#[tokio::test]
async fn the_run_table_links_each_sample_to_its_case_and_shows_its_score() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let (_, _, html) = get(&format!("{base}/runs/{}?task=case-04", f.run_id)).await;
    assert!(html.contains(&format!(
        "class=\"case-link\" href=\"/runs/{}/cases/case-04\"",
        f.run_id
    )));
    assert!(html.contains("<td class=\"ok\">correct</td>"));
    assert!(html.contains("<td class=\"wrong\">unparseable</td>"));
    // Unscored, the case comes from the task id.
    let (_, _, second) = get(&format!("{base}/runs/{}", f.second)).await;
    assert!(second.contains(&format!("href=\"/runs/{}/cases/case-06\"", f.second)));
    // The sample page links to its case.
    let sample = format!("{base}/runs/{}/samples/1?task=case-07%2Fdx", f.run_id);
    let (_, _, html) = get(&sample).await;
    assert!(html.contains(&format!(
        "id=\"case-link\" href=\"/runs/{}/cases/case-07\"",
        f.run_id
    )));
    assert!(html.contains("<dt>disease group</dt><dd>Vascular</dd>"));
}

#[tokio::test]
async fn a_sample_page_shows_turns_prompt_image_and_score_escaped() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let url = format!("{base}/runs/{}/samples/0?task=case-05%2Fdx", f.run_id);
    let (status, headers, html) = get(&url).await;
    assert_eq!(status, 200, "{html}");
    assert_secure(&headers);
    assert!(
        !html.contains("<script>alert"),
        "the answer's script is escaped"
    );
    assert!(
        !html.contains("<img src=x"),
        "the answer's image tag is escaped"
    );
    assert!(html
        .contains("&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x onerror=alert(1)&gt;"));
    assert!(
        html.contains("What is the diagnosis for case-05/dx?"),
        "the prompt as sent"
    );
    assert!(html.contains(&format!("src=\"/images/{}\"", f.image)));
    assert!(
        html.contains("id=\"score\"") && html.contains("ok (correct)") && html.contains("exact")
    );
    for field in ["openai:test-model", ">120<", ">9<", ">42<"] {
        assert!(html.contains(field), "{field} on the page");
    }
    // The thinking, collapsed and escaped, apart from the answer.
    assert!(
        html.contains("<details class=\"thinking\"><summary>thinking (4 words, 321 reasoning tokens)</summary>"),
        "{html}"
    );
    assert!(!html.contains("<script>alert(5)"));
    assert!(html.contains("Weighing &lt;script&gt;alert(5)&lt;/script&gt; glioma first"));
    let plain = format!("{base}/runs/{}/samples/1?task=case-05%2Fdx", f.run_id);
    let (_, _, html) = get(&plain).await;
    assert!(
        !html.contains("class=\"thinking\""),
        "no thinking, no block"
    );

    let errored = format!("{base}/runs/{}/samples/1?task=case-03/dx", f.run_id);
    let (status, _, html) = get(&errored).await;
    assert_eq!(status, 200);
    assert!(html.contains("timeout") && html.contains("no answer in 60 s"));
    assert!(html.contains("errored (not counted)"));
}

#[tokio::test]
async fn images_are_served_only_for_stored_well_formed_hashes() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let r = client()
        .get(format!("{base}/images/{}", f.image))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_secure(r.headers());
    assert_eq!(r.bytes().await.unwrap().as_ref(), png().as_slice());

    let unknown = "0".repeat(64);
    let upper = f.image.to_uppercase();
    for path in [
        unknown.as_str(),
        upper.as_str(),
        &f.image[..63],
        "..%2F..%2Fetc%2Fpasswd",
        "nmb.sqlite",
    ] {
        let (status, headers, _) = get(&format!("{base}/images/{path}")).await;
        assert_eq!(status, 404, "{path}");
        assert_secure(&headers);
    }
}

#[tokio::test]
async fn unknown_runs_samples_and_pages_are_404() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let run = &f.run_id;
    for path in [
        "/runs/no-such-run".to_string(),
        "/runs/no-such-run/samples/0?task=case-00/dx".to_string(),
        format!("/runs/{run}/samples/7?task=case-00/dx"),
        format!("/runs/{run}/samples/x?task=case-00/dx"),
        format!("/runs/{run}/samples/0?task=nope"),
        "/nothing-here".to_string(),
    ] {
        let (status, headers, html) = get(&format!("{base}{path}")).await;
        assert_eq!(status, 404, "{path}");
        assert_secure(&headers);
        assert!(html.contains("404"), "{path}: {html}");
    }
    let (status, _, _) = get(&format!("{base}/runs/{run}/samples/0")).await;
    assert_eq!(status, 400, "a sample page needs its task");
}

#[tokio::test]
async fn a_token_guards_every_request() {
    let f = fixture();
    let base = start(f.store.clone(), Some("s3cret-token")).await;
    let (status, headers, html) = get(&format!("{base}/")).await;
    assert_eq!(status, 401);
    assert_secure(&headers);
    assert!(!html.contains(&f.run_id));
    let (status, _, _) = get(&format!("{base}/images/{}", f.image)).await;
    assert_eq!(status, 401);

    let bearer = client()
        .get(format!("{base}/"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status().as_u16(), 200);
    let wrong = client()
        .get(format!("{base}/"))
        .bearer_auth("s3cret-tokeN")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);

    let visit = client()
        .get(format!("{base}/?token=s3cret-token"))
        .send()
        .await
        .unwrap();
    assert_eq!(visit.status().as_u16(), 303, "the token leaves the address");
    // Cookies are shared by every port of a host: the cookie is this server's, named by its port.
    let port = base.rsplit(':').next().unwrap();
    let cookie = visit.headers()["set-cookie"].to_str().unwrap().to_string();
    let name = format!("nmb_token_{port}");
    assert!(cookie.starts_with(&format!("{name}=s3cret-token;")) && cookie.contains("HttpOnly"));
    let with_cookie = |cookie: String| {
        client()
            .get(format!("{base}/runs/{}", f.run_id))
            .header("cookie", cookie)
            .send()
    };
    let ours = with_cookie(format!("other=1; {name}=s3cret-token"))
        .await
        .unwrap();
    assert_eq!(ours.status().as_u16(), 200);
    let another_servers = with_cookie("nmb_token_1=s3cret-token".into())
        .await
        .unwrap();
    assert_eq!(another_servers.status().as_u16(), 401);
}

/// Behind a TLS proxy the token's cookie is `__Host-nmb_token`, `Secure`, `Path=/`, no `Domain`: a browser
/// then keeps it to the one origin, whatever else runs on the host's other ports.
#[tokio::test]
async fn behind_tls_the_cookie_is_bound_to_the_origin() {
    let f = fixture();
    let bound = nmb_serve::bind(&ServeOptions {
        port: 0,
        token: Some("s3cret-token".into()),
        behind_tls: true,
        ..ServeOptions::default()
    })
    .await
    .unwrap();
    let base = bound.url().trim_end_matches('/').to_string();
    tokio::spawn(bound.run(f.store.clone()));
    let visit = client()
        .get(format!("{base}/?token=s3cret-token"))
        .send()
        .await
        .unwrap();
    assert_eq!(visit.status().as_u16(), 303);
    let cookie = visit.headers()["set-cookie"].to_str().unwrap().to_string();
    let attributes: Vec<&str> = cookie.split("; ").collect();
    assert_eq!(attributes[0], "__Host-nmb_token=s3cret-token", "{cookie}");
    for wanted in ["Path=/", "Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(attributes.contains(&wanted), "{wanted} in {cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
    let page = client()
        .get(format!("{base}/runs/{}", f.run_id))
        .header("cookie", "__Host-nmb_token=s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let port_named = client()
        .get(format!("{base}/runs/{}", f.run_id))
        .header("cookie", "nmb_token_1=s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(port_named.status().as_u16(), 401);
}

/// A page on another site that rebinds its name to 127.0.0.1 gets nothing: its name is the request's `Host`,
/// and the server answers only to its own address, `localhost` and the names it was given.
#[tokio::test]
async fn only_its_own_host_names_are_answered() {
    let f = fixture();
    let bound = nmb_serve::bind(&ServeOptions {
        port: 0,
        allowed_hosts: vec!["lab-box.example".into()],
        ..ServeOptions::default()
    })
    .await
    .unwrap();
    let base = bound.url().trim_end_matches('/').to_string();
    let port = bound.local_addr().port();
    tokio::spawn(bound.run(f.store.clone()));
    let as_host = |host: String| client().get(format!("{base}/")).header("host", host).send();
    for ok in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "lab-box.example".into(),
    ] {
        let r = as_host(ok.clone()).await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{ok}");
    }
    for refused in [
        format!("rebind.example:{port}"),
        "127.0.0.1.nip.example".into(),
    ] {
        let r = as_host(refused.clone()).await.unwrap();
        assert_eq!(r.status().as_u16(), 421, "{refused}");
        assert_secure(&r.headers().clone());
        let page = r.text().await.unwrap();
        assert!(
            !page.contains(&f.run_id) && page.contains("--allowed-host"),
            "{page}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_reads_a_postgres_store_too() {
    // Skips with a message locally without PostgreSQL's binaries, fails under CI=true.
    let Some(pg) = tokio::task::spawn_blocking(nmb_test_support::postgres::cluster)
        .await
        .unwrap()
    else {
        return;
    };
    let url = pg.fresh_database();
    let f = tokio::task::spawn_blocking(move || {
        fill(tempfile::tempdir().unwrap(), Store::connect(&url).unwrap())
    })
    .await
    .unwrap();
    let base = start(f.store.clone(), None).await;
    let (status, _, list) = get(&format!("{base}/")).await;
    assert_eq!(status, 200);
    assert!(list.contains("0.420 [0.300, 0.550]"));
    let (_, _, run) = get(&format!("{base}/runs/{}?q=needle", f.run_id)).await;
    assert_eq!(rows(&run), 1);
    let (_, _, page2) = get(&format!("{base}/runs/{}?page=2", f.run_id)).await;
    assert_eq!(rows(&page2), 10);
    let (_, _, wrong) = get(&format!(
        "{base}/runs/{}?score=wrong&group=vascular",
        f.run_id
    ))
    .await;
    assert_eq!(rows(&wrong), 14);
    let (status, _, case) = get(&format!("{base}/runs/{}/cases/case-05", f.run_id)).await;
    assert_eq!(status, 200);
    assert!(
        case.contains("&lt;script&gt;alert(4)&lt;/script&gt; glioma")
            && case.contains("<dt>Age</dt>")
    );
    let (status, _, unscored) = get(&format!("{base}/runs/{}/cases/case-06", f.second)).await;
    assert_eq!(status, 200);
    assert!(unscored.contains("id=\"lookup\""));
    let compare = format!("{base}/compare?a={}&b={}&case=case-05", f.run_id, f.second);
    let (status, _, html) = get(&compare).await;
    assert_eq!(status, 200);
    assert!(html.contains("Second model thinks meningioma (case-05/dx 1)"));
    let sample = format!("{base}/runs/{}/samples/0?task=case-05%2Fdx", f.run_id);
    let (status, _, html) = get(&sample).await;
    assert_eq!(status, 200);
    assert!(html.contains("&lt;script&gt;") && html.contains("ok (correct)"));
    let r = client()
        .get(format!("{base}/images/{}", f.image))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn beyond_loopback_it_needs_a_token() {
    let options = ServeOptions {
        host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        port: 0,
        token: None,
        allowed_hosts: Vec::new(),
        behind_tls: false,
        connections: Default::default(),
    };
    let err = nmb_serve::bind(&options).await.err().expect("refused");
    assert!(matches!(err, ServeError::NoToken { .. }), "{err}");
    assert!(err.to_string().contains("--token-file"));
    let blank = ServeOptions {
        token: Some("  ".into()),
        ..options
    };
    assert!(matches!(
        nmb_serve::bind(&blank).await.err(),
        Some(ServeError::EmptyToken)
    ));
}

/// DNS rebinding as a browser does it: Chromium resolves another site's name to 127.0.0.1 and sends that name
/// as `Host`; the viewer answers it with 421, while the same page by `localhost` shows the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_name_gets_nothing_in_chromium() {
    let Some(chromium) = nmb_test_support::browser::chromium() else {
        return;
    };
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let rules = vec!["--host-resolver-rules=MAP rebind.example 127.0.0.1".to_string()];
    let open = |url: String| {
        let (chromium, rules) = (chromium.clone(), rules.clone());
        tokio::task::spawn_blocking(move || {
            nmb_test_support::browser::dump_url(&chromium, &url, &rules).0
        })
    };
    let rebound = open(format!("http://rebind.example:{port}/"))
        .await
        .unwrap();
    assert!(rebound.contains("421"), "{rebound}");
    assert!(!rebound.contains(&f.run_id), "{rebound}");
    let own = open(format!("http://localhost:{port}/")).await.unwrap();
    assert!(own.contains(&f.run_id), "{own}");
}
