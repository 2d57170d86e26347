//! A perturbed run's sample page shows each perturbed image beside the original the unperturbed run of the same
//! sweep sent, labelled with the perturbation; in Chromium both images load. Model text stays escaped.

use std::sync::Arc;

use fantoccini::Locator;
use nmb_store::{CallRecord, ChoiceRecord, ImageInput, Store};
use nmb_test_support::browser::WebDriver;

use crate::pages::{get, sha, start, XSS};

const MODEL: &str = "openai:vision@http://127.0.0.1:9";
const TASK: &str = "case-01/dx";

fn manifest(name: &str, perturbation: Option<&str>) -> nmb_store::Manifest {
    let mut m = serde_json::json!({
        "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": "suite", "template_id": "per-family",
        "template_hash": "t", "model": MODEL, "display_name": name, "params": {"seed": 7},
        "input_mode": "full", "samples": 1, "dropped_inputs": []
    });
    if let Some(p) = perturbation {
        m["perturbation"] = p.into();
    }
    serde_json::from_value(m).unwrap()
}

/// A run named `name` whose one sample was sent `png` and answered `answer`; returns its id.
fn run(store: &Store, name: &str, perturbation: Option<&str>, png: &[u8], answer: &str) -> String {
    let run_id = store
        .create_run(name, &manifest(name, perturbation))
        .unwrap()
        .run_id;
    store.plan_samples(&run_id, &[(TASK, 1)]).unwrap();
    let image = sha(png);
    let body = serde_json::json!({"messages": [{"role": "user", "parts": [
        {"text": "Image 1"}, {"image": image, "mime": "image/png"}, {"text": "What is the diagnosis?"}
    ]}]})
    .to_string();
    let prompt = sha(body.as_bytes());
    store
        .put_prompt(
            &prompt,
            &body,
            &[ImageInput {
                sha256: &image,
                mime: "image/png",
                bytes: png,
            }],
        )
        .unwrap();
    let call = CallRecord {
        tokens: Default::default(),
        run_id: &run_id,
        task_id: TASK,
        turn_index: 0,
        prompt_hash: &prompt,
        model: MODEL,
        params_json: "{}",
        template_id: "per-family",
        template_hash: "t",
        error: None,
        attempts: 1,
        raw: Some("{}"),
        tokens_in: Some(10),
        tokens_out: Some(3),
        latency_ms: Some(5),
        started_ms: 1_000,
        finished_ms: 1_005,
        batch_id: None,
    };
    let choice = ChoiceRecord {
        thinking: None,
        finish_reason: None,
        sample_index: 0,
        choice_index: 0,
        text: Some(answer),
        error: None,
        final_turn: true,
    };
    store.record_call(&call, &[choice]).unwrap();
    run_id
}

struct Sweep {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    perturbed: String,
    original: String,
    original_png: String,
    perturbed_png: String,
}

fn sweep() -> Sweep {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    let before = nmb_test_support::images::gray_png(48, 40, 1);
    let after = nmb_test_support::images::gray_png(48, 40, 99);
    // Another model's unperturbed run of the same name is not the original.
    let mut other = manifest("Vision", None);
    other.model = "openai:other@http://127.0.0.1:9".into();
    store.create_run("other", &other).unwrap();
    let original = run(&store, "Vision", None, &before, "Glioma");
    let perturbed = run(&store, "Vision [noise:0.2]", Some("noise:0.2"), &after, XSS);
    Sweep {
        _dir: dir,
        store: Arc::new(store),
        perturbed,
        original,
        original_png: sha(&before),
        perturbed_png: sha(&after),
    }
}

fn page_url(base: &str, run_id: &str) -> String {
    format!("{base}/runs/{run_id}/samples/0?task={TASK}")
}

#[tokio::test]
async fn a_perturbed_sample_shows_each_image_beside_its_original() {
    let s = sweep();
    let base = start(s.store.clone(), None).await;
    let (status, _, html) = get(&page_url(&base, &s.perturbed)).await;
    assert_eq!(status, 200, "{html}");
    let table = &html[html
        .find("id=\"perturbed-images\"")
        .expect("the image table")..];
    let row = &table[table.find("<tr><td>").expect("an image row")..];
    let (orig_at, pert_at) = (
        row.find(&format!(
            "class=\"original\" src=\"/images/{}\"",
            s.original_png
        )),
        row.find(&format!(
            "class=\"perturbed\" src=\"/images/{}\"",
            s.perturbed_png
        )),
    );
    assert!(
        matches!((orig_at, pert_at), (Some(a), Some(b)) if a < b),
        "original then perturbed in one row: {table}"
    );
    assert!(
        html.contains("Perturbation <strong>noise:0.2</strong>"),
        "{html}"
    );
    assert!(
        html.contains(&format!("/runs/{}", s.original)),
        "links the original run"
    );
    assert!(!html.contains(XSS), "model text is escaped");

    // The unperturbed run's own page has no such block.
    let (_, _, plain) = get(&page_url(&base, &s.original)).await;
    assert!(!plain.contains("perturbed-images"), "{plain}");
}

#[tokio::test]
async fn without_the_unperturbed_run_the_page_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    let png = nmb_test_support::images::gray_png(8, 8, 3);
    let id = run(&store, "Alone [blank]", Some("blank"), &png, "Glioma");
    let base = start(Arc::new(store), None).await;
    let (status, _, html) = get(&page_url(&base, &id)).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("unperturbed run of this sweep is not in this store"),
        "{html}"
    );
}

#[tokio::test]
async fn in_chromium_both_images_load() {
    let s = sweep();
    let base = start(s.store.clone(), None).await;
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    c.goto(&page_url(&base, &s.perturbed)).await.unwrap();
    c.find(Locator::Id("perturbed-images")).await.unwrap();
    let widths = c
        .execute(
            "return Array.from(document.querySelectorAll('#perturbed-images img'))\
             .map(i => [i.className, i.complete ? i.naturalWidth : 0]);",
            vec![],
        )
        .await
        .unwrap();
    driver.close().await;
    assert_eq!(
        widths,
        serde_json::json!([["original", 48], ["perturbed", 48]]),
        "both images loaded"
    );
}
