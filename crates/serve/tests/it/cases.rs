//! The case page and two runs side by side on a case, over the fixture of `pages.rs`.

use nmb_store::ScoreReportRecord;

use crate::pages::{
    assert_secure, fixture, get, history, reference, report_json, rows, start, XSS, XSS_EHR,
    XSS_NOTES, XSS_REFERENCE,
};

/// Nothing a model, a prompt or a report wrote reaches the page as markup.
fn assert_escaped(html: &str) {
    for raw in [
        XSS,
        XSS_EHR,
        XSS_NOTES,
        XSS_REFERENCE,
        "<script",
        "<b onmouseover",
    ] {
        assert!(!html.contains(raw), "{raw} unescaped");
    }
}

#[tokio::test]
async fn a_case_page_shows_images_ehr_notes_references_and_samples_escaped() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let (status, headers, html) = get(&format!("{base}/runs/{}/cases/case-05", f.run_id)).await;
    assert_eq!(status, 200, "{html}");
    assert_secure(&headers);
    assert_escaped(&html);
    // The image at full size, once, although both samples' prompts show it.
    let full = format!("<img class=\"full\" src=\"/images/{}\"", f.image);
    assert_eq!(html.matches(&full).count(), 1, "{html}");
    // The EHR fields and the notes, read back from the prompt, escaped.
    assert!(html.contains("<dl id=\"ehr\"><dt>Age</dt><dd>45</dd><dt>Sex</dt><dd>female</dd>"));
    assert!(html.contains("<dt>History</dt><dd>&lt;script&gt;alert(2)&lt;/script&gt;</dd>"));
    assert!(html.contains(
        "<pre id=\"notes\">Found &lt;b onmouseover=alert(3)&gt;confused&lt;/b&gt; at home.</pre>"
    ));
    // The task with its question, the reference from the score report, the score rows and the metadata.
    assert!(html.contains("What is the diagnosis for case-05/dx?"));
    assert!(html.contains("&lt;script&gt;alert(4)&lt;/script&gt; glioma"));
    assert!(html.contains("<dt>disease group</dt><dd>Vascular</dd>"));
    assert!(html.contains("<dt>organ</dt><dd>brain</dd>"));
    assert!(!html.contains("id=\"reference-note\"") && !html.contains("id=\"lookup\""));
    // Every sample of the case, linked, with its answer (escaped) and score.
    assert_eq!(rows(&html), 2, "the samples table");
    assert_eq!(
        html.matches("class=\"sample-link ").count(),
        2,
        "the tasks table"
    );
    for sample in 0..2 {
        assert!(html.contains(&format!(
            "href=\"/runs/{}/samples/{sample}?task=case-05%2Fdx\"",
            f.run_id
        )));
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x"));
    assert!(html.contains(">correct<") && html.contains("perceptual_failure"));
    // Each answer's thinking, collapsed above it and escaped: sample 0 has one, sample 1 none.
    let thinking = "<details class=\"thinking\"><summary>thinking (4 words, 321 reasoning tokens)</summary>\
                    <pre class=\"thinking\">Weighing &lt;script&gt;alert(5)&lt;/script&gt; glioma first</pre>\
                    </details>&lt;script&gt;alert(1)";
    assert_eq!(html.matches(thinking).count(), 1, "{html}");
    assert_eq!(html.matches("class=\"thinking\"><summary>").count(), 1);
    // The prompt as sent, and the form to compare with the other run of this suite (not the other suite's).
    assert!(html.contains("prompt as sent"));
    assert!(html.contains("id=\"compare-form\""));
    assert!(html.contains(&format!("<option value=\"{}\">", f.second)));
    assert!(!html.contains(&format!("<option value=\"{}\">", f.other_suite)));
    assert!(html.contains("<input type=\"hidden\" name=\"case\" value=\"case-05\">"));

    let (_, _, lesion) = get(&format!("{base}/runs/{}/cases/case-07", f.run_id)).await;
    assert!(lesion.contains("acute infarct, left MCA territory"));
    assert!(lesion.contains(&format!("<dd>{}</dd>", history(7))));
    let (_, _, plain) = get(&format!("{base}/runs/{}/cases/case-11", f.run_id)).await;
    assert!(plain.contains(&reference(11)) && plain.contains("Headache for 11 days.\n\nNo fever."));
}

#[tokio::test]
async fn an_unscored_runs_case_is_found_by_its_task_prefix_and_says_so() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let (status, _, html) = get(&format!("{base}/runs/{}/cases/case-06", f.second)).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("id=\"lookup\"") && html.contains("<code>case-06/</code>"));
    assert!(html.contains("id=\"reference-note\"") && html.contains("not scored"));
    assert!(html.contains("Second model thinks meningioma (case-06/dx 1)"));
    assert!(html.contains(&format!("<img class=\"full\" src=\"/images/{}\"", f.image)));
    assert!(html.contains("<dt>Age</dt><dd>46</dd>"));
    assert!(html.contains(&format!("<option value=\"{}\">", f.run_id)));
}

#[tokio::test]
async fn a_large_report_is_not_read_for_references() {
    let f = fixture();
    // A newer report of the same rows, padded past the limit.
    let rows = f
        .store
        .sample_page(&f.run_id, &Default::default(), 0, 100)
        .unwrap()
        .scores;
    let mut report = report_json(Vec::new());
    report["notes"] = serde_json::json!(["x".repeat(2 * 1024 * 1024 + 1)]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    f.store
        .save_score_report(&ScoreReportRecord {
            run_id: &f.run_id,
            config_hash: "big",
            schema_version: 1,
            report_json: &report.to_string(),
            samples: &rows,
        })
        .unwrap();
    let base = start(f.store.clone(), None).await;
    let (status, _, html) = get(&format!("{base}/runs/{}/cases/case-11", f.run_id)).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("id=\"reference-note\"") && html.contains("too large"),
        "{html}"
    );
    assert!(!html.contains(&reference(11)));
    assert!(
        html.contains("<dt>disease group</dt><dd>Vascular</dd>"),
        "the score rows still show"
    );
}

#[tokio::test]
async fn unknown_cases_are_404() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    for path in [
        format!("/runs/{}/cases/case-99", f.run_id),
        format!("/runs/{}/cases/case-0", f.run_id),
        format!("/runs/{}/cases/case-00", f.second),
        "/runs/no-such-run/cases/case-00".to_string(),
        format!("/runs/{}/cases/", f.run_id),
    ] {
        let (status, headers, html) = get(&format!("{base}{path}")).await;
        assert_eq!(status, 404, "{path}");
        assert_secure(&headers);
        assert!(html.contains("404"), "{path}");
    }
}

#[tokio::test]
async fn two_runs_of_a_suite_side_by_side_on_a_case() {
    let f = fixture();
    let base = start(f.store.clone(), None).await;
    let url = format!("{base}/compare?a={}&b={}&case=case-05", f.run_id, f.second);
    let (status, headers, html) = get(&url).await;
    assert_eq!(status, 200, "{html}");
    assert_secure(&headers);
    assert_escaped(&html);
    assert!(
        html.contains("id=\"compare-runs\"")
            && html.contains("Test Model")
            && html.contains("Second Model")
    );
    let a = html.find("data-side=\"A\"").expect("side A");
    let b = html.find("data-side=\"B\"").expect("side B");
    let first = html.find("&lt;script&gt;alert(1)").expect("A's answer");
    let second = html
        .find("Second model thinks meningioma (case-05/dx 0)")
        .expect("B's answer");
    assert!(
        a < first && first < b && b < second,
        "each answer on its own side"
    );
    assert!(
        html.contains("&lt;script&gt;alert(4)&lt;/script&gt; glioma"),
        "the reference"
    );
    assert!(html.contains(">correct<") && html.contains("not scored"));
    assert!(html.contains(&format!(
        "href=\"/runs/{}/samples/1?task=case-05%2Fdx\"",
        f.second
    )));
    // The run page's form leads here.
    let (_, _, run) = get(&format!("{base}/runs/{}", f.run_id)).await;
    assert!(run.contains("id=\"compare-form\" method=\"get\" action=\"/compare\""));
    assert!(run.contains(&format!(
        "<input type=\"hidden\" name=\"a\" value=\"{}\">",
        f.run_id
    )));
    assert!(run.contains(&format!("<option value=\"{}\">", f.second)));
    let (_, _, other) = get(&format!("{base}/runs/{}", f.other_suite)).await;
    assert!(other.contains("id=\"compare-none\""));

    let (status, _, html) = get(&format!(
        "{base}/compare?a={}&b={}&case=case-05",
        f.run_id, f.other_suite
    ))
    .await;
    assert_eq!(status, 400);
    assert!(
        html.contains("only runs of the same suite can be compared"),
        "{html}"
    );
    for (query, expected) in [
        (format!("a={}&b={}", f.run_id, f.second), 400),
        (format!("a={}&case=case-05", f.run_id), 400),
        (format!("a={}&b=nope&case=case-05", f.run_id), 404),
        (format!("a={}&b={}&case=case-77", f.run_id, f.second), 404),
    ] {
        let (status, headers, _) = get(&format!("{base}/compare?{query}")).await;
        assert_eq!(status, expected, "{query}");
        assert_secure(&headers);
    }
    // A case only one run has is shown with the other side empty.
    let (status, _, html) = get(&format!(
        "{base}/compare?a={}&b={}&case=case-11",
        f.run_id, f.second
    ))
    .await;
    assert_eq!(status, 200);
    assert!(html.contains("No sample of this task in this run."));
}
