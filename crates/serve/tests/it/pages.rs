use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use nmb_serve::{ServeError, ServeOptions, CSP};
use nmb_store::{CallRecord, ChoiceRecord, ErrorInfo, ImageInput, ScoreReportRecord, Store};
use sha2::{Digest, Sha256};

const MODEL: &str = "openai:test-model@http://127.0.0.1:9";
const XSS: &str = "<script>alert(1)</script> and <img src=x onerror=alert(1)>";
const TASKS: usize = 30;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn png() -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend((0..200u32).map(|i| (i * 7) as u8));
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    run_id: String,
    image: String,
}

fn task(i: usize) -> String {
    format!("case-{i:02}/dx")
}

/// 30 tasks × 2 samples: `case-03/dx` sample 1 errored with a timeout, `case-05/dx` sample 0 answers with an
/// XSS payload, `case-07/dx` sample 1 mentions a needle; every prompt shows one image. Scored, with a report.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    fill(dir, store)
}

fn fill(dir: tempfile::TempDir, store: Store) -> Fixture {
    let manifest: nmb_store::Manifest = serde_json::from_value(serde_json::json!({
        "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": "abc",
        "template_id": "depth-v1", "template_hash": "def", "model": MODEL, "display_name": "Test Model",
        "params": {"temperature": 0.7}, "input_mode": "full", "samples": 2, "dropped_inputs": []
    }))
    .unwrap();
    let run_id = store.create_run("cfg", &manifest).unwrap().run_id;
    let bytes = png();
    let image = sha(&bytes);
    let tasks: Vec<String> = (0..TASKS).map(task).collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (t.as_str(), 2)).collect();
    store.plan_samples(&run_id, &plan).unwrap();
    let mut rows = Vec::new();
    for t in &tasks {
        let body = format!(
            r#"{{"messages":[{{"parts":[{{"image":"{image}","mime":"image/png"}},{{"text":"What is the diagnosis for {t}?"}}],"role":"user"}}]}}"#
        );
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
            let call = CallRecord {
                run_id: &run_id,
                task_id: t,
                turn_index: 0,
                prompt_hash: &prompt,
                model: MODEL,
                params_json: r#"{"temperature":0.7}"#,
                template_id: "depth-v1",
                template_hash: "def",
                error: failed.then_some(ErrorInfo {
                    class: "timeout",
                    message: "no answer in 60 s",
                }),
                attempts: if failed { 3 } else { 1 },
                raw: Some("{}"),
                tokens_in: Some(120),
                tokens_out: Some(9),
                latency_ms: Some(42),
                started_ms: 1_000,
                finished_ms: 1_042,
            };
            let choice = ChoiceRecord {
                sample_index: sample,
                choice_index: 0,
                text: (!failed).then_some(text.as_str()),
                error: None,
                final_turn: true,
            };
            store.record_call(&call, &[choice]).unwrap();
            rows.push(nmb_store::SampleScoreRow {
                task_id: t.clone(),
                sample_index: sample,
                case_id: t.split('/').next().unwrap().to_string(),
                family: "differential".into(),
                level: "direct".into(),
                status: if failed { "errored" } else { "ok" }.into(),
                correct: (!failed).then_some(sample == 0),
                matched_rank: (!failed && sample == 0).then_some(1),
                match_method: Some("exact".into()),
                ..Default::default()
            });
        }
    }
    let est = |v: f64, lo: f64, hi: f64| {
        serde_json::json!({"value": v, "ci_low": lo, "ci_high": hi, "level": 0.95,
            "method": "cluster_percentile_bootstrap", "seed": 7, "resamples": 1000, "n": 59})
    };
    let group = |by: &str| {
        serde_json::json!({
            "by": by, "level": if by == "overall" { serde_json::Value::Null } else { "direct".into() },
            "family": if by == "overall" { serde_json::Value::Null } else { "differential".into() },
            "tasks": 30, "cases": 30, "samples": 60, "n": 59, "correct": 30, "errored": 1, "pending": 0,
            "no_reference": 0, "parse_failed": 0, "unresolved": 0, "accuracy": est(0.508, 0.4, 0.6),
            "pass_at_1": {"k": 1, "unbiased_estimator": est(0.42, 0.3, 0.55), "unbiased_tasks": 30,
                          "top_k_in_answer": est(0.51, 0.4, 0.6), "top_k_samples": 59},
            "pass_at_5": {"k": 5, "unbiased_estimator": est(0.81, 0.7, 0.9), "unbiased_tasks": 30,
                          "top_k_in_answer": null, "top_k_samples": 0}
        })
    };
    let report = serde_json::json!({"overall": group("overall"), "by_level_family": [group("level_family")]});
    // The report parses as nmb-score's own type, so the page reads what `nmb score` writes.
    serde_json::from_value::<nmb_score::results::GroupAggregate>(report["overall"].clone())
        .unwrap();
    store
        .save_score_report(&ScoreReportRecord {
            run_id: &run_id,
            config_hash: "score-cfg",
            schema_version: 1,
            report_json: &report.to_string(),
            samples: &rows,
        })
        .unwrap();
    Fixture {
        _dir: dir,
        store: Arc::new(store),
        run_id,
        image,
    }
}

/// The viewer on a free loopback port; returns its base URL (`http://127.0.0.1:PORT`).
async fn start(store: Arc<Store>, token: Option<&str>) -> String {
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

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = client().get(url).send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

fn rows(html: &str) -> usize {
    html.matches("class=\"sample-link\"").count()
}

fn assert_secure(headers: &reqwest::header::HeaderMap) {
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
    let cookie = visit.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("token=s3cret-token;") && cookie.contains("HttpOnly"));
    let with_cookie = client()
        .get(format!("{base}/runs/{}", f.run_id))
        .header("cookie", "other=1; token=s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status().as_u16(), 200);
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
