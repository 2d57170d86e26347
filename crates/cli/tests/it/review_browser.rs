//! The reviewer pages of `nmb serve` in headless Chromium through WebDriver, as a clinician would use them: a run
//! of the `sample` suite against the fake server (whose every answer carries a script-injection payload), a
//! review set made by `nmb review create --json`, and then (2) grading by keyboard only, a reload and resuming,
//! (3) one reviewer's token reaching neither another's items nor grades, and no token reaching anything, and
//! (4) the payload running nothing, in an answer or in a reviewer's own comment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::{Client, Locator};
use nmb_fake_server::{default_reply, Config, FakeServer, Reply, Wire};
use nmb_test_support::browser::{screenshot_dir, WebDriver};
use serde_json::Value;

use crate::common::*;
use crate::serve_browser::{start_server, wait_for_text, Server};

/// Appended to every answer: each part would change the page if it ran.
const PAYLOAD: &str = "<script>document.title='pwned'</script>\
    <img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">\
    <svg onload=\"document.body.setAttribute('data-pwned','svg')\"></svg>\"'><b onmouseover=alert(1)>bold</b>";
/// What a reviewer might paste into a comment.
const COMMENT: &str =
    "</textarea><script>document.title='pwned'</script><img src=x onerror=alert(1)>";
/// The TAB key in WebDriver's key codes.
pub(crate) const TAB: char = '\u{e004}';

/// A scored-free run of 12 sample tasks, the viewer-less server on it, and a review set for `ann` and `bob`.
pub(crate) struct Review {
    _dir: tempfile::TempDir,
    _fake: FakeServer,
    _server: Server,
    pub(crate) runs: PathBuf,
    pub(crate) base: String,
    pub(crate) set_id: String,
    pub(crate) run_id: String,
    /// Each reviewer's name, link and number of items.
    reviewers: Vec<(String, String, u32)>,
}

impl Review {
    pub(crate) fn link(&self, name: &str) -> &str {
        &self.reviewers.iter().find(|r| r.0 == name).unwrap().1
    }

    pub(crate) fn items(&self, name: &str) -> u32 {
        self.reviewers.iter().find(|r| r.0 == name).unwrap().2
    }

    fn page(&self, rest: &str) -> String {
        format!("{}/review/{}{rest}", self.base, self.set_id)
    }
}

pub(crate) fn setup() -> Review {
    setup_with(&[], None)
}

/// [`setup`] with `extra` arguments to `nmb review create`, and `fake` answering the model's calls (a
/// responder of the default answers with the payload when `None`).
pub(crate) fn setup_with(extra: &[&str], fake: Option<FakeServer>) -> Review {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let fake = fake.unwrap_or_else(payload_server);
    let model = model_spec(Wire::OpenAi, &fake);
    let out = json_of(&nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &model,
            "--samples",
            "1",
            "--limit",
            "12",
            "--no-bertscore",
            "--json",
            "-q",
        ],
    ));
    let run_id = out["run_id"].as_str().expect("a run id").to_string();
    let (server, url) = start_server(&runs);
    let created = json_of(&nmb(
        &runs,
        &[
            "review",
            "create",
            &run_id,
            "--reviewers",
            "ann,bob",
            "--overlap",
            "0.25",
            "--seed",
            "3",
            "--url",
            &url,
            "--json",
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    ));
    let reviewers = created["reviewers"]
        .as_array()
        .expect("reviewers")
        .iter()
        .map(|r: &Value| {
            (
                r["reviewer"].as_str().unwrap().to_string(),
                r["url"].as_str().unwrap().to_string(),
                r["items"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    Review {
        _dir: dir,
        _fake: fake,
        _server: server,
        runs,
        base: url.trim_end_matches('/').to_string(),
        set_id: created["set_id"].as_str().unwrap().to_string(),
        run_id,
        reviewers,
    }
}

/// The model's server: the default answers, each with [`PAYLOAD`] appended.
fn payload_server() -> FakeServer {
    server(Config {
        responder: Arc::new(|req| match default_reply(req) {
            Reply::Texts(texts) => Reply::Texts(
                texts
                    .into_iter()
                    .map(|t| format!("{t} {PAYLOAD}"))
                    .collect(),
            ),
            other => other,
        }),
        ..Config::default()
    })
}

/// Presses keys one after another, as a person would (each to whatever has the focus).
pub(crate) async fn press(c: &Client, keys: &str) {
    let mut actions = KeyActions::new("keyboard".into());
    for k in keys.chars() {
        actions = actions
            .then(KeyAction::Down { value: k })
            .then(KeyAction::Up { value: k });
    }
    c.perform_actions(actions).await.unwrap();
}

/// Waits until the page shows item `position` of `total`.
pub(crate) async fn at_item(c: &Client, position: u32, total: u32) {
    let want = format!("{position} / {total}");
    let shown = wait_for_text(c, "#progress", |t| t == want).await;
    if shown != want {
        let page = c.source().await.unwrap_or_default();
        let at = c
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default();
        panic!("expected item {want}, found {shown:?} at {at}:\n{page}");
    }
}

/// The newest grade of each of a reviewer's positions, from the store.
pub(crate) fn grades(runs: &Path, set: &str, reviewer: &str) -> Vec<Option<nmb_store::Grade>> {
    let store = store(runs);
    let latest = store.latest_grades(set).unwrap();
    let mut out = Vec::new();
    let mut position = 1;
    while let Some(a) = store.assigned_item(set, reviewer, position).unwrap() {
        out.push(
            latest
                .iter()
                .find(|g| g.reviewer == reviewer && g.item_no == a.item.item_no)
                .map(|g| g.grade.clone()),
        );
        position += 1;
    }
    out
}

/// The keys that grade one item: a verdict, then (unless skipped) Tab into the rubric and a digit per row.
fn keys_for(position: u32) -> (&'static str, &'static str, String) {
    let (key, verdict) = match position % 4 {
        1 => ("1", "correct"),
        2 => ("2", "partly"),
        3 => ("3", "incorrect"),
        _ => ("s", "skip"),
    };
    // Five dimensions and the overall grade; the digits differ per item so a mix-up shows.
    let digits: String = (0..6)
        .map(|d| char::from(b'0' + ((position + d) % 6) as u8))
        .collect();
    (key, verdict, digits)
}

#[test]
fn a_reviewer_grades_by_keyboard_reloads_and_resumes() {
    let r = setup();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(grade_by_keyboard(&r));
}

async fn grade_by_keyboard(r: &Review) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    let total = r.items("ann");
    assert!(total >= 7, "ann has {total} items");
    c.goto(r.link("ann")).await.unwrap();
    at_item(c, 1, total).await;
    let url = c.current_url().await.unwrap();
    assert!(
        !url.as_str().contains("token"),
        "the token left the address: {url}"
    );
    let legend = wait_for_text(c, "#keys", |t| t.contains("save and next")).await;
    assert!(
        legend.contains("save and next"),
        "the script shows the keys: {legend:?}"
    );

    for position in 1..=5 {
        at_item(c, position, total).await;
        let (key, _, digits) = keys_for(position);
        press(c, key).await;
        if key != "s" {
            press(c, &format!("{TAB}{digits}")).await;
        }
        let saved = wait_for_text(c, "#save-status", |t| t == "saved").await;
        assert_eq!(saved, "saved", "autosave on item {position}");
        press(c, "j").await;
    }
    at_item(c, 6, total).await;
    c.refresh().await.unwrap();
    at_item(c, 6, total).await;
    c.goto(&r.page("")).await.unwrap();
    at_item(c, 6, total).await;

    let stored = grades(&r.runs, &r.set_id, "ann");
    for position in 1..=5u32 {
        let (key, verdict, digits) = keys_for(position);
        let g = stored[position as usize - 1]
            .as_ref()
            .unwrap_or_else(|| panic!("no grade of item {position}"));
        assert_eq!(g.verdict.as_deref(), Some(verdict), "item {position}");
        if key != "s" {
            let got: String = [
                "diagnostic_correctness",
                "multimodal_integration",
                "differential_reasoning",
                "lesion_localisation",
                "clinical_safety",
                "overall",
            ]
            .iter()
            .map(|d| char::from(b'0' + g.scores[*d]))
            .collect();
            assert_eq!(got, digits, "item {position}'s scores in rubric order");
        }
    }
    assert!(
        stored[5..].iter().all(Option::is_none),
        "nothing graded past item 5"
    );

    // Back to item 5 (k): filled in from the store, the screenshot of a graded item.
    press(c, "k").await;
    at_item(c, 5, total).await;
    let checked = c
        .find(Locator::Css("input[name=verdict]:checked"))
        .await
        .unwrap();
    assert_eq!(
        checked.attr("value").await.unwrap().as_deref(),
        Some(keys_for(5).1)
    );
    let comment = c
        .find(Locator::Css("textarea[name=comment]"))
        .await
        .unwrap();
    comment
        .send_keys("Enhancing rim on T1; agree with the leading diagnosis.")
        .await
        .unwrap();
    press(c, &TAB.to_string()).await;
    wait_for_text(c, "#save-status", |t| t == "saved").await;
    // The top of the page: the progress, the case, and the grade as filled in.
    c.execute(
        "window.scrollTo(0, 0); document.getElementById('grade').scrollTop = 0;",
        vec![],
    )
    .await
    .unwrap();
    shot(c, "review-item.png").await;

    // The rest by keyboard too, then the "done" page.
    press(c, "j").await;
    for position in 6..=total {
        at_item(c, position, total).await;
        press(c, "1").await;
        wait_for_text(c, "#save-status", |t| t == "saved").await;
        press(c, "j").await;
    }
    let done = wait_for_text(c, "#counts", |t| t.starts_with("You graded")).await;
    assert!(done.contains(&format!("of {total} items")), "{done}");
    shot(c, "review-done.png").await;
    driver.close().await;
}

pub(crate) async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let path = screenshot_dir().join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

#[test]
fn a_reviewer_reaches_no_other_reviewers_items_and_no_token_reaches_any() {
    let r = setup();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(isolation(&r));
}

/// The text of the page's body.
async fn body_text(c: &Client) -> String {
    c.find(Locator::Css("body"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// What the store holds for each of a reviewer's positions: the answer's own words (the fake server names the
/// conversation in each) and the item number.
fn answers(runs: &Path, set: &str, reviewer: &str) -> Vec<(String, u32)> {
    let store = store(runs);
    let mut out = Vec::new();
    let mut position = 1;
    while let Some(a) = store.assigned_item(set, reviewer, position).unwrap() {
        let i = &a.item;
        let s = store
            .sample_record(&i.run_id, &i.task_id, i.sample_index)
            .unwrap()
            .unwrap();
        let text = s.final_text.unwrap_or_default();
        let marker = text.split(PAYLOAD).next().unwrap().trim().to_string();
        out.push((marker, i.item_no));
        position += 1;
    }
    out
}

async fn isolation(r: &Review) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    let ann = answers(&r.runs, &r.set_id, "ann");
    let bob = answers(&r.runs, &r.set_id, "bob");
    let bob_only: Vec<&String> = bob
        .iter()
        .filter(|(_, n)| !ann.iter().any(|(_, m)| m == n))
        .map(|(t, _)| t)
        .collect();
    assert!(!bob_only.is_empty());

    // Bob grades an item they share, with a note, as Bob's browser would (through the page's own form).
    let (shared_text, shared_no) = ann
        .iter()
        .find(|(_, n)| bob.iter().any(|(_, m)| m == n))
        .expect("a shared item")
        .clone();
    let bob_pos = bob.iter().position(|(_, n)| *n == shared_no).unwrap() as u32 + 1;
    c.goto(r.link("bob")).await.unwrap();
    c.goto(&r.page(&format!("/items/{bob_pos}"))).await.unwrap();
    at_item(c, bob_pos, r.items("bob")).await;
    c.find(Locator::Css("label.chip.incorrect"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let note = c
        .find(Locator::Css("textarea[name=comment]"))
        .await
        .unwrap();
    note.send_keys("BOB-PRIVATE-NOTE").await.unwrap();
    c.find(Locator::Css("button[name=go]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(c, "#progress", |t| !t.starts_with(&format!("{bob_pos} /"))).await;
    let bobs_key = c
        .find(Locator::Css("input[name=csrf]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();

    // Ann, in the same browser: her link replaces Bob's cookie.
    c.goto(r.link("ann")).await.unwrap();
    let total = r.items("ann");
    at_item(c, 1, total).await;
    for position in 1..=total {
        c.goto(&r.page(&format!("/items/{position}")))
            .await
            .unwrap();
        at_item(c, position, total).await;
        let text = body_text(c).await;
        assert!(
            text.contains(&ann[position as usize - 1].0),
            "Ann's own answer at {position}"
        );
        for other in &bob_only {
            assert!(
                !text.contains(other.as_str()),
                "Bob's item on Ann's page {position}"
            );
        }
        assert!(
            !text.contains("BOB-PRIVATE-NOTE"),
            "Bob's note on Ann's page {position}"
        );
        if ann[position as usize - 1].0 == shared_text {
            let checked = c
                .find_all(Locator::Css("input[name=verdict]:checked"))
                .await
                .unwrap();
            assert!(checked.is_empty(), "Bob's verdict shows on Ann's page");
        }
    }
    // Past her list: not found, to read or to write (with her key, or with Bob's).
    c.goto(&r.page(&format!("/items/{}", total + 1)))
        .await
        .unwrap();
    let text = wait_for_text(c, "h1", |t| t.starts_with("404")).await;
    assert!(text.starts_with("404"), "{text}");
    c.goto(&r.page("/items/1")).await.unwrap();
    at_item(c, 1, total).await;
    let own_key = c
        .find(Locator::Css("input[name=csrf]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    let post = |position: u32, key: &str| {
        format!(
            "return fetch('{}', {{method: 'POST', headers: {{'Accept': 'application/json'}}, \
             body: new URLSearchParams({{csrf: '{key}', verdict: 'correct'}})}}).then(r => r.status);",
            r.page(&format!("/items/{position}"))
        )
    };
    let status = |v: Value| v.as_u64().unwrap_or(0);
    let beyond = c.execute(&post(total + 1, &own_key), vec![]).await.unwrap();
    assert_eq!(status(beyond), 404);
    let with_bobs = c.execute(&post(1, &bobs_key), vec![]).await.unwrap();
    assert_eq!(status(with_bobs), 403);
    assert!(
        grades(&r.runs, &r.set_id, "ann")
            .iter()
            .all(Option::is_none),
        "Ann stored nothing"
    );
    let bobs = grades(&r.runs, &r.set_id, "bob");
    assert_eq!(
        bobs.iter().flatten().count(),
        1,
        "Bob's one grade, untouched"
    );

    // Without a token: refused everywhere.
    c.delete_all_cookies().await.unwrap();
    for rest in ["", "/", "/items/1"] {
        c.goto(&r.page(rest)).await.unwrap();
        let text = wait_for_text(c, "h1", |t| t.starts_with("401")).await;
        assert!(text.starts_with("401"), "{rest}: {text}");
    }
    let refused = c.execute(&post(1, &own_key), vec![]).await.unwrap();
    assert_eq!(status(refused), 401);
    driver.close().await;
}

#[test]
fn a_script_in_an_answer_or_a_comment_runs_nothing() {
    let r = setup();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(payloads(&r));
}

async fn payloads(r: &Review) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    let total = r.items("bob");
    c.goto(r.link("bob")).await.unwrap();
    at_item(c, 1, total).await;
    let check = "return [document.title, document.body.getAttribute('data-pwned'), \
                 document.querySelectorAll('pre.answer *, .case script, .case svg, .case b').length, \
                 document.querySelector('pre.answer').textContent];";
    for position in 1..=total {
        c.goto(&r.page(&format!("/items/{position}")))
            .await
            .unwrap();
        at_item(c, position, total).await;
        // Give an image's error handler, if there were one, the time to run.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        let v = c.execute(check, vec![]).await.unwrap();
        assert_eq!(
            v[0],
            format!("Item {position} of {total} · nmb review"),
            "the title stayed"
        );
        assert_eq!(v[1], Value::Null, "no handler ran on item {position}");
        assert_eq!(
            v[2], 0,
            "no element was made from the answer on item {position}"
        );
        assert!(
            v[3].as_str().unwrap().contains(PAYLOAD),
            "the payload shows as text: {}",
            v[3]
        );
    }

    // A comment with the same kind of payload: saved, shown back as text after a reload.
    c.goto(&r.page("/items/1")).await.unwrap();
    at_item(c, 1, total).await;
    let comment = c
        .find(Locator::Css("textarea[name=comment]"))
        .await
        .unwrap();
    comment.send_keys(COMMENT).await.unwrap();
    press(c, &TAB.to_string()).await;
    wait_for_text(c, "#save-status", |t| t == "saved").await;
    c.refresh().await.unwrap();
    at_item(c, 1, total).await;
    let v = c
        .execute(
            "return [document.title, document.querySelector('textarea[name=comment]').value, \
             document.querySelectorAll('main script, main img:not(.prompt)').length];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(v[0], format!("Item 1 of {total} · nmb review"));
    assert_eq!(v[1], COMMENT, "the comment comes back as typed");
    assert_eq!(v[2], 0);
    driver.close().await;
}
