//! What the review tests share: the store they build through the public API, the server on loopback, and a
//! reviewer's browser as plain HTTP requests.

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_review::{assign, AssignOptions, Candidate};
use nmb_store::{
    CallRecord, ChoiceRecord, ImageInput, NewReviewSet, NewReviewer, ScoreReportRecord, Store,
};
use reqwest::header::HeaderMap;
use sha2::{Digest, Sha256};

pub(super) const MODEL: &str = "openai:secret-model-x@http://127.0.0.1:9";
pub(super) const DISPLAY: &str = "Secret Model X";
pub(super) const XSS: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";
pub(super) const TASKS: usize = 12;
/// A judge's BERTScore of every sample: it must never reach a review page.
pub(super) const JUDGE_SCORE: f64 = 0.8765;

pub(super) fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A PNG signature and bytes of its own for each case, so each item's prompt has a different image.
pub(super) fn png(seed: usize) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend((0..64u32).map(|i| (i as usize * 7 + seed) as u8));
    out
}

pub(super) fn task(i: usize) -> String {
    if i == 4 {
        "case-04/consult".to_string()
    } else {
        format!("case-{i:02}/dx")
    }
}

/// The thinking stored before an answer: it carries the answer, so the XSS answer's thinking carries the
/// payload too.
pub(super) fn thinking(answer: &str) -> String {
    format!("Pondering before answering: {answer}")
}

/// The answer stored for a task (the consult's last step).
pub(super) fn answer(i: usize) -> String {
    match i {
        3 => XSS.to_string(),
        4 => "second-step answer: cerebral venous thrombosis".to_string(),
        _ => format!("Answer {i:02}: glioma number {i:02}"),
    }
}

pub(super) struct Fixture {
    pub(super) _dir: tempfile::TempDir,
    pub(super) store: Arc<Store>,
    pub(super) run_id: String,
    pub(super) set: SetInfo,
}

impl std::ops::Deref for Fixture {
    type Target = SetInfo;
    fn deref(&self) -> &SetInfo {
        &self.set
    }
}

/// A review set as the test made it.
pub(super) struct SetInfo {
    pub(super) set_id: String,
    /// Reviewer name to token.
    pub(super) tokens: BTreeMap<String, String>,
    /// Reviewer name to their item numbers in their order.
    pub(super) lists: BTreeMap<String, Vec<u32>>,
    /// Item number to task index.
    pub(super) items: BTreeMap<u32, usize>,
    pub(super) shared: Vec<u32>,
}

impl SetInfo {
    /// The position (1-based) of task `i` in a reviewer's list.
    pub(super) fn position_of(&self, reviewer: &str, i: usize) -> Option<u32> {
        let list = &self.lists[reviewer];
        list.iter()
            .position(|n| self.items[n] == i)
            .map(|p| p as u32 + 1)
    }

    pub(super) fn task_at(&self, reviewer: &str, position: u32) -> usize {
        self.items[&self.lists[reviewer][position as usize - 1]]
    }
}

pub(super) fn review_fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    fill(dir, store)
}

/// 12 tasks, one answered sample each, every answer after its [`thinking`]: `case-03/dx` answers with a
/// script, `case-04/consult` has two turns; scored with a judge's numbers. Then a review set of all 12 for `ann`
/// and `bob`, a quarter shared, that hides the thinking.
pub(super) fn fill(dir: tempfile::TempDir, store: Store) -> Fixture {
    let manifest: nmb_store::Manifest = serde_json::from_value(serde_json::json!({
        "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": "abc",
        "template_id": "depth-v1", "template_hash": "def", "model": MODEL, "display_name": DISPLAY,
        "params": {"temperature": 0.7}, "input_mode": "full", "samples": 1, "dropped_inputs": []
    }))
    .unwrap();
    let run_id = store.create_run("cfg", &manifest).unwrap().run_id;
    let tasks: Vec<String> = (0..TASKS).map(task).collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (t.as_str(), 1)).collect();
    store.plan_samples(&run_id, &plan).unwrap();
    let mut rows = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let bytes = png(i);
        let image = sha(&bytes);
        let first = format!(
            r#"{{"messages":[{{"parts":[{{"text":"You are a neurologist."}}],"role":"system"}},{{"parts":[{{"image":"{image}","mime":"image/png"}},{{"text":"Question for {t}: what is the diagnosis?"}}],"role":"user"}}]}}"#
        );
        let img = ImageInput {
            sha256: &image,
            mime: "image/png",
            bytes: &bytes,
        };
        store
            .put_prompt(&sha(first.as_bytes()), &first, &[img])
            .unwrap();
        if i == 4 {
            record(
                &store,
                &run_id,
                t,
                0,
                &first,
                "first-step answer: a venous infarct",
                false,
            );
            let second = first.trim_end_matches("]}").to_string()
                + r#",{"parts":[{"text":"first-step answer: a venous infarct"}],"role":"assistant"},{"parts":[{"text":"Follow-up: the venogram shows no flow in the sinus. Now?"}],"role":"user"}]}"#;
            let img = ImageInput {
                sha256: &image,
                mime: "image/png",
                bytes: &bytes,
            };
            store
                .put_prompt(&sha(second.as_bytes()), &second, &[img])
                .unwrap();
            record(&store, &run_id, t, 1, &second, &answer(i), true);
        } else {
            record(&store, &run_id, t, 0, &first, &answer(i), true);
        }
        rows.push(nmb_store::SampleScoreRow {
            task_id: t.clone(),
            sample_index: 0,
            case_id: format!("case-{i:02}"),
            family: "differential".into(),
            level: "direct".into(),
            status: "ok".into(),
            correct: Some(i % 2 == 0),
            bertscore_f: Some(JUDGE_SCORE),
            ..Default::default()
        });
    }
    store
        .save_score_report(&ScoreReportRecord {
            run_id: &run_id,
            config_hash: "score-cfg",
            schema_version: 1,
            report_json: "{}",
            samples: &rows,
        })
        .unwrap();
    let set = review_set(&store, &run_id, &["ann", "bob"], 0.25, false);
    Fixture {
        _dir: dir,
        store: Arc::new(store),
        run_id,
        set,
    }
}

pub(super) fn record(
    store: &Store,
    run_id: &str,
    task_id: &str,
    turn: u32,
    prompt: &str,
    text: &str,
    last: bool,
) {
    let prompt_hash = sha(prompt.as_bytes());
    let call = CallRecord {
        tokens: Default::default(),
        run_id,
        task_id,
        turn_index: turn,
        prompt_hash: &prompt_hash,
        model: MODEL,
        params_json: r#"{"temperature":0.7}"#,
        template_id: "depth-v1",
        template_hash: "def",
        error: None,
        attempts: 1,
        raw: Some("{}"),
        tokens_in: Some(120),
        tokens_out: Some(9),
        latency_ms: Some(42),
        started_ms: 1_000,
        finished_ms: 1_042,
        batch_id: None,
    };
    let thought = thinking(text);
    let choice = ChoiceRecord {
        thinking: Some(&thought),
        finish_reason: None,
        sample_index: 0,
        choice_index: 0,
        text: Some(text),
        error: None,
        final_turn: last,
    };
    store.record_call(&call, &[choice]).unwrap();
}

/// A review set over every sample of the run, through `nmb_review::assign`, with the built-in rubric; its
/// reviewers see the thinking where `show_thinking`.
pub(super) fn review_set(
    store: &Store,
    run_id: &str,
    reviewers: &[&str],
    overlap: f64,
    show_thinking: bool,
) -> SetInfo {
    let candidates = (0..TASKS)
        .map(|i| Candidate {
            run_id: run_id.to_string(),
            task_id: task(i),
            sample_index: 0,
        })
        .collect();
    let options = AssignOptions {
        reviewers: reviewers.iter().map(|r| r.to_string()).collect(),
        per_reviewer: None,
        overlap,
        seed: 7,
    };
    let a = assign(candidates, &options).unwrap();
    let tokens: BTreeMap<String, String> = reviewers
        .iter()
        .map(|r| (r.to_string(), nmb_review::new_token()))
        .collect();
    let rubric = nmb_results::Rubric::builtin();
    let set_id = nmb_review::new_set_id();
    store
        .create_review_set(&NewReviewSet {
            set_id: set_id.clone(),
            rubric_hash: rubric.hash.clone(),
            rubric: nmb_results::rubric::BUILTIN_NEUROLOGY_V1.to_string(),
            criteria: None,
            seed: 7,
            overlap,
            runs: vec![run_id.to_string()],
            items: a.items.clone(),
            reviewers: a
                .reviewers
                .iter()
                .map(|(name, items)| NewReviewer {
                    reviewer: name.clone(),
                    token_sha256: nmb_review::hash_token(&tokens[name]),
                    items: items.clone(),
                })
                .collect(),
            show_thinking,
        })
        .unwrap();
    let index_of = |t: &str| (0..TASKS).find(|i| task(*i) == t).unwrap();
    SetInfo {
        set_id,
        tokens,
        lists: a.reviewers.into_iter().collect(),
        items: a
            .items
            .iter()
            .map(|i| (i.item_no, index_of(&i.task_id)))
            .collect(),
        shared: a
            .items
            .iter()
            .filter(|i| i.shared)
            .map(|i| i.item_no)
            .collect(),
    }
}

pub(super) use crate::pages::{client, start};

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: String,
}

impl Reply {
    pub(super) fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

pub(super) async fn send(r: reqwest::RequestBuilder) -> Reply {
    let r = r.send().await.unwrap();
    Reply {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap(),
    }
}

/// A reviewer's browser: the server, the set, and the cookie it was given (empty before).
pub(super) struct Browser {
    pub(super) base: String,
    pub(super) set: String,
    pub(super) cookie: String,
}

impl Browser {
    pub(super) fn new(base: &str, set: &str) -> Browser {
        Browser {
            base: base.to_string(),
            set: set.to_string(),
            cookie: String::new(),
        }
    }

    /// Opens the reviewer's link and keeps the cookie it sets.
    pub(super) async fn enter(base: &str, set: &str, token: &str) -> Browser {
        let mut b = Browser::new(base, set);
        let r = b.get(&format!("?token={token}")).await;
        assert_eq!(r.status, 303, "{}", r.body);
        let cookie = r.headers["set-cookie"].to_str().unwrap();
        b.cookie = cookie.split(';').next().unwrap().to_string();
        b
    }

    pub(super) fn url(&self, rest: &str) -> String {
        format!("{}/review/{}{rest}", self.base, self.set)
    }

    pub(super) async fn get(&self, rest: &str) -> Reply {
        send(client().get(self.url(rest)).header("cookie", &self.cookie)).await
    }

    pub(super) async fn post(&self, position: u32, form: &str, extra: &[(&str, &str)]) -> Reply {
        let mut r = client()
            .post(self.url(&format!("/items/{position}")))
            .header("cookie", &self.cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_string());
        for (k, v) in extra {
            r = r.header(*k, *v);
        }
        send(r).await
    }

    /// The hidden form key on an item page.
    pub(super) async fn csrf(&self, position: u32) -> String {
        let page = self.get(&format!("/items/{position}")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        csrf_of(&page.body)
    }
}

/// A GET sent byte for byte, and the whole response.
pub(super) async fn raw_get(base: &str, path: &str, cookie: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn csrf_of(html: &str) -> String {
    let start = html.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    html[start..].split('"').next().unwrap().to_string()
}

pub(super) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A grade form: `csrf=…&verdict=…&score.DIM=…&taxonomy=…&comment=…`.
pub(super) fn grade_form(
    csrf: &str,
    verdict: &str,
    scores: &[(&str, &str)],
    taxonomy: &str,
    comment: &str,
) -> String {
    let mut parts = vec![format!("csrf={csrf}"), format!("verdict={}", enc(verdict))];
    for (dim, v) in scores {
        parts.push(format!("score.{dim}={}", enc(v)));
    }
    parts.push(format!("taxonomy={}", enc(taxonomy)));
    parts.push(format!("comment={}", enc(comment)));
    parts.join("&")
}

/// Every grade row a reviewer stored for task `i`.
pub(super) fn history(f: &Fixture, reviewer: &str, i: usize) -> Vec<nmb_store::StoredGrade> {
    let item_no = *f
        .items
        .iter()
        .find(|(n, t)| **t == i && f.lists[reviewer].contains(n))
        .unwrap()
        .0;
    f.store.grade_history(&f.set_id, reviewer, item_no).unwrap()
}
