//! A study's matrix planned from its run file: one cell per suite × model × template, each the `nmb eval` it
//! stands for; the dry run's table; the scoring the run file asks for; and a cap that needs every call priced.

use nmb_study::{
    check_cap, dry_run_text, read, scoring_config, BudgetError, CellEstimate, RunCellsError, Totals,
};

use crate::common::{text, write};

#[test]
fn every_cell_runs_unperturbed_and_once_per_perturbation() {
    let dir = tempfile::tempdir().unwrap();
    let with_perturb = format!(
        "perturb = [\"mismatch\", \"noise:0.2\"]\n{}",
        text("http://127.0.0.1:9", "")
    );
    let study = read(&write(dir.path(), &with_perturb)).unwrap();
    let cells = study.cells();
    assert_eq!(cells.len(), 2 * 2 * 3);
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[..3], ["A", "A [mismatch]", "A [noise:0.2]"]);
    let perturbs: Vec<Option<String>> = cells[..3]
        .iter()
        .map(|c| c.config.perturb.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(
        perturbs,
        [None, Some("mismatch".into()), Some("noise:0.2".into())]
    );
    for c in &cells {
        assert_eq!(c.config.name.as_deref(), Some(c.name.as_str()));
    }
}

#[test]
fn every_suite_runs_with_every_model_and_every_template() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("terse.jinja"), "{{ question }}").unwrap();
    let with_templates = format!(
        "templates = [\"terse.jinja\", \"bundled:paraphrase-1\"]\n{}",
        text("http://127.0.0.1:9", "")
    )
    .replace(
        "name = \"B\"",
        "name = \"B\"\nconcurrency = 3\ntemperature = \"none\"",
    );
    let study = read(&write(dir.path(), &with_templates)).unwrap();
    let cells = study.cells();
    assert_eq!(cells.len(), 2 * 2 * 2);
    assert_eq!(
        cells.iter().map(|c| c.index).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names[..4],
        [
            "A [terse]",
            "A [bundled:paraphrase-1]",
            "B [terse]",
            "B [bundled:paraphrase-1]"
        ]
    );
    for c in &cells {
        assert_eq!(
            c.config.study.as_deref(),
            Some("two-axis"),
            "runs are tagged"
        );
        assert_eq!(c.config.name.as_deref(), Some(c.name.as_str()));
        assert_eq!(c.config.samples, Some(1));
        assert!(c.template.is_some() && c.config.template.is_some());
        let a = c.model.contains("model-a");
        assert_eq!(c.price.is_some(), a, "only A has a price");
        assert_eq!(c.config.limits.concurrency == 3, !a);
        assert_eq!(
            c.config.params.unsent.is_empty(),
            a,
            "B sends no temperature"
        );
    }
    assert_eq!(
        cells[0].template.as_deref(),
        Some(dir.path().join("terse.jinja").as_path())
    );
    // The sample suite by its name, the file relative to the run file.
    assert_eq!(
        (cells[0].suite.as_str(), cells[0].config.limit),
        ("sample", Some(4))
    );
    let mcq = &cells[4];
    assert_eq!(
        mcq.suite,
        format!("mcq:{}", dir.path().join("data/mcq.jsonl").display())
    );
    assert_eq!(
        (mcq.config.suite.spec.as_str(), mcq.config.limit),
        (mcq.suite.as_str(), None)
    );
}

#[test]
fn the_dry_run_counts_each_cell_and_prices_what_has_a_price() {
    let dir = tempfile::tempdir().unwrap();
    let study = read(&write(dir.path(), &text("http://127.0.0.1:9", ""))).unwrap();
    let cells = study.cells();
    let rows: Vec<CellEstimate> = cells.iter().map(|c| CellEstimate::of(c).unwrap()).collect();
    // One sample of four sample tasks (a consult asks one request per turn) and of three questions.
    assert!(rows[0].requests >= 4, "{:?}", rows[0]);
    assert_eq!(
        rows[0].requests, rows[1].requests,
        "both models ask the same"
    );
    assert_eq!(rows[2].requests, 3);
    assert!(rows[0].max_dollars.is_some() && rows[1].max_dollars.is_none());
    let totals = Totals::of(&rows);
    assert_eq!(
        totals.requests,
        rows.iter().map(|r| r.requests).sum::<u64>()
    );
    assert_eq!(totals.unpriced, 2);

    let shown = dry_run_text(&study, &cells).unwrap();
    assert!(
        shown.contains("4 cell(s); nothing is sent or stored"),
        "{shown}"
    );
    for c in &cells {
        let row = (shown.lines())
            .find(|l| l.trim_start().starts_with(&format!("{}  ", c.index)))
            .unwrap_or_else(|| panic!("no row for cell {}: {shown}", c.index));
        assert!(
            row.contains(&c.name) && row.contains(&c.suite[..c.suite.len().min(20)]),
            "{row}"
        );
    }
    let total = shown
        .lines()
        .find(|l| l.starts_with("total:"))
        .expect("a total line");
    assert!(
        total.contains(&format!("{} request(s)", totals.requests)),
        "{total}"
    );
    assert!(
        total.contains("(2 cell(s) without a price not counted)"),
        "{total}"
    );
}

#[test]
fn the_run_files_scoring_and_cap_are_checked_against_its_models() {
    let dir = tempfile::tempdir().unwrap();
    let judged = text("http://127.0.0.1:9", "max_cost = 1.0").replace(
        "bertscore = false",
        "bertscore = false\nrubric = false\njudges = [\"openai:judge@http://127.0.0.1:9/v1\"]",
    );
    let path = write(dir.path(), &judged);
    let study = read(&path).unwrap();
    let cells = study.cells();
    let scoring = scoring_config(&study, &cells).unwrap();
    assert_eq!(scoring.judges.len(), 1);
    assert_eq!(scoring.bertscore, nmb_score::BertScoreSetting::Off);
    assert_eq!(scoring.rubric, nmb_score::RubricChoice::Off);
    assert_eq!(
        scoring.prices.0.len(),
        1,
        "A's price, for the report's costs"
    );

    // A cap needs every model's price, and no judge (the run file gives judges none).
    match check_cap(&study, &cells) {
        Err(e @ BudgetError::Unpriced { .. }) => {
            let shown = e.to_string();
            assert!(
                shown.contains("model-b") && shown.contains("study.toml"),
                "{shown}"
            );
        }
        other => panic!("expected the unpriced model, got {other:?}"),
    }
    let priced = judged.replace("name = \"B\"", "name = \"B\"\nprice = [1.0, 1.0]");
    let study = read(&write(dir.path(), &priced)).unwrap();
    let e = check_cap(&study, &study.cells()).unwrap_err();
    assert!(matches!(e, BudgetError::Judges { .. }), "{e}");
    let unjudged = priced.replace("judges = [\"openai:judge@http://127.0.0.1:9/v1\"]", "");
    let study = read(&write(dir.path(), &unjudged)).unwrap();
    check_cap(&study, &study.cells()).unwrap();

    // A judge spec nmb cannot parse is named with the run file.
    let bad = judged.replace("openai:judge@", "mistral:judge@");
    let study = read(&write(dir.path(), &bad)).unwrap();
    match scoring_config(&study, &study.cells()) {
        Err(e @ RunCellsError::Judge { .. }) => {
            assert!(e.to_string().contains("study.toml: scoring.judges"), "{e}")
        }
        other => panic!("expected the judge's error, got {:?}", other.err()),
    }
}
