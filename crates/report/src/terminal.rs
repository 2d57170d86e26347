//! `nmb score`'s summary for a terminal: what was scored and how, then the level × family and breadth tables
//! built for the reports (the summary module) as aligned text, then NeuroVLM-Bench, label-set and consult
//! numbers in brief. `nmb score --json` and the reports carry every number.

use std::fmt::Write;

use nmb_results::revision::{Rate, RevisionReport};
use nmb_results::structured::StructuredReport;
use nmb_results::ScoreReport;
use nmb_stats::Estimate;
use nmb_suite::Level;

use crate::sections::summary::{self, ScoredRun};
use crate::table::percent;

/// How many of the unparseable answers were cut at the token limit, when any were.
fn at_limit(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(" ({n} cut at the token limit)"),
    }
}

/// The whole summary of one score report, as printed by `nmb score`.
pub fn score_report(report: &ScoreReport) -> String {
    let mut out = String::new();
    config(&mut out, report);
    let run = [ScoredRun::from_report(report)];
    out.push('\n');
    out.push_str(&summary::level_family(&run, true).text());
    if let Some(t) = summary::breadth(&run) {
        out.push('\n');
        out.push_str(&t.text());
    }
    let o = &report.overall;
    let _ = write!(
        out,
        "\nsamples    {} planned, {} scored, {} errored, {} pending, {} without reference, {} unparseable{}, {} \
         unresolved\n",
        o.samples,
        o.n,
        o.errored,
        o.pending,
        o.no_reference,
        o.parse_failed,
        at_limit(o.parse_failed_at_limit),
        o.unresolved
    );
    if let Some(s) = &report.structured {
        structured(&mut out, s);
    }
    if let Some(l) = &report.label_set {
        let _ = write!(
            out,
            "\nlabels     {} ({} answers): accuracy {}, macro-F1 {}, {} without a recognisable choice\n",
            l.labels.join(" / "),
            l.n,
            pct(Some(&l.accuracy)),
            pct(Some(&l.macro_f1)),
            l.extraction_failures
        );
    }
    if let Some(r) = &report.revision {
        revision(&mut out, r);
    }
    if let Some(t) = crate::sections::stability::table(&run) {
        out.push('\n');
        out.push_str(&t.text());
        for s in crate::sections::stability::sentences(&run) {
            let _ = writeln!(out, "stability  {s}");
        }
    }
    if let Some(t) = crate::sections::criteria::table(&run) {
        out.push('\n');
        out.push_str(&t.text());
    }
    for note in o.pass_at_5.unbiased_note.iter().chain(&report.notes) {
        let _ = writeln!(out, "note       {note}");
    }
    out
}

/// The run, its model, the judges, the rubric and the bootstrap.
fn config(out: &mut String, report: &ScoreReport) {
    let c = &report.config;
    let manifest = c.manifest();
    let _ = writeln!(out, "run        {}", report.run_id);
    let _ = writeln!(
        out,
        "model      {} ({})",
        manifest.display_name(),
        manifest.model
    );
    if c.judges.is_empty() {
        out.push_str("judges     none (rules only)\n");
    }
    for j in &c.judges {
        let flag = if j.self_grading {
            "  [SELF-GRADING]"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "judge      {} ({} calls in judge run {}){flag}",
            j.spec, j.calls, j.judge_run_id
        );
    }
    if let Some(r) = &c.rubric {
        let _ = writeln!(
            out,
            "rubric     {} v{} ({})",
            r.id,
            r.version,
            short(&r.hash)
        );
    }
    let _ = writeln!(
        out,
        "bootstrap  95% CI, {} resamples, seed {}, clustered by case",
        c.bootstrap.resamples, c.bootstrap.seed
    );
    let _ = writeln!(
        out,
        "stored     score report, config {}",
        short(&c.config_hash)
    );
}

/// The first 12 characters of a hash.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// `41.2% [30.1–52.0]`, or `–`: a share as every table shows it.
fn pct(e: Option<&Estimate>) -> String {
    percent(e).plain()
}

/// Revision in multi-turn consults, one line per level; `--json` has every turn of every consult.
fn revision(out: &mut String, r: &RevisionReport) {
    let share = |e: Option<&Estimate>, count: usize, n: usize| format!("{} ({count}/{n})", pct(e));
    let rate = |x: &Rate| share(x.share.as_ref(), x.count, x.n);
    let _ = writeln!(
        out,
        "\nconsults   {:<11} {:>4}  {:<28} {:<28} {:<28} {:<28} right -> wrong",
        "level", "n", "first turn", "last turn", "changed top dx", "wrong -> right"
    );
    for g in &r.by_level {
        let (first, last) = (&g.first_turn, &g.last_turn);
        let _ = writeln!(
            out,
            "           {:<11} {:>4}  {:<28} {:<28} {:<28} {:<28} {}",
            g.level.map_or("all", Level::as_str),
            g.consults,
            share(first.accuracy.as_ref(), first.correct, first.n),
            share(last.accuracy.as_ref(), last.correct, last.n),
            rate(&g.changed_top_diagnosis),
            rate(&g.wrong_to_right),
            rate(&g.right_to_wrong),
        );
    }
    let o = &r.overall;
    let _ = writeln!(
        out,
        "           {} consults left out (errored, pending, no reference); turns: {} unparseable (wrong), {} \
         unresolved (left out)",
        o.left_out, o.unparseable_turns, o.unresolved_turns
    );
    for note in &r.notes {
        let _ = writeln!(out, "note       {note}");
    }
}

/// NeuroVLM-Bench's numbers in brief; `--json` and the reports carry all of them.
fn structured(out: &mut String, s: &StructuredReport) {
    let _ = writeln!(
        out,
        "\nNeuroVLM   {} answers, valid JSON {}, schema-valid {}",
        s.answers,
        pct(Some(&s.valid_json_rate)),
        pct(Some(&s.schema_valid_rate))
    );
    let _ = writeln!(
        out,
        "{:<22} {:>4}  {:<22} {:<22} {:<22} {:<22}",
        "field", "n", "accuracy", "balanced accuracy", "macro-F1", "abstained"
    );
    for field in nmb_results::structured::FIELDS {
        let Some(f) = s.fields.get(field) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:<22} {:>4}  {:<22} {:<22} {:<22} {:<22}",
            field,
            f.n,
            pct(Some(&f.accuracy)),
            pct(Some(&f.balanced_accuracy)),
            pct(Some(&f.macro_f1)),
            pct(Some(&f.abstention_rate))
        );
    }
    if let Some(c) = &s.calibration {
        let num = |e: &Estimate| format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci_low, e.ci_high);
        let _ = writeln!(
            out,
            "calibration ECE {}, Brier {}, AUROC {}",
            num(&c.ece),
            num(&c.brier),
            c.auroc.as_ref().map_or("-".into(), num)
        );
    }
    let raised: Vec<String> = s
        .safety_flags
        .iter()
        .filter(|(_, e)| e.value > 0.0)
        .map(|(flag, e)| format!("{flag} {}", pct(Some(e))))
        .collect();
    let _ = writeln!(
        out,
        "safety     {}",
        if raised.is_empty() {
            "no flag raised".to_string()
        } else {
            raised.join(", ")
        }
    );
    if let Some(d) = &s.cost.dollars_per_1000_images {
        let _ = writeln!(
            out,
            "cost       ${:.4} per 1,000 images [{:.4}, {:.4}]",
            d.value, d.ci_low, d.ci_high
        );
    }
}
