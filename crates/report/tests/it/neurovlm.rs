//! The NeuroVLM-Bench section: two models answer the bundled `sample-structured` suite over loopback (right
//! answers, confident and unsure wrong classes, abstentions, invalid values, missing keys, broken JSON, markup in
//! a value), nmb-score's engine scores them, and the report is written in every format. Every number shown must be
//! the score report's (read from the struct, never typed here); the dollars per 1,000 images come from the
//! report's `--price` because scoring had none. Headless Chromium must render the section, its tables and both
//! charts.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{ReceivedRequest, Reply};
use nmb_report::{load_run, write_report, Prices, ReportOptions, RunData, Written};
use nmb_results::structured::StructuredReport;
use nmb_results::ScoreReport;
use nmb_stats::Estimate;
use nmb_store::Store;
use nmb_suite::{Reference, Suite};
use nmb_test_support::browser;
use serde_json::{json, Value};

const CLASSES: [&str; 5] = [
    "multiple sclerosis",
    "stroke",
    "tumor",
    "other abnormality",
    "normal",
];
const PRICED: &str = "nv-alpha";
const UNPRICED: &str = "nv-beta";

/// What a scripted answer does wrong (or not).
#[derive(Clone, Copy)]
enum Kind {
    Right,
    ConfidentWrong,
    UnsureWrong,
    Abstain,
    Invalid,
    Missing,
    Subtype,
    Icd,
    StringConfidence,
    Broken,
    Markup,
}

use Kind::*;

/// The answers by model, cycled over the cases.
fn plan(model: &str) -> &'static [Kind] {
    match model {
        PRICED => &[
            Right,
            Right,
            ConfidentWrong,
            Right,
            Abstain,
            Right,
            Invalid,
            Right,
            UnsureWrong,
            Missing,
            Right,
            Subtype,
            Right,
            Icd,
            StringConfidence,
            Broken,
        ],
        _ => &[
            UnsureWrong,
            Right,
            ConfidentWrong,
            Broken,
            Abstain,
            Right,
            Invalid,
            UnsureWrong,
            Markup,
            Icd,
        ],
    }
}

/// The sample-structured suite with a key in each case's notes, so the scripted model knows which case it sees.
fn keyed_suite() -> Suite {
    let mut suite = nmb_suite::sample::structured::build();
    for c in &mut suite.cases {
        c.notes = format!("Case key {}.", c.id);
    }
    suite
}

fn other_class(class: &str) -> &'static str {
    let i = CLASSES.iter().position(|c| *c == class).unwrap_or(0);
    CLASSES[(i + 1) % CLASSES.len()]
}

/// The nine keys answered from the reference, then spoiled as `kind` says.
fn answer(r: &Reference, kind: Kind, i: usize) -> String {
    let class = r.diagnosis.clone().unwrap_or_default();
    let confidence = 0.5 + 0.45 * ((i * 7) % 10) as f64 / 10.0;
    let mut a = json!({
        "modality": r.modality, "specialized_sequence": r.specialized_sequence, "plane": r.plane,
        "diagnosis_name": class, "diagnosis_detailed": r.diagnosis_detailed, "icd10_code": r.icd10_code,
        "severity_score": 0.5, "diagnosis_confidence": confidence, "severity_confidence": 0.5,
    });
    let wrong = json!({"diagnosis_name": other_class(&class), "diagnosis_detailed": null, "icd10_code": null});
    let patch = match kind {
        Right => json!({}),
        ConfidentWrong => merge(wrong, json!({"diagnosis_confidence": 0.95})),
        UnsureWrong => merge(wrong, json!({"diagnosis_confidence": 0.3})),
        Abstain => {
            json!({"diagnosis_name": null, "diagnosis_confidence": null, "specialized_sequence": "unknown"})
        }
        Invalid => {
            json!({"specialized_sequence": "DWI", "plane": "oblique", "severity_score": 1.7})
        }
        Subtype => {
            json!({"diagnosis_detailed": if class == "tumor" { "ischemic" } else { "glioma" }})
        }
        Icd => json!({"icd10_code": "Z99.9"}),
        StringConfidence => json!({"diagnosis_confidence": "0.8"}),
        Markup => {
            json!({"diagnosis_detailed": "<script>alert(1)</script><img src=x onerror=alert(2)>"})
        }
        Missing | Broken => json!({}),
    };
    a = merge(a, patch);
    match kind {
        Missing => {
            a.as_object_mut().unwrap().remove("plane");
        }
        Broken => return format!("{{\"modality\": \"MRI\", \"diagnosis_name\": \"{class}\""),
        _ => {}
    }
    a.to_string()
}

fn merge(mut a: Value, b: Value) -> Value {
    for (k, v) in b.as_object().unwrap() {
        a[k] = v.clone();
    }
    a
}

/// Answers each request from the case key in its text, as `plan(model)` says for that case's position.
fn responder(suite: &Suite) -> nmb_fake_server::Responder {
    let keyed: Vec<(String, Reference)> = suite
        .cases
        .iter()
        .map(|c| (c.notes.clone(), c.tasks[0].reference.clone().unwrap()))
        .collect();
    Arc::new(move |req: &ReceivedRequest| {
        let text = req.all_text();
        let Some(i) = keyed
            .iter()
            .position(|(key, _)| text.contains(key.as_str()))
        else {
            return Reply::Texts(vec!["no key".into(); req.samples() as usize]);
        };
        let kinds = plan(&req.model);
        let one = answer(&keyed[i].1, kinds[i % kinds.len()], i);
        Reply::Texts(vec![one; req.samples() as usize])
    })
}

fn score(store: &Arc<Store>, run_id: &str, suite: &Suite) -> ScoreReport {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut opts = nmb_score::ScoreOptions {
        rubric: None,
        taxonomy: false,
        bertscore: nmb_score::BertScoreSetting::Off,
        ..Default::default()
    };
    opts.bootstrap.resamples = 500;
    let scheduler = nmb_requests::Scheduler::new(nmb_requests::SchedulerConfig::default());
    rt.block_on(nmb_score::score_loaded(
        store, &scheduler, run_id, suite, &opts,
    ))
    .expect("scoring runs")
}

fn structured_runs(dir: &std::path::Path) -> Vec<RunData> {
    let store = Arc::new(Store::open_dir(dir.join("runs")).unwrap());
    let suite = keyed_suite();
    let server = common::server(responder(&suite));
    [PRICED, UNPRICED]
        .iter()
        .map(|m| {
            let id = common::run_model(&store, &server, &suite, m, 1);
            let scores = score(&store, &id, &suite);
            load_run(&store, &id, Some(scores)).unwrap()
        })
        .collect()
}

fn report_of(run: &RunData) -> &StructuredReport {
    run.scores.as_ref().unwrap().structured.as_ref().unwrap()
}

/// An estimate as the HTML tables write it.
fn pct_html(e: &Estimate) -> String {
    format!(
        "{:.1}%<br><span class=\"ci\">[{:.1}–{:.1}]</span>",
        e.value * 100.0,
        e.ci_low * 100.0,
        e.ci_high * 100.0
    )
}

fn num_html(e: &Estimate, d: usize) -> String {
    format!(
        "{:.d$}<br><span class=\"ci\">[{:.d$}–{:.d$}]</span>",
        e.value, e.ci_low, e.ci_high
    )
}

fn pct_md(e: &Estimate) -> String {
    format!(
        "{:.1}% [{:.1}–{:.1}]",
        e.value * 100.0,
        e.ci_low * 100.0,
        e.ci_high * 100.0
    )
}

/// The text between `start` (included) and the next `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"));
    let rest = &text[from..];
    &rest[..rest.find(end).map_or(rest.len(), |e| e + end.len())]
}

/// The table row whose first cell is `label`, within the block `nv-{kind}`.
fn row<'a>(section: &'a str, kind: &str, label: &str) -> &'a str {
    let block = between(section, &format!("<div class=\"nv-{kind}\">"), "</table>");
    between(block, &format!("<tr><td>{label}</td>"), "</tr>")
}

const FIELD_LABELS: [(&str, &str); 6] = [
    ("modality", "modality"),
    ("specialized_sequence", "specialized_sequence"),
    ("plane", "plane"),
    ("diagnosis_name", "diagnosis_name"),
    (
        "diagnosis_detailed",
        "diagnosis_detailed (given the right class)",
    ),
    (
        "diagnosis_joint",
        "diagnosis_joint (class and subtype jointly)",
    ),
];

const BLOCKS: [&str; 9] = [
    "overview",
    "fields",
    "classes",
    "confusion",
    "calibration",
    "safety",
    "abstentions",
    "key-abstentions",
    "efficiency",
];

#[test]
fn structured_runs_get_the_neurovlm_section_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let runs = structured_runs(dir.path());
    let mut opts = ReportOptions::new(dir.path().join("report"));
    opts.bootstrap.resamples = 500;
    opts.prices = Prices::from_specs(&[format!("{PRICED}=2,10")]).unwrap();
    let written = write_report(&runs, &opts).unwrap();
    for r in &runs {
        let s = report_of(r);
        assert_eq!(s.answers, 25, "every case answered");
        assert!(s.cost.price.is_none(), "scored without a price");
        assert!(s.calibration.is_some(), "confidences were given");
    }
    for flag in nmb_results::structured::FLAGS {
        assert!(
            runs.iter()
                .any(|r| report_of(r).safety_flags[flag].value > 0.0),
            "some answer raises {flag}"
        );
    }
    let html = std::fs::read_to_string(written.html.as_ref().unwrap()).unwrap();
    check_html(&html, &runs);
    check_markdown(&written, &runs);
    check_csv(&written, &runs);
    check_json(&written, &runs);
    check_browser(&written, &html);
}

fn check_html(html: &str, runs: &[RunData]) {
    assert!(html.contains("<h2 id=\"neurovlm\">NeuroVLM-Bench</h2>"));
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "model markup is escaped"
    );
    let sections: Vec<&str> = html
        .split("<section class=\"neurovlm\">")
        .skip(1)
        .map(|s| &s[..s.find("</section>").unwrap()])
        .collect();
    assert_eq!(sections.len(), runs.len(), "one section per run");
    for (r, section) in runs.iter().zip(&sections) {
        let s = report_of(r);
        assert!(section.contains(&format!("<h3>{} · sample-structured</h3>", r.name())));
        for kind in BLOCKS {
            assert!(
                section.contains(&format!("<div class=\"nv-{kind}\">")),
                "{kind}"
            );
        }
        assert_eq!(
            section.matches("<svg").count(),
            2,
            "heat map and reliability"
        );
        let overview = between(section, "<div class=\"nv-overview\">", "</table>");
        assert!(overview.contains(&format!("<td class=\"num\">{}</td>", s.answers)));
        assert!(overview.contains(&pct_html(&s.valid_json_rate)));
        assert!(overview.contains(&pct_html(&s.schema_valid_rate)));
        fields_html(section, s);
        classes_html(section, s);
        confusion_html(section, s);
        calibration_html(section, s);
        for (flag, rate) in &s.safety_flags {
            assert!(
                row(section, "safety", flag).contains(&pct_html(rate)),
                "{flag}"
            );
        }
        efficiency_html(section, r);
    }
    // Per case: one tag per scored field and one per flag raised, over both runs.
    let verdicts: Vec<_> = runs
        .iter()
        .flat_map(|r| &r.scores.as_ref().unwrap().samples)
        .filter_map(|s| s.structured.as_ref())
        .collect();
    let fields: usize = verdicts.iter().map(|v| v.fields.len()).sum();
    let flags: usize = verdicts.iter().map(|v| v.flags.len()).sum();
    assert_eq!(html.matches(" field\">").count(), fields);
    assert_eq!(html.matches("tag bad flag\">").count(), flags);
    assert!(flags > 0);
}

fn fields_html(section: &str, s: &StructuredReport) {
    for (field, label) in FIELD_LABELS {
        let f = &s.fields[field];
        let metrics = row(section, "fields", label);
        assert!(
            metrics.contains(&format!("<td class=\"num\">{}</td>", f.n)),
            "{field}"
        );
        for e in [
            &f.accuracy,
            &f.balanced_accuracy,
            &f.macro_f1,
            &f.weighted_f1,
            &f.abstention_rate,
        ] {
            assert!(metrics.contains(&pct_html(e)), "{field}: {metrics}");
        }
        assert!(metrics.ends_with(&format!("<td class=\"num\">{}</td></tr>", f.invalid)));
        let abstained = row(section, "abstentions", label);
        assert!(abstained.contains(&pct_html(&f.abstention_rate)));
        assert!(abstained.ends_with(&format!(
            "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            f.abstained, f.invalid
        )));
    }
    assert_eq!(s.abstentions.len(), 9, "every answer key");
    for (key, a) in &s.abstentions {
        let cells = row(section, "key-abstentions", key);
        assert!(cells.contains(&pct_html(&a.rate)), "{key}: {cells}");
        assert!(
            cells.contains(&format!("<td class=\"num\">{}</td>", a.count)),
            "{key}"
        );
    }
}

fn classes_html(section: &str, s: &StructuredReport) {
    let per_class = &s.fields["diagnosis_name"].per_class;
    assert_eq!(per_class.len(), 5);
    for (class, c) in per_class {
        let cells = row(section, "classes", class);
        for e in [&c.precision, &c.recall, &c.f1] {
            match e {
                Some(e) => assert!(cells.contains(&pct_html(e)), "{class}"),
                None => assert!(cells.contains("title=\"undefined: "), "{class}"),
            }
        }
        assert!(cells.ends_with(&format!("<td class=\"num\">{}</td></tr>", c.support)));
    }
}

fn confusion_html(section: &str, s: &StructuredReport) {
    let c = &s.confusion;
    let svg = between(section, "<div class=\"nv-confusion\">", "</svg>");
    assert_eq!(
        svg.matches("class=\"cell\"").count(),
        c.classes.len() * c.columns.len()
    );
    for (class, counts) in c.classes.iter().zip(&c.counts) {
        let total: u64 = counts.iter().sum();
        for (col, n) in c.columns.iter().zip(counts) {
            let title = format!("reference {class}, answer {col}: {n} of {total}");
            assert!(svg.contains(&title), "{title}");
        }
    }
    assert_eq!(
        c.counts.iter().flatten().sum::<u64>(),
        s.fields["diagnosis_name"].n as u64,
        "every answer with a reference class is in the matrix"
    );
}

fn calibration_html(section: &str, s: &StructuredReport) {
    let c = s.calibration.as_ref().unwrap();
    let block = between(section, "<div class=\"nv-calibration\">", "</details>");
    for e in [&c.ece, &c.adaptive_ece, &c.brier] {
        assert!(block.contains(&num_html(e, 3)));
    }
    if let Some(a) = &c.auroc {
        assert!(block.contains(&num_html(a, 3)));
    }
    assert!(block.contains(&format!("{} answer(s) left out", s.calibration_excluded)));
    assert!(
        s.calibration_excluded > 0,
        "abstentions and strings are left out"
    );
    let filled = c.bins.iter().filter(|b| b.count > 0).count();
    assert_eq!(block.matches("class=\"bin\"").count(), filled);
    assert_eq!(c.bins.len(), 10);
}

fn efficiency_html(section: &str, r: &RunData) {
    let stored = &report_of(r).cost;
    let latency = row(section, "efficiency", "median latency (ms)");
    let median = stored.median_latency_ms.as_ref().unwrap().value;
    assert!(latency.contains(&format!("{median:.0}<br>")), "{latency}");
    let tokens = row(section, "efficiency", "tokens per image");
    let per_image = stored.tokens_per_image.as_ref().unwrap();
    assert!(tokens.contains(&format!("{:.1}<br>", per_image.value)));
    let dollars = row(section, "efficiency", "dollars per 1,000 images");
    if r.model().ends_with(UNPRICED) {
        assert!(
            dollars.contains("no price (use --price MODEL=IN,OUT)"),
            "{dollars}"
        );
        return;
    }
    // Every answer recorded both token counts, so the mean dollars are the price applied to the mean tokens.
    let tin = stored.tokens_in_per_image.as_ref().unwrap().value;
    let tout = stored.tokens_out_per_image.as_ref().unwrap().value;
    let expected = 1000.0 * (tin * 2.0 + tout * 10.0) / 1e6;
    let shown: f64 = between(dollars, "$", "<br>")
        .trim_start_matches('$')
        .trim_end_matches("<br>")
        .parse()
        .unwrap();
    assert!((shown - expected).abs() < 1e-4, "{shown} vs {expected}");
    assert!(expected > 0.0);
    let caption = between(section, "<div class=\"nv-efficiency\">", "</table>");
    assert!(caption
        .contains("Price: $2 in, $10 out per million tokens (given to the report with --price)."));
}

fn check_markdown(written: &Written, runs: &[RunData]) {
    let md = std::fs::read_to_string(written.markdown.as_ref().unwrap()).unwrap();
    assert!(md.contains("## NeuroVLM-Bench"));
    for r in runs {
        let s = report_of(r);
        let section = between(
            &md,
            &format!("### {} · sample-structured", r.name()),
            "#### Efficiency",
        );
        for heading in [
            "Answers",
            "Per-field metrics",
            "diagnosis_name by class",
            "diagnosis_name confusion matrix",
            "Calibration of diagnosis_confidence",
            "Reliability bins",
            "Safety flags",
            "Abstentions",
        ] {
            assert!(section.contains(&format!("#### {heading}\n")), "{heading}");
        }
        for (field, label) in FIELD_LABELS {
            let f = &s.fields[field];
            assert!(section.contains(&format!("| {label} | {} | {} |", f.n, pct_md(&f.accuracy))));
        }
        let c = &s.confusion;
        for (class, counts) in c.classes.iter().zip(&c.counts) {
            let cells: Vec<String> = counts.iter().map(u64::to_string).collect();
            assert!(
                section.contains(&format!("| {class} | {} |", cells.join(" | "))),
                "{class}"
            );
        }
        for (flag, rate) in &s.safety_flags {
            assert!(section.contains(&format!("| {flag} |")) && section.contains(&pct_md(rate)));
        }
        let filled = s
            .calibration
            .as_ref()
            .unwrap()
            .bins
            .iter()
            .filter(|b| b.count > 0);
        for b in filled {
            let acc = b.accuracy.unwrap() * 100.0;
            assert!(section.contains(&format!(
                "| {} | {:.3} | {acc:.1}% |",
                b.count,
                b.confidence.unwrap()
            )));
        }
    }
}

fn check_csv(written: &Written, runs: &[RunData]) {
    let path = written.structured_csv.as_ref().expect("structured.csv");
    assert!(path.ends_with("structured.csv"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "run_id", "model", "section", "field", "class", "metric", "value", "ci_low", "ci_high",
            "n"
        ]
    );
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    for r in runs {
        let s = report_of(r);
        let id = r.info.run_id.as_str();
        let find = |section: &str, field: &str, class: &str, metric: &str| -> Vec<String> {
            let hits: Vec<&Vec<String>> = rows
                .iter()
                .filter(|x| {
                    x[0] == id
                        && x[2] == section
                        && x[3] == field
                        && x[4] == class
                        && x[5] == metric
                })
                .collect();
            assert_eq!(hits.len(), 1, "{section}/{field}/{class}/{metric}");
            hits[0].clone()
        };
        for (field, _) in FIELD_LABELS {
            let f = &s.fields[field];
            let acc = find("field", field, "", "accuracy");
            assert_eq!(acc[6].parse::<f64>().unwrap(), f.accuracy.value);
            assert_eq!(acc[7].parse::<f64>().unwrap(), f.accuracy.ci_low);
            assert_eq!(acc[8].parse::<f64>().unwrap(), f.accuracy.ci_high);
            assert_eq!(
                find("field", field, "", "abstained")[6],
                f.abstained.to_string()
            );
        }
        let c = &s.confusion;
        for (class, counts) in c.classes.iter().zip(&c.counts) {
            for (col, n) in c.columns.iter().zip(counts) {
                let cell = find(
                    "confusion",
                    "diagnosis_name",
                    class,
                    &format!("predicted:{col}"),
                );
                assert_eq!(cell[6], n.to_string());
            }
        }
        for (flag, rate) in &s.safety_flags {
            assert_eq!(
                find("safety", "", "", flag)[6].parse::<f64>().unwrap(),
                rate.value
            );
        }
        let ece = find("calibration", "diagnosis_confidence", "", "ece");
        assert_eq!(
            ece[6].parse::<f64>().unwrap(),
            s.calibration.as_ref().unwrap().ece.value
        );
        let dollars = find("efficiency", "", "", "dollars_per_1000_images");
        assert_eq!(dollars[6].is_empty(), r.model().ends_with(UNPRICED));
    }
    let samples = std::fs::read_to_string(written.csv_samples.as_ref().unwrap()).unwrap();
    let mut reader = csv::Reader::from_reader(samples.as_bytes());
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (task, flags) = (column("task_id"), column("structured_flags"));
    let by_task: BTreeMap<(String, String), String> = reader
        .records()
        .map(|r| r.unwrap())
        .map(|r| {
            (
                (r[0].to_string(), r[task].to_string()),
                r[flags].to_string(),
            )
        })
        .collect();
    for r in runs {
        for s in &r.scores.as_ref().unwrap().samples {
            let v = s.structured.as_ref().unwrap();
            assert_eq!(
                by_task[&(r.info.run_id.clone(), s.task_id.clone())],
                v.flags.join(";")
            );
        }
    }
}

fn check_json(written: &Written, runs: &[RunData]) {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(written.json.as_ref().unwrap()).unwrap())
            .unwrap();
    for (i, r) in runs.iter().enumerate() {
        // Both sides parsed from text, so floats compare as the file holds them.
        let expected: Value =
            serde_json::from_str(&serde_json::to_string(report_of(r)).unwrap()).unwrap();
        assert_eq!(
            json["runs"][i]["scores"]["structured"], expected,
            "report.json carries the structured report as scored"
        );
    }
}

fn check_browser(written: &Written, html: &str) {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let page = written.html.as_ref().unwrap();
    let (dom, log) = browser::dump_dom(&chromium, page);
    assert!(
        dom.contains("id=\"neurovlm\""),
        "the section is in the DOM; log:\n{log}"
    );
    assert_eq!(dom.matches("<section class=\"neurovlm\">").count(), 2);
    for kind in BLOCKS {
        assert_eq!(
            dom.matches(&format!("<div class=\"nv-{kind}\">")).count(),
            2,
            "{kind}"
        );
    }
    assert_eq!(dom.matches("<svg").count(), html.matches("<svg").count());
    assert_eq!(
        dom.matches("class=\"cell\"").count(),
        html.matches("class=\"cell\"").count()
    );
    assert_eq!(
        dom.matches("class=\"bin\"").count(),
        html.matches("class=\"bin\"").count()
    );
    let png = browser::screenshot_dir().join("report-neurovlm-two-runs.png");
    browser::screenshot(&chromium, page, &png, 1280, 6400);
    println!("screenshot: {}", png.display());
}
