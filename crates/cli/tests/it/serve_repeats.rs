//! Judge repeats in `nmb serve`: a run scored with `--judge-repeats 3` by a judge whose grade moves with the
//! seed (the noisy judge of `judge_repeats`, its median repeat in the middle), served over loopback. The run page lists the score report's
//! unstable items with links, counts them and says what the repeats added; an unstable answer's page shows each
//! repeat's grade with its seed and judge call, the median used, and the mark; a stable answer's page says it is
//! stable; a steady judge's run says in one sentence that nothing is unstable; scored again with one asking, the
//! run page has no repeats section. Then a person in Chromium follows the run page's list to an answer and reads
//! each repeat's grade. Every expected number comes from the score report's JSON, not from this file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fantoccini::Locator;
use nmb_fake_server::{default_reply, Config, FakeServer, ReceivedRequest, Reply};
use nmb_test_support::browser::{screenshot_dir, WebDriver};
use serde_json::Value;

use super::judge_repeats::noisy_judge;
use super::score_cli::{judge as steady_judge, nmb, ok_json, stored_run};
use super::serve_browser::{start_server, wait_for_text};
use crate::common::http_get;

/// Model text that must reach the pages only escaped.
const HOSTILE: &str = "<img src=x onerror=alert(1)>Zebra syndrome";

/// The fake model's default answers, with one diagnosis replaced by markup in a term the rules do not know, so
/// the judges are asked about it.
fn hostile_model(req: &ReceivedRequest) -> Reply {
    match default_reply(req) {
        Reply::Texts(texts) => Reply::Texts(
            texts
                .into_iter()
                .map(|t| t.replace("Glioblastoma", HOSTILE))
                .collect(),
        ),
        other => other,
    }
}

/// The noisy judge of `judge_repeats`, except that its rubric grades put the median of seeds 0, 1 and 2 in the
/// middle (seed 0 high, seed 1 low, seed 2 between), so a page showing the first repeat as the median is caught:
/// on even items the repeats span 2 points (unstable), on odd ones 1 (stable).
fn seed_judge(req: &ReceivedRequest) -> Reply {
    let text = req.all_text();
    if !text.contains("Grade the MODEL ANSWER") {
        return noisy_judge(req);
    }
    let seed = req.params.seed.unwrap_or(0);
    let item = u64::from_str_radix(&req.conversation_sha256[..8], 16).unwrap_or(0);
    let base = 1 + item % 3;
    let step = if item.is_multiple_of(2) {
        [2, 0, 1]
    } else {
        [1, 0, 1]
    };
    let s = base + step[(seed % 3) as usize];
    Reply::Texts(vec![format!(
        r#"{{"scores": {{"diagnostic_correctness": {s}, "multimodal_integration": 3, "differential_reasoning": {base}, "lesion_localisation": 3, "clinical_safety": 4}}, "overall": {s}, "rationale": "seed {seed}"}}"#
    )])
}

/// A stored run of the sample suite scored by a judge answering with `responder`, asked `repeats` times.
struct Scored {
    _servers: (FakeServer, FakeServer),
    runs: PathBuf,
    run_id: String,
    judge: String,
    report: Value,
}

fn scored(dir: &Path, model: &str, responder: fn(&ReceivedRequest) -> Reply) -> Scored {
    let model_server = FakeServer::start_in_background(
        Config {
            responder: Arc::new(hostile_model),
            ..Config::default()
        },
        1,
    )
    .unwrap();
    let judge_server = FakeServer::start_in_background(
        Config {
            responder: Arc::new(responder),
            ..Config::default()
        },
        1,
    )
    .unwrap();
    let run_id = stored_run(dir, &model_server, model);
    let judge = format!("openai:judge-x@{}/v1", judge_server.url());
    let mut s = Scored {
        _servers: (model_server, judge_server),
        runs: dir.to_path_buf(),
        run_id,
        judge,
        report: Value::Null,
    };
    s.report = s.score(3);
    s
}

impl Scored {
    fn score(&self, repeats: u32) -> Value {
        ok_json(&nmb(&[
            "score",
            &self.run_id,
            "--runs-dir",
            self.runs.to_str().unwrap(),
            "--judge",
            &self.judge,
            "--judge-repeats",
            &repeats.to_string(),
            "--resamples",
            "200",
            "--no-bertscore",
            "--json",
        ]))
    }

    fn sample(&self, task: &str, index: u64) -> &Value {
        self.report["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["task_id"] == task && s["sample_index"] == index)
            .expect("the report has the sample")
    }
}

/// `/runs/RUN/samples/INDEX?task=TASK` as the pages write it (before HTML escaping).
fn sample_path(run_id: &str, task: &str, index: u64) -> String {
    format!(
        "/runs/{}/samples/{index}?task={}",
        encode(run_id),
        encode(task)
    )
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The rows (cell texts, tags stripped) and links of the table with `id` in `html`, header row left out.
fn table(html: &str, id: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let start = html
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id} in {html}"));
    let end = start + html[start..].find("</table>").unwrap();
    let t = &html[start..end];
    let rows = t
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| strip_tags(&cell[cell.find('>').unwrap() + 1..]))
                .collect()
        })
        .collect();
    let links = t
        .split("href=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
        .collect();
    (rows, links)
}

fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.trim().to_string()
}

fn number(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "–".to_string(), |n| format!("{n}"))
}

/// What the answer page's table of judge 0's repeats must hold: a row per repeat (number, seed, call, each
/// dimension, overall), the median row and the spread row.
fn expected_rows(sample: &Value, seeds: &[u64]) -> Vec<Vec<String>> {
    let rubric = &sample["rubric"];
    let verdict = &rubric["judges"][0];
    let dims: Vec<&str> = rubric["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dimension"].as_str().unwrap())
        .collect();
    let repeats = verdict["repeats"].as_array().unwrap();
    let mut rows: Vec<Vec<String>> = repeats
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = vec![
                (i + 1).to_string(),
                seeds[i].to_string(),
                "judge call".to_string(),
            ];
            row.extend(dims.iter().map(|d| number(&r["scores"][d])));
            row.push(number(&r["overall"]));
            row
        })
        .collect();
    let mut median = vec!["median (used)".to_string(), String::new(), String::new()];
    median.extend(dims.iter().map(|d| number(&verdict["scores"][d])));
    median.push(number(&verdict["overall"]));
    rows.push(median);
    let spread = |get: &dyn Fn(&Value) -> u64| {
        let v: Vec<u64> = repeats.iter().map(get).collect();
        (v.iter().max().unwrap() - v.iter().min().unwrap()).to_string()
    };
    let mut spreads = vec!["spread".to_string(), String::new(), String::new()];
    spreads.extend(
        dims.iter()
            .map(|d| spread(&|r: &Value| r["scores"][d].as_u64().unwrap())),
    );
    spreads.push(spread(&|r: &Value| r["overall"].as_u64().unwrap()));
    rows.push(spreads);
    rows
}

/// `nmb serve` on `runs`, and its URL without the trailing `/`, for paths to follow.
fn served(runs: &Path) -> (super::serve_browser::Server, String) {
    let (server, url) = start_server(runs);
    (server, url.trim_end_matches('/').to_string())
}

fn seeds(report: &Value) -> Vec<u64> {
    report["stability"]["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect()
}

#[test]
fn the_viewer_lists_unstable_items_and_shows_each_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let noisy = scored(&dir.path().join("noisy"), "model-a", seed_judge);
    let steady = scored(&dir.path().join("steady"), "model-b", steady_judge);
    let report = &noisy.report;
    let stability = &report["stability"];
    let unstable = stability["unstable"].as_array().unwrap();
    assert!(
        !unstable.is_empty(),
        "the noisy judge leaves items unstable"
    );
    let seeds = seeds(report);

    let (server, url) = served(&noisy.runs);
    let run_page = http_get(&format!("{url}/runs/{}", noisy.run_id));
    // The count and the cost, in words.
    assert!(
        run_page.contains(&format!(
            "<p id=\"unstable-count\">{} unstable item",
            unstable.len()
        )),
        "{run_page}"
    );
    let added = &stability["added"][0];
    assert!(
        run_page.contains(&format!(
            "the repeats added {} calls",
            added["calls"].as_u64().unwrap()
        )),
        "{run_page}"
    );
    // Every unstable item, linked to its answer, with each repeat's score by seed.
    let (rows, links) = table(&run_page, "unstable");
    assert_eq!(rows.len(), unstable.len(), "{run_page}");
    for (u, (row, link)) in unstable.iter().zip(rows.iter().zip(&links)) {
        let task = u["task_id"].as_str().unwrap();
        let index = u["sample_index"].as_u64().unwrap();
        assert_eq!(link, &sample_path(&noisy.run_id, task, index));
        let by_seed: Vec<String> = u["scores"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&seeds)
            .map(|(v, s)| format!("seed {s}: {}", number(v)))
            .collect();
        assert_eq!(row[0], task);
        assert_eq!(row[4], by_seed.join(" · "), "{row:?}");
    }

    // An unstable answer: each repeat's grade with its seed, the median, the spread and the mark.
    let u = &unstable[0];
    let (task, index) = (
        u["task_id"].as_str().unwrap(),
        u["sample_index"].as_u64().unwrap(),
    );
    let page = http_get(&format!("{url}{}", sample_path(&noisy.run_id, task, index)));
    assert!(page.contains("<p class=\"unstable\">Unstable"), "{page}");
    let (rows, calls) = table(&page, "repeats-0");
    let verdict = &noisy.sample(task, index)["rubric"]["judges"][0];
    assert_ne!(
        verdict["overall"], verdict["repeats"][0]["overall"],
        "the median should differ from the first repeat here: {verdict}"
    );
    assert_eq!(rows, expected_rows(noisy.sample(task, index), &seeds));
    // Each repeat's link opens that repeat's own stored judge call.
    assert_eq!(calls.len(), seeds.len());
    for (call, seed) in calls.iter().zip(&seeds) {
        let judge_page = http_get(&format!("{url}{call}"));
        assert!(
            judge_page.contains(&format!("seed {seed}&quot;")),
            "{call}: {judge_page}"
        );
    }

    // A graded answer no repeat moved by 2 points is marked stable.
    let stable = report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["rubric"]["judges"][0]["repeats"].is_array()
                && !unstable
                    .iter()
                    .any(|u| u["task_id"] == s["task_id"] && u["sample_index"] == s["sample_index"])
        })
        .expect("a stable graded answer");
    let page = http_get(&format!(
        "{url}{}",
        sample_path(
            &noisy.run_id,
            stable["task_id"].as_str().unwrap(),
            stable["sample_index"].as_u64().unwrap()
        )
    ));
    assert!(page.contains("<p class=\"stable\">Stable"), "{page}");
    assert!(!page.contains("class=\"unstable\""), "{page}");

    // The model's markup in a match question is shown escaped, never as markup.
    let hostile = report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["diagnosis"]["candidates"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["diagnosis"] == HOSTILE && c["judge"].is_object())
            })
        })
        .expect("a judged candidate with markup");
    let page = http_get(&format!(
        "{url}{}",
        sample_path(
            &noisy.run_id,
            hostile["task_id"].as_str().unwrap(),
            hostile["sample_index"].as_u64().unwrap()
        )
    ));
    let (rows, _) = table(&page, "match-repeats");
    let row = rows
        .iter()
        .find(|r| r[0].contains("&lt;img src=x onerror=alert(1)&gt;Zebra syndrome"))
        .unwrap_or_else(|| panic!("the question, escaped: {page}"));
    assert!(!page.contains("<img src=x"), "{page}");
    // Its row holds each repeat's yes/no by seed and the median the jury used.
    let verdict = &hostile["diagnosis"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["diagnosis"] == HOSTILE)
        .unwrap()["judge"]["verdicts"][0];
    let yes_no = |v: &Value| match v.as_bool() {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    };
    let by_seed: Vec<String> = verdict["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&seeds)
        .map(|(v, s)| format!("seed {s}: {}", yes_no(v)))
        .collect();
    assert_eq!(row[2], by_seed.join(" · "), "{row:?}");
    assert_eq!(row[3], yes_no(&verdict["equivalent"]), "{row:?}");
    drop(server);

    // A steady judge: one plain sentence, no list.
    let (server, url) = served(&steady.runs);
    let run_page = http_get(&format!("{url}/runs/{}", steady.run_id));
    assert!(run_page.contains("<p id=\"unstable-none\">"), "{run_page}");
    assert!(!run_page.contains("id=\"unstable\""), "{run_page}");
    // Asked once, the latest report has no repeats, and the run page no section.
    let once = steady.score(1);
    assert!(once.get("stability").is_none());
    let run_page = http_get(&format!("{url}/runs/{}", steady.run_id));
    assert!(!run_page.contains("id=\"repeats\""), "{run_page}");
    assert!(run_page.contains("id=\"manifest\""), "{run_page}");
    drop(server);
}

#[test]
fn a_person_follows_an_unstable_item_to_each_repeats_grade() {
    let dir = tempfile::tempdir().unwrap();
    let noisy = scored(dir.path(), "model-a", seed_judge);
    let (server, url) = served(&noisy.runs);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(browse(&url, &noisy));
    drop(server);
}

async fn browse(url: &str, noisy: &Scored) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    c.goto(&format!("{url}/runs/{}", noisy.run_id))
        .await
        .unwrap();
    let unstable = noisy.report["stability"]["unstable"].as_array().unwrap();
    let count = wait_for_text(c, "#unstable-count", |t| !t.is_empty()).await;
    assert!(
        count.starts_with(&format!("{} unstable item", unstable.len())),
        "{count}"
    );
    // The last item of the list, so that the first link on the page would not do.
    let u = unstable.last().unwrap();
    let (task, index) = (
        u["task_id"].as_str().unwrap(),
        u["sample_index"].as_u64().unwrap(),
    );
    let links = c.find_all(Locator::Css("#unstable a")).await.unwrap();
    assert_eq!(links.len(), unstable.len());
    links.last().unwrap().click().await.unwrap();
    let mark = wait_for_text(c, "p.unstable", |t| t.starts_with("Unstable")).await;
    assert!(mark.starts_with("Unstable"), "{mark}");
    let current = c.current_url().await.unwrap();
    assert!(
        current
            .as_str()
            .ends_with(&sample_path(&noisy.run_id, task, index)),
        "{current}"
    );
    // The repeats as the person reads them: one row per repeat, then the median and the spread.
    let expected = expected_rows(noisy.sample(task, index), &seeds(&noisy.report));
    let rows = c.find_all(Locator::Css("#repeats-0 tr")).await.unwrap();
    let mut shown = Vec::new();
    for row in rows.iter().skip(1) {
        let mut cells = Vec::new();
        for cell in row.find_all(Locator::Css("td")).await.unwrap() {
            cells.push(cell.text().await.unwrap().trim().to_string());
        }
        shown.push(cells);
    }
    assert_eq!(shown, expected);
    let png = c.screenshot().await.unwrap();
    let path = screenshot_dir().join("serve-repeats.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
    driver.close().await;
}

/// `nmb review plan` puts the items a judge is unstable on across its repeats first (one judge, so none is
/// first for disagreement), the widest repeat spread first.
#[test]
fn review_plan_puts_unstable_items_first() {
    let dir = tempfile::tempdir().unwrap();
    let noisy = scored(&dir.path().join("noisy"), "model-a", seed_judge);
    let runs = noisy.runs.to_str().unwrap();
    let set = ok_json(&nmb(&[
        "review",
        "create",
        &noisy.run_id,
        "--runs-dir",
        runs,
        "--reviewers",
        "kim",
        "--per-reviewer",
        "50",
        "--overlap",
        "0",
        "--json",
    ]));
    let set_id = set["set_id"].as_str().unwrap();
    // A clinician grades the first ten items, so the plan has reviews to calibrate from.
    let store = crate::common::store(&noisy.runs);
    let hash = store.review_set(set_id).unwrap().unwrap().rubric_hash;
    let mut reviewed = std::collections::BTreeSet::new();
    for position in 1..=10 {
        let a = store
            .assigned_item(set_id, "kim", position)
            .unwrap()
            .unwrap();
        let grade = nmb_store::Grade {
            verdict: Some(
                if position % 2 == 0 {
                    "correct"
                } else {
                    "incorrect"
                }
                .into(),
            ),
            scores: Default::default(),
            taxonomy: None,
            comment: None,
            criteria: Default::default(),
        };
        store
            .append_grade(set_id, "kim", a.item.item_no, &hash, &grade)
            .unwrap();
        reviewed.insert(format!(
            "{}/{}#{}",
            a.item.run_id, a.item.task_id, a.item.sample_index
        ));
    }
    let plan = ok_json(&nmb(&[
        "review",
        "plan",
        &noisy.run_id,
        "--runs-dir",
        runs,
        "--target-ci",
        "0.05",
        "--first",
        "1000",
        "--json",
    ]));
    let first: Vec<&str> = plan["review_first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut spread: BTreeMap<String, f64> = BTreeMap::new();
    for u in noisy.report["stability"]["unstable"].as_array().unwrap() {
        let key = format!(
            "{}/{}#{}",
            noisy.run_id,
            u["task_id"].as_str().unwrap(),
            u["sample_index"]
        );
        if !reviewed.contains(&key) {
            let s = spread.entry(key).or_insert(0.0);
            *s = s.max(u["spread"].as_f64().unwrap());
        }
    }
    assert!(first.iter().all(|k| !reviewed.contains(*k)), "{first:?}");
    assert!(!spread.is_empty() && first.len() > spread.len(), "{plan}");
    let (head, tail) = first.split_at(spread.len());
    assert!(
        head.iter().all(|k| spread.contains_key(*k)),
        "unstable items first: {head:?} against {spread:?}"
    );
    assert!(tail.iter().all(|k| !spread.contains_key(*k)), "{tail:?}");
    let spreads: Vec<f64> = head.iter().map(|k| spread[*k]).collect();
    assert!(
        spreads.windows(2).all(|w| w[0] >= w[1]),
        "widest spread first: {spreads:?}"
    );
}
