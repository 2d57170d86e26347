//! `nmb review answer` in headless Chromium through WebDriver, as a clinician would use it: answer one case as a
//! ranked differential and one in free text, go back and find the answer kept, finish, and read the run id; then
//! the run holds exactly those answers, and ending the command (Ctrl-C) resumes that same run.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fantoccini::{Client, Locator};
use nmb_suite::Family;
use nmb_test_support::browser::{screenshot_dir, WebDriver};

use crate::common::*;

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `nmb review answer sample --port 0` on `runs`; returns the server, its URL, and everything it prints
/// on stdout after the URL (read on a thread, so the server never blocks on a full pipe).
fn start(runs: &Path) -> (Server, String, Arc<Mutex<String>>) {
    let mut child = nmb_command(runs)
        .args([
            "review",
            "answer",
            "sample",
            "--reviewer",
            "lee",
            "--port",
            "0",
            "--no-bertscore",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nmb review answer starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let server = Server(child);
    let mut line = String::new();
    stdout.read_line(&mut line).expect("it prints its URL");
    let url = line
        .trim()
        .strip_prefix("nmb review answer: ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let rest = Arc::new(Mutex::new(String::new()));
    let sink = rest.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (server, url, rest)
}

#[test]
fn a_clinician_answers_two_cases_and_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = nmb_suite::sample::build();
    let first: Vec<_> = suite.tasks().map(|(_, t)| t.clone()).take(2).collect();
    assert_eq!(
        (first[0].family, first[1].family),
        (Family::Differential, Family::Lesion),
        "the test answers a differential, then a lesion task"
    );
    let reference = first[0].reference.clone().unwrap();
    let dx = vec![
        reference.diagnosis.clone().unwrap(),
        reference.differential[1].clone(),
    ];
    let lesion = "Lesion type: acute infarct <b>\nLocation: left MCA territory & insula";

    let (mut server, url, printed) = start(&runs);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(run_id) = runtime.block_on(answer(&url, &dx, lesion)) else {
        return;
    };

    // The run: human:lee, the differential as the scorer reads it, the free text as typed, the rest open.
    let store = store(&runs);
    let run = store.run(&run_id).unwrap();
    assert_eq!(run.manifest.model, "human:lee");
    let samples = store.run_samples(&run_id).unwrap();
    assert_eq!(samples.len(), suite.task_count());
    for s in &samples {
        if s.task_id == first[0].id {
            assert_eq!(s.final_text, Some(nmb_serve::differential_answer(&dx)));
        } else if s.task_id == first[1].id {
            assert_eq!(s.final_text.as_deref(), Some(lesion));
        } else {
            assert_eq!(s.error_class.as_deref(), Some("no_answer"), "{s:?}");
        }
    }
    let suite_hash = nmb_suite::suite_hash(&suite).unwrap();
    let answers = store.human_answers("lee", &suite_hash).unwrap();
    assert_eq!(answers.len(), 2);
    assert!(answers.iter().all(|a| a.source == "review-answer"));

    // Ctrl-C ends the command, which builds the run once more: the same run, resumed.
    // SAFETY: signalling a child process this test started and still owns.
    unsafe {
        libc::kill(server.0.id() as i32, libc::SIGINT);
    }
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    std::thread::sleep(Duration::from_millis(200));
    let out = printed.lock().unwrap().clone();
    assert!(out.contains(&format!("run id: {run_id}")), "{out}");
}

/// Answers question 1 as a ranked differential and question 2 in free text, goes back, finishes, and returns the
/// run id the page shows (`None` when there is no browser here).
async fn answer(url: &str, dx: &[String], lesion: &str) -> Option<String> {
    let driver = WebDriver::start().await?;
    let c = &driver.client;
    c.goto(url).await.unwrap();
    let progress = wait_for_text(c, "#progress", |t| t.contains("answered")).await;
    assert_eq!(progress, "0 of 25 answered");
    // Finishing before any answer builds nothing and says why.
    click(c, "#finish").await;
    let refused = wait_for_text(c, "#finish-error", |t| t.contains("no answers yet")).await;
    assert!(refused.contains("no answers yet"), "{refused:?}");
    click(c, "#continue").await;
    expect_page(c, "Question 1 of 25").await;
    let inputs = c.find_all(Locator::Css("input[name='dx']")).await.unwrap();
    assert_eq!(inputs.len(), 5);
    for (input, d) in inputs.iter().zip(dx) {
        input.send_keys(d).await.unwrap();
    }
    click(c, "#save-next").await;

    // Question 2, a lesion: its labelled lines are offered; replace them with the answer.
    expect_page(c, "Question 2 of 25").await;
    let area = c
        .find(Locator::Css("textarea[name='answer']"))
        .await
        .unwrap();
    let offered = area.prop("value").await.unwrap().unwrap_or_default();
    assert!(offered.starts_with("Lesion type:"), "{offered:?}");
    area.clear().await.unwrap();
    area.send_keys(lesion).await.unwrap();
    click(c, "#save").await;
    let saved = wait_for_text(c, "#saved", |t| !t.is_empty()).await;
    assert_eq!(saved, lesion);
    assert_eq!(
        wait_for_text(c, "#progress", |t| t.starts_with('2')).await,
        "2 of 25 answered"
    );

    // Back to question 1: the differential is there to change.
    click(c, "#prev").await;
    expect_page(c, "Question 1 of 25").await;
    let first = c.find(Locator::Css("input[name='dx']")).await.unwrap();
    assert_eq!(
        first.prop("value").await.unwrap().as_deref(),
        Some(dx[0].as_str())
    );
    let images = c.find_all(Locator::Css("img.case")).await.unwrap();
    assert!(!images.is_empty());
    assert!(loaded(c).await > 0, "the case image did not load");
    // The screenshot shows the question's end and the form filled in.
    c.execute(
        "document.getElementById('answer-form').scrollIntoView({block: 'end'});",
        vec![],
    )
    .await
    .unwrap();
    let png = c.screenshot().await.unwrap();
    let path = screenshot_dir().join("answer-page.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());

    // Finish: the index shows the run.
    c.goto(url).await.unwrap();
    click(c, "#finish").await;
    let run_id = wait_for_text(c, "#run-id", |t| t.starts_with('r')).await;
    assert!(run_id.starts_with('r'), "no run id on the page");
    driver.close().await;
    Some(run_id)
}

/// Waits for the page whose first heading is `title`, failing with the page shown instead.
async fn expect_page(c: &Client, title: &str) {
    let h1 = wait_for_text(c, "h1", |t| t == title).await;
    if h1 != title {
        let source = c.source().await.unwrap_or_default();
        panic!("expected the page {title:?}, got {h1:?}:\n{source}");
    }
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// The text of the first element matching `css` once it satisfies `done` (or, after 20 s, whatever it last
/// was): the page may still be being replaced after a click.
async fn wait_for_text(c: &Client, css: &str, done: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..200 {
        if let Ok(element) = c.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                if done(&text) {
                    return text;
                }
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

/// The first case image's `naturalWidth` once loaded (0 if it never does).
async fn loaded(c: &Client) -> u64 {
    for _ in 0..50 {
        let v = c
            .execute(
                "const i = document.querySelector('img.case'); \
                 return i && i.complete ? i.naturalWidth : -1;",
                vec![],
            )
            .await
            .unwrap();
        if let Some(w) = v.as_i64().filter(|w| *w >= 0) {
            return w as u64;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    0
}
