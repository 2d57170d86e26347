//! The NeuroVLM-Bench section of a run with `structured` tasks, built once as tables (and CSV rows) so the HTML,
//! Markdown and CSV copies cannot drift apart. The numbers are the score report's; only the efficiency is
//! recomputed, when scoring had no price and the report has one.

use nmb_results::structured::FieldReport;
use nmb_results::structured::CONFIDENT;
use nmb_results::structured::{efficiency, Efficiency, StructuredReport, Usage, FIELDS, FLAGS};
use nmb_stats::{Bin, Estimate};

use crate::input::RunData;
use crate::sections::analysis::{Analysis, Price};
use crate::table::{percent, Cell, Table};

/// What the efficiency table says when neither scoring nor the report had a price.
pub const NO_PRICE: &str = "no price (use --price MODEL=IN,OUT)";

/// One run's structured numbers.
pub struct Section<'a> {
    pub run: &'a RunData,
    pub report: &'a StructuredReport,
    /// The score report's efficiency, or the same recomputed at the report's price.
    pub cost: Efficiency,
    /// Where the price came from, or why the dollars are missing.
    pub cost_note: String,
}

/// A section for every run whose scores have structured numbers, in run order. The report's price for a run is
/// the one its cost estimate took (`analysis::price_for` over `--price`).
pub fn sections<'a>(runs: &'a [RunData], analysis: &Analysis) -> Vec<Section<'a>> {
    runs.iter()
        .zip(&analysis.costs)
        .filter_map(|(run, c)| {
            let report = run.scores.as_ref()?.structured.as_ref()?;
            let (cost, cost_note) = cost(run, report, c.price, &analysis.bootstrap);
            Some(Section {
                run,
                report,
                cost,
                cost_note,
            })
        })
        .collect()
}

/// The price the scores were made with, else the report's (`--price`) applied to the stored usage.
fn cost(
    run: &RunData,
    report: &StructuredReport,
    price: Option<Price>,
    cfg: &nmb_stats::BootstrapConfig,
) -> (Efficiency, String) {
    let stored = report.cost.clone();
    if stored.price.is_some() {
        return (stored, "given when scoring".into());
    }
    let Some(price) = price else {
        return (stored, NO_PRICE.into());
    };
    match efficiency(&usages(run), Some(price), cfg) {
        Ok(e) => (e, "given to the report with --price".into()),
        Err(e) => (
            stored,
            format!("the report's price could not be applied: {e}"),
        ),
    }
}

/// The usage of every answered structured sample; the case id comes from its score, as scoring took it.
fn usages(run: &RunData) -> Vec<Usage<'_>> {
    let scored = run.scored();
    run.samples
        .iter()
        .filter(|s| s.status == nmb_store::SampleStatus::Ok)
        .filter_map(|s| {
            let score = *scored.get(&(s.task_id.as_str(), s.sample_index))?;
            score.structured.as_ref()?;
            Some(Usage::of(score.case_id.as_str(), s))
        })
        .collect()
}

/// The scored fields in report order (any the scorer adds later come last).
pub fn fields(report: &StructuredReport) -> Vec<(&str, &FieldReport)> {
    let known = FIELDS
        .iter()
        .filter_map(|f| report.fields.get_key_value(*f));
    let other = report
        .fields
        .iter()
        .filter(|(f, _)| !FIELDS.contains(&f.as_str()));
    known.chain(other).map(|(f, r)| (f.as_str(), r)).collect()
}

/// The row label of a field: the subtype is scored two ways, and the label says which.
pub fn field_label(field: &str) -> String {
    match field {
        "diagnosis_detailed" => "diagnosis_detailed (given the right class)".into(),
        "diagnosis_joint" => "diagnosis_joint (class and subtype jointly)".into(),
        other => other.to_string(),
    }
}

/// What a safety flag means, in plain words (see `nmb_score::structured::safety`).
pub fn flag_meaning(flag: &str) -> String {
    match flag {
        "missing_field" => {
            "a mandatory key is absent (an explicit null is an abstention, not a missing key)"
                .into()
        }
        "subtype_inconsistent" => {
            "the subtype belongs to another class, or a subtype is given with normal".into()
        }
        "icd10_with_normal" => "an ICD-10 code is given with a normal diagnosis".into(),
        "icd10_class_mismatch" => {
            "the ICD-10 code starts with none of the named class's accepted prefixes".into()
        }
        "score_out_of_range" => "a score or confidence lies outside [0, 1]".into(),
        "confident_wrong" => {
            format!("diagnosis_confidence of at least {CONFIDENT} on a wrong class")
        }
        _ => String::new(),
    }
}

fn num(e: Option<&Estimate>, digits: usize, unit: &str) -> Cell {
    match e {
        Some(e) => Cell::with_detail(
            format!("{}{:.digits$}", unit, e.value),
            format!("[{unit}{:.digits$}–{unit}{:.digits$}]", e.ci_low, e.ci_high),
        ),
        None => Cell::new("–"),
    }
}

fn count(n: impl ToString) -> Cell {
    Cell::new(n.to_string())
}

/// Answers, valid JSON and schema-valid rates.
pub fn overview(s: &Section) -> Table {
    let r = s.report;
    let mut t = Table::new(
        "Valid JSON: the answer is one JSON object. Schema-valid: exactly the nine keys, each an allowed value or an \
         abstention (null).",
        &[("answers", true), ("valid JSON", true), ("schema-valid", true)],
    );
    t.push(vec![
        count(r.answers),
        percent(Some(&r.valid_json_rate)),
        percent(Some(&r.schema_valid_rate)),
    ]);
    t
}

/// Per field: n, accuracy, balanced accuracy, macro- and weighted-F1, abstention rate, invalid values.
pub fn field_metrics(s: &Section) -> Table {
    per_field(
        s,
        "Per field, over answers whose reference has the field. An abstention (null) counts as wrong in accuracy and \
         F1; an invalid value (not allowed by the schema) counts as wrong and is never an abstention.",
        &[
            ("accuracy", true),
            ("balanced accuracy", true),
            ("macro-F1", true),
            ("weighted-F1", true),
            ("abstention rate", true),
        ],
        |f| {
            vec![
                percent(Some(&f.accuracy)),
                percent(Some(&f.balanced_accuracy)),
                percent(Some(&f.macro_f1)),
                percent(Some(&f.weighted_f1)),
                percent(Some(&f.abstention_rate)),
            ]
        },
    )
}

/// One row per scored field: its label and n, the `metrics` columns, then its invalid values.
fn per_field(
    s: &Section,
    caption: &str,
    metrics: &[(&str, bool)],
    cells: impl Fn(&FieldReport) -> Vec<Cell>,
) -> Table {
    let mut columns = vec![("field", false), ("n", true)];
    columns.extend_from_slice(metrics);
    columns.push(("invalid", true));
    let mut t = Table::new(caption, &columns);
    for (field, f) in fields(s.report) {
        let mut row = vec![Cell::new(field_label(field)), count(f.n)];
        row.extend(cells(f));
        row.push(count(f.invalid));
        t.push(row);
    }
    t
}

/// Precision, recall and F1 of each class of `field`, with support; `None` when the field was not scored.
pub fn per_class(s: &Section, field: &str) -> Option<Table> {
    let f = s.report.fields.get(field)?;
    let mut t = Table::new(
        format!(
            "{field} by class. – marks a number whose denominator is zero: precision of a class no answer named, \
             recall of a class no reference has, F1 of a class that is neither."
        ),
        &[
            ("class", false),
            ("precision", true),
            ("recall", true),
            ("F1", true),
            ("support", true),
        ],
    );
    for (class, c) in &f.per_class {
        let cell = |e: Option<&Estimate>, why: &str| match e {
            Some(_) => percent(e),
            None => Cell::undefined(format!("undefined: {why}")),
        };
        t.push(vec![
            Cell::new(class.clone()),
            cell(c.precision.as_ref(), "no answer named this class"),
            cell(c.recall.as_ref(), "no reference has this class"),
            cell(
                c.f1.as_ref(),
                "the class is neither a reference nor a prediction",
            ),
            count(c.support),
        ]);
    }
    Some(t)
}

/// The diagnosis_name confusion matrix as a table (the HTML draws it as a heat map).
pub fn confusion(s: &Section) -> Table {
    let c = &s.report.confusion;
    let mut columns: Vec<(&str, bool)> = vec![("true \\ predicted", false)];
    columns.extend(c.columns.iter().map(|col| (col.as_str(), true)));
    let mut t = Table::new(
        "diagnosis_name confusion matrix: rows are reference classes, columns the class answered, then abstentions \
         and invalid or missing classes.",
        &columns,
    );
    for (class, row) in c.classes.iter().zip(&c.counts) {
        let mut cells = vec![Cell::new(class.clone())];
        cells.extend(row.iter().map(count));
        t.push(cells);
    }
    t
}

/// ECE, adaptive ECE, Brier score and AUROC of diagnosis_confidence; `None` without a usable confidence.
pub fn calibration(s: &Section) -> Option<Table> {
    let c = s.report.calibration.as_ref()?;
    let mut t = Table::new(
        format!(
            "Stated diagnosis_confidence against a correct diagnosis_name: expected calibration error ({} \
             equal-width bins), adaptive ECE (equal-mass bins), Brier score and AUROC (does confidence rank right \
             answers above wrong ones). {} answer(s) left out: no confidence, or one outside [0, 1].",
            c.bins.len(),
            s.report.calibration_excluded
        ),
        &[
            ("ECE", true),
            ("adaptive ECE", true),
            ("Brier", true),
            ("AUROC", true),
            ("excluded", true),
        ],
    );
    let auroc = match &c.auroc {
        Some(a) => num(Some(a), 3, ""),
        None => Cell::undefined("undefined: every answer is right, or every one is wrong"),
    };
    t.push(vec![
        num(Some(&c.ece), 3, ""),
        num(Some(&c.adaptive_ece), 3, ""),
        num(Some(&c.brier), 3, ""),
        auroc,
        count(s.report.calibration_excluded),
    ]);
    Some(t)
}

/// The reliability bins: range, answers, mean stated confidence and accuracy.
pub fn reliability_bins(bins: &[Bin]) -> Table {
    let mut t = Table::new(
        "Reliability bins of diagnosis_confidence (a well-calibrated model's accuracy equals its mean confidence).",
        &[
            ("confidence bin", false),
            ("answers", true),
            ("mean confidence", true),
            ("accuracy", true),
        ],
    );
    for b in bins {
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| {
            v.map_or(Cell::new("–"), |v| Cell::new(f(v)))
        };
        t.push(vec![
            Cell::new(bin_label(b)),
            count(b.count),
            opt(b.confidence, &|v| format!("{v:.3}")),
            opt(b.accuracy, &|v| format!("{:.1}%", v * 100.0)),
        ]);
    }
    t
}

/// `[lo, hi)`, the last bin closed.
pub fn bin_label(b: &Bin) -> String {
    let close = if b.hi >= 1.0 { ']' } else { ')' };
    format!("[{:.1}, {:.1}{close}", b.lo, b.hi)
}

/// The share of answers raising each safety flag.
pub fn safety(s: &Section) -> Table {
    let mut t = Table::new(
        "Safety flags: what a clinician would not accept whatever the image showed. Rate: share of answers raising \
         the flag.",
        &[("flag", false), ("meaning", false), ("rate", true)],
    );
    let known = FLAGS
        .iter()
        .filter_map(|f| s.report.safety_flags.get_key_value(*f));
    let other = s
        .report
        .safety_flags
        .iter()
        .filter(|(f, _)| !FLAGS.contains(&f.as_str()));
    for (flag, rate) in known.chain(other) {
        t.push(vec![
            Cell::new(flag.clone()),
            Cell::new(flag_meaning(flag)),
            percent(Some(rate)),
        ]);
    }
    t
}

/// Per field: how often the model abstained, and how often it gave a value the schema does not allow.
pub fn abstentions(s: &Section) -> Table {
    per_field(
        s,
        "Abstentions (null, \"unknown\", \"n/a\" and the like) per field, apart from invalid values.",
        &[("abstention rate", true), ("abstained", true)],
        |f| vec![percent(Some(&f.abstention_rate)), count(f.abstained)],
    )
}

/// Abstentions on each of the nine answer keys, over every answer (the scores and confidences included).
pub fn key_abstentions(s: &Section) -> Table {
    let mut t = Table::new(
        format!(
            "Abstentions on each answer key, over all {} answers (invalid JSON included, as no abstention).",
            s.report.answers
        ),
        &[("key", false), ("abstained", true), ("rate", true)],
    );
    for (key, a) in &s.report.abstentions {
        t.push(vec![
            Cell::new(key.as_str()),
            count(a.count),
            percent(Some(&a.rate)),
        ]);
    }
    t
}

/// Median latency, tokens per image and dollars per 1,000 images; the caption names the price.
pub fn efficiency_table(s: &Section) -> Table {
    let e = &s.cost;
    let price = match e.price {
        Some(p) => format!(
            "Price: ${} in, ${} out per million tokens ({}).",
            p.input_per_mtok, p.output_per_mtok, s.cost_note
        ),
        None => format!("Price: {}.", s.cost_note),
    };
    let mut t = Table::new(
        format!(
            "Efficiency per image (one answer per image), each with a bootstrap interval over cases. A call that \
             returned several answers shares its tokens among them. {price}"
        ),
        &[("measure", false), ("value", true)],
    );
    let dollars = match (&e.dollars_per_1000_images, e.price) {
        (Some(d), _) => num(Some(d), 4, "$"),
        (None, None) => Cell::new(NO_PRICE),
        (None, Some(_)) => Cell::undefined("undefined: no answer recorded its tokens"),
    };
    let rows = [
        (
            "median latency (ms)",
            num(e.median_latency_ms.as_ref(), 0, ""),
        ),
        (
            "tokens in per image",
            num(e.tokens_in_per_image.as_ref(), 1, ""),
        ),
        (
            "tokens out per image",
            num(e.tokens_out_per_image.as_ref(), 1, ""),
        ),
        ("tokens per image", num(e.tokens_per_image.as_ref(), 1, "")),
        ("dollars per 1,000 images", dollars),
    ];
    for (name, cell) in rows {
        t.push(vec![Cell::new(name), cell]);
    }
    t
}

/// A plain share as a percentage; a dash where undefined.
fn share(v: Option<f64>) -> Cell {
    v.map_or(Cell::muted("–"), |v| {
        Cell::new(format!("{:.1}%", 100.0 * v))
    })
}

/// nmb's reading and the paper's side by side, field by field, when scoring asked for the paper's
/// (`--protocol neurovlm-paper`). The paper's numbers have no intervals: its evaluator's bootstrap is unseeded.
pub fn paper_reading(s: &Section) -> Option<Table> {
    let paper = s.report.paper.as_ref()?;
    let mut t = Table::new(
        "nmb's reading beside the paper's (the authors' evaluate_detailed.py, ChatMED/neurovlm-bench at 6e87ba4); \
         docs/neurovlm-paper.md lists every rule where they differ.",
        &[
            ("field", false),
            ("n nmb", true),
            ("n paper", true),
            ("balanced accuracy nmb", true),
            ("balanced accuracy paper", true),
            ("macro-F1 nmb", true),
            ("macro-F1 paper", true),
            ("weighted-F1 nmb", true),
            ("weighted-F1 paper", true),
        ],
    );
    for (field, p) in &paper.fields {
        let ours = s.report.fields.get(field);
        t.push(vec![
            Cell::new(field_label(field)),
            ours.map_or(Cell::muted("–"), |f| count(f.n)),
            count(p.n),
            percent(ours.map(|f| &f.balanced_accuracy)),
            share(Some(p.balanced_accuracy)),
            percent(ours.map(|f| &f.macro_f1)),
            share(Some(p.macro_f1)),
            percent(ours.map(|f| &f.weighted_f1)),
            share(Some(p.weighted_f1)),
        ]);
    }
    Some(t)
}

/// The answer-level numbers of both readings: valid JSON, calibration of the stated diagnosis confidence.
pub fn paper_totals(s: &Section) -> Option<Table> {
    let paper = s.report.paper.as_ref()?;
    let mut t = Table::new(
        "The paper's calibration counts a missing confidence as 0 and clips 85 to 1, with right-closed bins; its \
         valid-JSON rate is the share of answers whose object (first { to last }) parsed.",
        &[("measure", false), ("nmb", true), ("paper", true)],
    );
    let ours = s.report.calibration.as_ref();
    let theirs = paper.calibration.get("diagnosis_name");
    let rows = [
        (
            "valid JSON",
            percent(Some(&s.report.valid_json_rate)),
            share(Some(paper.json_valid_pct / 100.0)),
        ),
        (
            "ECE",
            num(ours.map(|c| &c.ece), 3, ""),
            plain(theirs.and_then(|c| c.ece)),
        ),
        (
            "Brier",
            num(ours.map(|c| &c.brier), 3, ""),
            plain(theirs.and_then(|c| c.brier)),
        ),
        (
            "AUROC",
            num(ours.and_then(|c| c.auroc.as_ref()), 3, ""),
            plain(theirs.and_then(|c| c.auroc)),
        ),
    ];
    for (name, a, b) in rows {
        t.push(vec![Cell::new(name), a, b]);
    }
    Some(t)
}

fn plain(v: Option<f64>) -> Cell {
    v.map_or(Cell::muted("–"), |v| Cell::new(format!("{v:.3}")))
}

/// Every table of a section under its heading, in report order (the HTML draws the confusion matrix and the
/// reliability bins as charts instead).
pub fn tables(s: &Section) -> Vec<(&'static str, Table)> {
    let mut out = vec![
        ("Answers", overview(s)),
        ("Per-field metrics", field_metrics(s)),
    ];
    if let (Some(fields), Some(totals)) = (paper_reading(s), paper_totals(s)) {
        out.push(("nmb's reading and the paper's", fields));
        out.push(("Validity and calibration in both readings", totals));
    }
    if let Some(t) = per_class(s, "diagnosis_name") {
        out.push(("diagnosis_name by class", t));
    }
    out.push(("diagnosis_name confusion matrix", confusion(s)));
    if let (Some(t), Some(c)) = (calibration(s), &s.report.calibration) {
        out.push(("Calibration of diagnosis_confidence", t));
        out.push(("Reliability bins", reliability_bins(&c.bins)));
    }
    out.push(("Safety flags", safety(s)));
    out.push(("Abstentions", abstentions(s)));
    out.push(("Abstentions by answer key", key_abstentions(s)));
    out.push(("Efficiency", efficiency_table(s)));
    out
}

/// One row of `structured.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub section: &'static str,
    pub field: String,
    pub class: String,
    pub metric: String,
    pub value: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub n: Option<usize>,
}

impl Row {
    fn new(section: &'static str, field: &str, metric: &str) -> Row {
        Row {
            section,
            field: field.into(),
            metric: metric.into(),
            ..Row::default()
        }
    }

    fn estimate(mut self, e: Option<&Estimate>) -> Row {
        if let Some(e) = e {
            self.value = Some(e.value);
            self.ci = Some((e.ci_low, e.ci_high));
            self.n = Some(e.n);
        }
        self
    }

    fn with(mut self, v: Option<f64>, n: Option<usize>) -> Row {
        self.value = v;
        self.n = n;
        self
    }

    fn class(mut self, class: &str) -> Row {
        self.class = class.into();
        self
    }
}

/// Every number of a section, one row per (section, field, class, metric).
pub fn rows(s: &Section) -> Vec<Row> {
    let r = s.report;
    let mut out = vec![
        Row::new("overall", "", "answers").with(Some(r.answers as f64), Some(r.answers)),
        Row::new("overall", "", "valid_json_rate").estimate(Some(&r.valid_json_rate)),
        Row::new("overall", "", "schema_valid_rate").estimate(Some(&r.schema_valid_rate)),
    ];
    for (field, f) in fields(r) {
        out.extend(field_rows(field, f));
    }
    out.extend(confusion_rows(r));
    out.extend(calibration_rows(r));
    for (flag, rate) in &r.safety_flags {
        out.push(Row::new("safety", "", flag).estimate(Some(rate)));
    }
    for (key, a) in &r.abstentions {
        out.push(
            Row::new("abstention", key, "abstained").with(Some(a.count as f64), Some(r.answers)),
        );
        out.push(Row::new("abstention", key, "rate").estimate(Some(&a.rate)));
    }
    out.extend(efficiency_rows(&s.cost));
    out
}

fn field_rows(field: &str, f: &FieldReport) -> Vec<Row> {
    let n = Some(f.n);
    let mut out: Vec<Row> = [
        ("accuracy", &f.accuracy),
        ("balanced_accuracy", &f.balanced_accuracy),
        ("macro_f1", &f.macro_f1),
        ("weighted_f1", &f.weighted_f1),
        ("abstention_rate", &f.abstention_rate),
    ]
    .into_iter()
    .map(|(m, e)| Row::new("field", field, m).estimate(Some(e)))
    .collect();
    out.push(Row::new("field", field, "abstained").with(Some(f.abstained as f64), n));
    out.push(Row::new("field", field, "invalid").with(Some(f.invalid as f64), n));
    for (class, c) in &f.per_class {
        for (m, e) in [
            ("precision", &c.precision),
            ("recall", &c.recall),
            ("f1", &c.f1),
        ] {
            out.push(
                Row::new("class", field, m)
                    .class(class)
                    .estimate(e.as_ref()),
            );
        }
        let support = Some(c.support as usize);
        out.push(
            Row::new("class", field, "support")
                .class(class)
                .with(Some(c.support as f64), support),
        );
    }
    out
}

/// One row per cell: `class` is the reference class, the metric names the column (`predicted:tumor`).
fn confusion_rows(r: &StructuredReport) -> Vec<Row> {
    let c = &r.confusion;
    let mut out = Vec::new();
    for (class, row) in c.classes.iter().zip(&c.counts) {
        let total: u64 = row.iter().sum();
        for (col, n) in c.columns.iter().zip(row) {
            let metric = format!("predicted:{col}");
            out.push(
                Row::new("confusion", "diagnosis_name", &metric)
                    .class(class)
                    .with(Some(*n as f64), Some(total as usize)),
            );
        }
    }
    out
}

fn calibration_rows(r: &StructuredReport) -> Vec<Row> {
    const FIELD: &str = "diagnosis_confidence";
    let excluded = r.calibration_excluded;
    let mut out =
        vec![Row::new("calibration", FIELD, "excluded").with(Some(excluded as f64), None)];
    let Some(c) = &r.calibration else { return out };
    for (m, e) in [
        ("ece", Some(&c.ece)),
        ("adaptive_ece", Some(&c.adaptive_ece)),
        ("brier", Some(&c.brier)),
        ("auroc", c.auroc.as_ref()),
    ] {
        out.push(Row::new("calibration", FIELD, m).estimate(e));
    }
    for b in &c.bins {
        let label = bin_label(b);
        let n = Some(b.count);
        out.push(
            Row::new("reliability", FIELD, "count")
                .class(&label)
                .with(Some(b.count as f64), n),
        );
        out.push(
            Row::new("reliability", FIELD, "mean_confidence")
                .class(&label)
                .with(b.confidence, n),
        );
        out.push(
            Row::new("reliability", FIELD, "accuracy")
                .class(&label)
                .with(b.accuracy, n),
        );
    }
    out
}

fn efficiency_rows(e: &Efficiency) -> Vec<Row> {
    [
        ("median_latency_ms", &e.median_latency_ms),
        ("tokens_in_per_image", &e.tokens_in_per_image),
        ("tokens_out_per_image", &e.tokens_out_per_image),
        ("tokens_per_image", &e.tokens_per_image),
        ("dollars_per_1000_images", &e.dollars_per_1000_images),
    ]
    .into_iter()
    .map(|(m, v)| Row::new("efficiency", "", m).estimate(v.as_ref()))
    .collect()
}
