//! Everything a model wrote is untrusted. A stored answer full of markup is rendered into the HTML report,
//! which headless Chromium then loads: no script may run, no element may be injected, and the text must still
//! be there, visibly. A control page with the same payload *unescaped* proves the check can fail.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_report::{load_run, write_report, Format, ReportOptions};
use nmb_store::Store;
use nmb_test_support::browser;

const PAYLOAD: &str = concat!(
    "{\"differential\": [{\"rank\": 1, \"diagnosis\": \"<script>alert(1)</script>\"}, ",
    "{\"rank\": 2, \"diagnosis\": \"<img src=x onerror=alert(2)>\"}]}\n",
    "<script>alert(1)</script> <img src=x onerror=alert(2)>\n",
    "<script>document.title='pwned-by-script'</script>\n",
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">\n",
    "\" onmouseover=\"document.body.setAttribute('data-pwned','2')\" x=\"\n",
    "'><svg onload=\"document.body.setAttribute('data-pwned','3')\"></svg>\n",
    "</div></details></body><iframe src=\"javascript:alert(4)\"></iframe>"
);

#[test]
fn model_output_cannot_run_script_in_the_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_dir(dir.path().join("runs")).unwrap());
    let suite = nmb_suite::sample::build();
    let mut book = common::AnswerBook::depth(&suite);
    book.fixed.insert("xss-model".into(), PAYLOAD.into());
    let server = common::server(common::scripted_model(Arc::new(book), BTreeMap::new()));
    let mut small = suite.clone();
    small.cases.truncate(2);
    let run_id = common::run_model(&store, &server, &small, "xss-model", 2);
    let scores = common::judge::score(&store, &server.url(), &run_id, &small, 1000);
    let run = load_run(&store, &run_id, Some(scores)).unwrap();
    assert!(
        run.samples
            .iter()
            .any(|s| s.final_text.as_deref() == Some(PAYLOAD)),
        "the payload is stored"
    );

    let mut opts = ReportOptions::new(dir.path().join("report"));
    opts.formats = [Format::Html].into_iter().collect();
    let written = write_report(&[run], &opts).unwrap();
    let html_path = written.html.unwrap();
    let html = std::fs::read_to_string(&html_path).unwrap();

    // Static checks on the file: the only markup is ours.
    let lower = html.to_ascii_lowercase();
    assert!(
        !lower.contains("<script"),
        "no script element in the report"
    );
    assert!(!lower.contains("<iframe"), "no iframe");
    assert!(!lower.contains("<img src=x"), "no injected img");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the payload is shown as text"
    );
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(html.contains("Content-Security-Policy"));

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let (dom, log) = browser::dump_dom(&chromium, &html_path);
    assert!(dom.contains("<body"), "chromium dumped a DOM; log:\n{log}");
    let problems = injected(&dom, &log);
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the payload is visible text in the DOM"
    );
    assert!(dom.contains("&lt;img src=x onerror=alert(2)&gt;"));

    // Control: the same payload pasted raw into a page without a CSP does run, so the checks above can fail.
    // (alert() would block a headless browser, so the control calls void() instead.)
    let control = dir.path().join("control.html");
    let raw = PAYLOAD.replace("alert(", "void(");
    std::fs::write(&control, format!("<!DOCTYPE html><html><head><title>control</title></head><body><div>{raw}</div></body></html>")).unwrap();
    let (control_dom, _) = browser::dump_dom(&chromium, &control);
    assert!(
        !injected(&control_dom, "").is_empty(),
        "the control page should have run the payload; detection is broken:\n{control_dom}"
    );

    let png = browser::screenshot_dir().join("xss-report.png");
    browser::screenshot(&chromium, &html_path, &png, 1280, 2400);
    let img = image::open(&png).unwrap();
    assert_eq!((img.width(), img.height()), (1280, 2400));
    println!("screenshot: {}", png.display());
}

/// What got injected or ran: elements that can run script, event-handler attributes, the canaries' marks.
fn injected(dom: &str, log: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, attrs) in tags(dom) {
        if matches!(
            name.as_str(),
            "script" | "iframe" | "object" | "embed" | "frame"
        ) {
            problems.push(format!("an injected <{name}> element exists in the DOM"));
        }
        for a in attrs {
            if a.starts_with("on") {
                problems.push(format!("<{name}> carries an event handler attribute {a}"));
            }
            if a == "data-pwned" {
                problems.push(format!(
                    "an injected handler ran and set data-pwned on <{name}>"
                ));
            }
        }
    }
    if dom.contains("<title>pwned-by-script</title>") {
        problems.push("an injected script set the title".into());
    }
    if log.contains("Uncaught") {
        problems.push(format!("a script error was logged:\n{log}"));
    }
    problems
}

/// The elements of a serialised DOM: (tag name, attribute names). In serialised HTML, a `<` in text is always
/// `&lt;`, so every `<` followed by a letter opens a real element; attribute values are skipped quote-aware.
fn tags(dom: &str) -> Vec<(String, Vec<String>)> {
    let b = dom.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'<' || !b.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
            i += 1;
            continue;
        }
        i += 1;
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' && b[i] != b'/' {
            i += 1;
        }
        let name = dom[start..i].to_ascii_lowercase();
        let mut attrs = Vec::new();
        while i < b.len() && b[i] != b'>' {
            if b[i].is_ascii_whitespace() || b[i] == b'/' {
                i += 1;
                continue;
            }
            let a = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'>' {
                i += 1;
            }
            attrs.push(dom[a..i].to_ascii_lowercase());
            if i < b.len() && b[i] == b'=' {
                i += 1;
                if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                    let q = b[i];
                    i += 1;
                    while i < b.len() && b[i] != q {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                        i += 1;
                    }
                }
            }
        }
        out.push((name, attrs));
    }
    out
}
