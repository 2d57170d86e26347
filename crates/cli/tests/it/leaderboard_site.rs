//! The leaderboard export drops into the Neural-MedBench site as it is: `nmb report --leaderboard-merge` on a
//! data.js in the site's syntax, loaded by a page that reads it the way the site's js/main.js does
//! (`fixtures/leaderboard-site`), driven in headless Chromium through WebDriver: the rows appear with the score
//! report's numbers, sorting works, search works, and every other model and version is kept.

use crate::common;

use std::path::Path;

use common::*;
use fantoccini::{Client, Locator};
use nmb_fake_server::{Config, Wire};
use nmb_test_support::browser::WebDriver;
use serde_json::Value;

const SITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/leaderboard-site"
);
const NAME: &str = "Fake <x> & co";

/// A scored run of the sample suite, named [`NAME`]; returns its id and its score report.
fn scored_run(runs: &Path, server: &nmb_fake_server::FakeServer) -> (String, Value) {
    let model = model_spec(Wire::OpenAi, server);
    let eval = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &model,
            "--samples",
            "5",
            "--name",
            NAME,
            "--no-bertscore",
            "--json",
            "-q",
        ],
    ));
    let run_id = eval["run_id"].as_str().unwrap().to_string();
    let scores = json_of(&nmb(runs, &["score", &run_id, "--no-bertscore", "--json"]));
    (run_id, scores)
}

/// pass@1 and pass@5 (reading (a), %) of the direct differential tasks, as the leaderboard rounds them.
fn expected(scores: &Value, level: &str) -> (f64, f64) {
    let g = scores["by_level_family"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["level"] == level && g["family"] == "differential")
        .unwrap_or_else(|| panic!("no {level} differential group"));
    let pct =
        |k: &str| (g[k]["unbiased_estimator"]["value"].as_f64().unwrap() * 1000.0).round() / 10.0;
    (pct("pass_at_1"), pct("pass_at_5"))
}

fn report(runs: &Path, run_id: &str, out: &Path, merge: &Path) {
    let o = nmb(
        runs,
        &[
            "report",
            run_id,
            "--format",
            "json",
            "--out",
            out.to_str().unwrap(),
            "--leaderboard-merge",
            merge.to_str().unwrap(),
            "--org",
            &format!("{NAME}=Acme Labs"),
            "--model-size",
            "test-model=7",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// The table's rows, as the cells' texts.
async fn rows(c: &Client) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for tr in c.find_all(Locator::Css("#ranking-table tr")).await.unwrap() {
        let mut cells = Vec::new();
        for td in tr.find_all(Locator::Css("td")).await.unwrap() {
            cells.push(td.text().await.unwrap());
        }
        out.push(cells);
    }
    out
}

fn column(rows: &[Vec<String>], i: usize) -> Vec<f64> {
    rows.iter()
        .map(|r| {
            r[i].trim_end_matches(['%', 'B'])
                .parse()
                .unwrap_or(f64::NAN)
        })
        .collect()
}

#[test]
fn the_export_drops_into_the_site() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let server = server(Config::default());
    let (run_id, scores) = scored_run(&runs, &server);

    // Merge into a data.js in the site's own syntax, then merge the result again: nmb's row is replaced, not
    // duplicated, and every other model and version stays.
    let once = dir.path().join("once");
    report(&runs, &run_id, &once, &Path::new(SITE).join("data.js"));
    let twice = dir.path().join("twice");
    report(&runs, &run_id, &twice, &once.join("data.js"));
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(twice.join("leaderboard.json")).unwrap())
            .unwrap();
    let verified = data["1.0"]["verified"].as_array().unwrap();
    let names: Vec<&str> = verified
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Model Alpha", "Model Beta", NAME]);
    assert_eq!(data["2.0"]["verified"][0]["name"], "Model Gamma");
    let ours = &verified[2];
    assert_eq!(ours["id"], 3);
    assert_eq!(ours["Accuracy_Pass5"], "Acme Labs");
    assert_eq!(ours["modelSize"], 7.0);
    assert_eq!(ours["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(ours["verified"], false);
    let (pass1, pass5) = expected(&scores, "direct");
    assert_eq!(ours["resolved"].as_f64().unwrap(), pass1);
    assert_eq!(ours["pass5"].as_f64().unwrap(), pass5);
    for field in nmb_report::leaderboard::SITE_FIELDS {
        assert!(ours.get(field).is_some(), "{field}");
    }

    // The site, served from files: the merged data.js next to the page that reads it as the site does.
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    for f in ["index.html", "site.js"] {
        std::fs::copy(Path::new(SITE).join(f), site.join(f)).unwrap();
    }
    std::fs::copy(twice.join("data.js"), site.join("data.js")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let multimodal = data["1.0"]["multimodal"].as_array().unwrap().len();
    runtime.block_on(browse(&site, (pass1, pass5), multimodal));
}

/// Loads the site page and checks it as a person would: rows, sorting, search, another dataset.
async fn browse(site: &Path, (pass1, pass5): (f64, f64), multimodal: usize) {
    let Some(driver) = WebDriver::start().await else {
        return;
    };
    let c = &driver.client;
    c.goto(&format!("file://{}", site.join("index.html").display()))
        .await
        .unwrap();

    // The rows appear, best pass@1 first, with the score report's numbers; the name shows as text.
    let table = rows(c).await;
    assert_eq!(table.len(), 3, "{table:?}");
    let resolved = column(&table, 4);
    assert!(resolved.windows(2).all(|w| w[0] >= w[1]), "{resolved:?}");
    let row = table
        .iter()
        .find(|r| r[1] == NAME)
        .unwrap_or_else(|| panic!("{table:?}"));
    assert_eq!(row[2], "Acme Labs");
    assert_eq!(row[3], "7B");
    assert_eq!(row[4], format!("{pass1}%"));
    assert_eq!(row[5], format!("{pass5}%"));

    // Sorting: pass@5 descending on the first click, ascending on the second.
    let header = c.find(Locator::Css("th[data-sort='pass5']")).await.unwrap();
    header.click().await.unwrap();
    let p5 = column(&rows(c).await, 5);
    assert!(p5.windows(2).all(|w| w[0] >= w[1]), "{p5:?}");
    header.click().await.unwrap();
    let p5 = column(&rows(c).await, 5);
    assert!(p5.windows(2).all(|w| w[0] <= w[1]), "{p5:?}");

    // Search: by organisation (lower-cased), then by another model's version.
    let search = c.find(Locator::Id("table-search")).await.unwrap();
    search.send_keys("acme").await.unwrap();
    let found = rows(c).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0][1], NAME);
    search.clear().await.unwrap();
    search.send_keys("1.0.0").await.unwrap();
    let found: Vec<String> = rows(c).await.into_iter().map(|r| r[1].clone()).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(!found.contains(&NAME.to_string()));

    // The other datasets read too.
    c.find(Locator::Css("button[data-dataset='multimodal']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let multi = rows(c).await;
    assert_eq!(multi.len(), multimodal, "{multi:?}");
    driver.close().await;
}
