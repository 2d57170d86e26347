//! `nmb serve` in headless Chromium through WebDriver, as a person would use it: the runs list, a click through
//! to the run, a filter, a click through to the sample's case (its images loaded, its EHR fields and samples),
//! a click through to the sample, and that sample's answer and prompt image on the page.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use fantoccini::{Client, Locator};
use nmb_fake_server::{Config, Wire};
use nmb_test_support::browser::{screenshot_dir, WebDriver};

use crate::common::*;

/// Kills the server when the test ends, however it ends.
pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `nmb serve --port 0` on `runs` and reads the URL it prints.
pub(crate) fn start_server(runs: &Path) -> (Server, String) {
    let mut child = nmb_command(runs)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nmb serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("nmb serve prints its URL");
    let url = line
        .trim()
        .strip_prefix("nmb serve: ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (server, url)
}

#[test]
fn a_run_can_be_browsed_down_to_a_case_and_a_sample() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let fake = server(Config::default());
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
            "2",
            "--limit",
            "6",
            "--no-bertscore",
            "--json",
            "-q",
        ],
    ));
    let run_id = out["run_id"].as_str().expect("a run id").to_string();

    // A sample whose prompt shows an image, and its answer as stored.
    let (task, index, answer) = {
        let store = store(&runs);
        store
            .run_samples(&run_id)
            .unwrap()
            .into_iter()
            .find_map(|s| {
                let turn = s.turns.first()?;
                let body = store.prompt_body(&turn.call.prompt_hash).unwrap()?;
                (body.contains("\"image\"") && s.final_text.is_some()).then(|| {
                    let text = s.turns[0].text.clone().unwrap_or_default();
                    (s.task_id, s.sample_index, text)
                })
            })
            .expect("a sample with an image in its prompt")
    };

    let (server, url) = start_server(&runs);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(browse(&url, &run_id, &task, index, &answer));
    drop(server);
}

async fn browse(url: &str, run_id: &str, task: &str, index: u32, answer: &str) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    c.goto(url).await.unwrap();
    let runs = c
        .find(Locator::Id("runs"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(runs.contains(run_id), "{runs}");

    // The run: its manifest, then a filter typed into the form, then the sample's link.
    c.find(Locator::LinkText(run_id))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let manifest = wait_for_text(c, "#manifest", |t| t.contains("test-model")).await;
    assert!(manifest.contains("test-model"), "{manifest}");
    let count = wait_for_text(c, "#count", |t| t.starts_with("12 matching")).await;
    assert!(count.starts_with("12 matching"), "{count}");
    let png = c.screenshot().await.unwrap();
    std::fs::write(screenshot_dir().join("serve-run.png"), png).unwrap();
    let field = c.find(Locator::Css("input[name='task']")).await.unwrap();
    field.send_keys(task).await.unwrap();
    c.find(Locator::Css("form.filters button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // A click starts a navigation; wait until the new page is the one answering.
    let count = wait_for_text(c, "#count", |t| t.starts_with("2 matching")).await;
    assert!(count.starts_with("2 matching"), "{count}");
    let links = c.find_all(Locator::Css("a.sample-link")).await.unwrap();
    assert_eq!(links.len(), 2);

    // The sample's case: its tasks, its images at full size, its EHR fields, and a link to the sample.
    c.find(Locator::Css("a.case-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let tasks = wait_for_text(c, "#case-tasks", |t| t.contains(task)).await;
    assert!(tasks.contains(task), "{tasks}");
    let ehr = wait_for_text(c, "#ehr", |t| !t.is_empty()).await;
    assert!(!ehr.is_empty(), "the case's EHR fields");
    assert!(
        loop_until_loaded(c, "img.full").await > 0,
        "the case's image did not load"
    );
    assert!(c.current_url().await.unwrap().as_str().contains("/cases/"));
    let png = c.screenshot().await.unwrap();
    let path = screenshot_dir().join("serve-case.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
    let wanted = format!("/samples/{index}?task={}", task.replace('/', "%2F"));
    let mut link = None;
    for a in c
        .find_all(Locator::Css("#sample-table a.sample-link"))
        .await
        .unwrap()
    {
        if a.attr("href")
            .await
            .unwrap()
            .is_some_and(|h| h.ends_with(&wanted))
        {
            link = Some(a);
        }
    }
    link.expect("the case page links the sample")
        .click()
        .await
        .unwrap();

    // The sample: the stored answer as text, and the prompt's image loaded.
    let shown = wait_for_text(c, "pre.answer", |t| !t.is_empty()).await;
    assert_eq!(shown.trim(), answer.trim());
    let width = loop_until_loaded(c, "img.prompt").await;
    assert!(width > 0, "the prompt image did not load");
    let current = c.current_url().await.unwrap();
    assert!(
        current.as_str().contains(&format!("/samples/{index}")),
        "{current}"
    );

    let png = c.screenshot().await.unwrap();
    let path = screenshot_dir().join("serve-sample.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
    driver.close().await;
}

/// The text of the first element matching `css` once it satisfies `done` (or, after 10 s, whatever it last
/// was): a page still being replaced may not have the element yet, or lose it between finding and reading.
pub(crate) async fn wait_for_text(c: &Client, css: &str, done: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        if let Ok(element) = c.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                if done(&text) {
                    return text;
                }
                last = text;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    last
}

/// The `naturalWidth` of the first image matching `css` once it has loaded (0 if it never does).
async fn loop_until_loaded(c: &Client, css: &str) -> u64 {
    for _ in 0..50 {
        let v = c
            .execute(
                "const i = document.querySelector(arguments[0]); \
                 return i && i.complete ? i.naturalWidth : -1;",
                vec![serde_json::json!(css)],
            )
            .await
            .unwrap();
        if let Some(w) = v.as_i64().filter(|w| *w >= 0) {
            return w as u64;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    0
}
