//! Markdown with the same tables as the HTML report, for papers and pull requests.

use std::fmt::Write;

use nmb_review::tables as review_tables;

use crate::input::RunData;
use crate::sections::analysis::Analysis;
use crate::sections::calibration::{tables as review_tables_of, thinking as thinking_probes};
use crate::sections::preference::{judges_table, ranking_table, rankings, title, win_rate_table};
use crate::sections::stability::{
    sentences as stability_sentences, table as stability_table, unstable_table,
};
use crate::sections::summary::{self, ScoredRun};
use crate::sections::TableSection;
use crate::table::Table;

/// Table cells: no pipes or line breaks from any text.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The Markdown report; `tables` are the table sections under the headline.
pub(crate) fn render(runs: &[RunData], analysis: &Analysis, tables: &[TableSection]) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# nmb report\n");
    let _ = writeln!(
        m,
        "95% bootstrap CIs (percentile, clustered by case; seed {}, {} resamples). pass@k readings: (a) unbiased \
         estimator over a task's n samples; (b) reference within the first k entries of one answer's differential.\n",
        analysis.bootstrap.seed, analysis.bootstrap.resamples
    );
    for n in &analysis.notes {
        let _ = writeln!(m, "> {}\n", cell(n));
    }
    headline(&mut m, runs, analysis, tables);
    cost(&mut m, runs, analysis);
    thinking(&mut m, analysis);
    levels(&mut m, runs);
    breadth(&mut m, runs);
    criteria(&mut m, runs);
    revision(&mut m, runs);
    m.push_str(&stability(runs));
    neurovlm(&mut m, runs, analysis);
    two_axis(&mut m, analysis);
    sweep(&mut m, analysis);
    paired(&mut m, analysis);
    if let Some(t) = crate::sections::worst::table(&analysis.worst_at_k) {
        section(&mut m, "## Worst-at-k beside pass@k", &t);
    }
    if let Some(t) = crate::sections::reliance::table(&analysis.reliance) {
        m.push_str("## Image reliance and robustness\n\n");
        for r in &analysis.reliance {
            let _ = writeln!(m, "{}\n", r.sentence);
        }
        let _ = writeln!(m, "{}", t.markdown());
        if let Some(t) = crate::sections::reliance::taxonomy_table(&analysis.reliance) {
            let _ = writeln!(m, "### Visual errors per perturbation\n\n{}", t.markdown());
        }
        for note in (analysis.reliance.iter()).filter_map(|r| r.taxonomy_note.as_ref()) {
            let _ = writeln!(m, "{note}\n");
        }
    }
    m.push_str(&calibration(runs));
    m.push_str(&preference(runs));
    manifests(&mut m, runs);
    m
}

fn headline(m: &mut String, runs: &[RunData], analysis: &Analysis, tables: &[TableSection]) {
    section(m, "## Headline", &summary::headline(runs, analysis));
    if let Some(t) = summary::errors_by_class(runs) {
        section(m, "### Errored samples by class", &t);
    }
    for s in tables {
        section(m, &format!("### {}", s.title), &s.table);
    }
}

fn cost(m: &mut String, runs: &[RunData], analysis: &Analysis) {
    if let Some(t) = summary::cost(runs, analysis) {
        section(m, "## Cost", &t);
    }
}

/// The thinking tables, as in the HTML report (which adds the chart).
fn thinking(m: &mut String, analysis: &Analysis) {
    if let Some(t) = crate::sections::thinking::table(&analysis.thinking) {
        section(m, "## Thinking", &t);
    }
    if let Some(t) = crate::sections::thinking::bins_table(&analysis.thinking) {
        section(m, "### Accuracy by thinking length", &t);
    }
}

fn levels(m: &mut String, runs: &[RunData]) {
    let t = summary::level_family(&ScoredRun::of(runs), false);
    if !t.is_empty() {
        section(m, "## By level and family", &t);
    }
}

fn breadth(m: &mut String, runs: &[RunData]) {
    if let Some(t) = summary::breadth(&ScoredRun::of(runs)) {
        section(m, "## Breadth", &t);
    }
    if let Some(t) = crate::sections::label_set::table(runs) {
        section(m, "### Fixed label sets (accuracy and macro-F1)", &t);
    }
}

fn criteria(m: &mut String, runs: &[RunData]) {
    let scored = ScoredRun::of(runs);
    if let Some(t) = crate::sections::criteria::table(&scored) {
        section(m, "## Criterion rubric", &t);
    }
    if let Some(t) = crate::sections::criteria::criterion_table(&scored) {
        m.push_str("### By criterion\n\n");
        for s in crate::sections::criteria::sentences(&scored) {
            let _ = write!(m, "{s}\n\n");
        }
        let _ = writeln!(m, "{}", t.markdown());
    }
}

/// A heading, the table and a blank line.
fn section(m: &mut String, heading: &str, t: &Table) {
    let _ = write!(m, "{heading}\n\n{}\n", t.markdown());
}

/// Revision in multi-turn consults, as in the HTML report.
fn revision(m: &mut String, runs: &[RunData]) {
    if let Some(t) = crate::sections::revision::table(runs) {
        m.push_str("## Revision in consults\n\n");
        m.push_str(&t.markdown());
        m.push('\n');
    }
}

/// The NeuroVLM-Bench tables of every run with structured scores, as in the HTML report.
fn neurovlm(m: &mut String, runs: &[RunData], analysis: &Analysis) {
    let sections = crate::sections::neurovlm::sections(runs, analysis);
    if sections.is_empty() {
        return;
    }
    m.push_str("## NeuroVLM-Bench\n\n");
    for s in &sections {
        let _ = writeln!(
            m,
            "### {} · {}\n",
            cell(&s.run.name()),
            cell(&s.run.manifest.suite_id)
        );
        for (heading, t) in crate::sections::neurovlm::tables(s) {
            let _ = writeln!(m, "#### {heading}\n\n{}", t.markdown());
        }
        if s.report.calibration.is_none() {
            let _ = writeln!(
                m,
                "No answer gave a usable diagnosis_confidence ({} left out).\n",
                s.report.calibration_excluded
            );
        }
    }
}

fn two_axis(m: &mut String, analysis: &Analysis) {
    let Some(t) = &analysis.two_axis else { return };
    m.push_str("## Breadth vs depth\n\n");
    m.push_str(&summary::two_axis(t).markdown());
    match &t.correlation {
        Some(c) => {
            let _ = writeln!(
                m,
                "\nSpearman rho = {:.2} [95% CI {:.2} to {:.2}], permutation p = {:.3} ({} models).\n",
                c.rho.value, c.rho.ci_low, c.rho.ci_high, c.permutation.p_value, c.rho.n
            );
        }
        None => {
            let _ = writeln!(
                m,
                "\n{}\n",
                cell(t.correlation_note.as_deref().unwrap_or(""))
            );
        }
    }
}

/// Prompt sensitivity, as in the HTML report.
fn sweep(m: &mut String, analysis: &Analysis) {
    if analysis.sweep.is_empty() {
        return;
    }
    let (groups, ranking) = crate::sections::sweep::tables(&analysis.sweep);
    m.push_str("## Prompt sensitivity\n\n");
    for (heading, t) in &groups {
        let _ = writeln!(m, "### {}\n\n{}", cell(heading), t.markdown());
    }
    if let Some(t) = ranking {
        let _ = writeln!(m, "### Ranking across variants\n\n{}", t.markdown());
    }
}

fn paired(m: &mut String, analysis: &Analysis) {
    if analysis.paired.is_empty() {
        return;
    }
    m.push_str("## Paired comparisons\n\n");
    m.push_str(&crate::paired_table(&analysis.paired, &analysis.multiplicity).markdown());
    m.push('\n');
    for s in crate::sections::power::sentences(&analysis.power) {
        let _ = writeln!(m, "{}\n", cell(&s));
    }
}

fn manifests(m: &mut String, runs: &[RunData]) {
    m.push_str("## Runs\n\n| run | name | model | suite hash | template hash | parameters | samples | nmb | dropped inputs |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in runs {
        let x = &r.manifest;
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | `{}` | {} | {} | {} |",
            cell(&r.info.run_id),
            cell(&x.display_name()),
            cell(&x.model),
            cell(&x.suite_hash),
            cell(&x.template_hash),
            cell(&x.params.to_string()),
            x.samples,
            cell(&x.nmb_version),
            cell(&x.dropped_inputs.join("; ")),
        );
    }
}

/// The section in Markdown, empty when no run was scored with repeats.
fn stability(runs: &[RunData]) -> String {
    let scored = ScoredRun::of(runs);
    let Some(t) = stability_table(&scored) else {
        return String::new();
    };
    let mut m = String::from("## Judge stability\n\n");
    for s in stability_sentences(&scored) {
        m.push_str(&format!("{s}\n\n"));
    }
    m.push_str(&t.markdown());
    m.push('\n');
    if let Some(u) = unstable_table(&scored) {
        m.push_str(&u.markdown());
        m.push('\n');
    }
    m
}

/// The section in Markdown (empty as the HTML one is).
fn calibration(runs: &[RunData]) -> String {
    let mut m = review_tables::section_markdown(&review_tables_of(runs));
    let probes = thinking_probes(runs);
    if !probes.is_empty() && m.is_empty() {
        m.push_str("## Judges against clinicians\n\n");
    }
    for (name, sentences) in probes {
        m.push_str(&format!(
            "#### How the judges lean when shown the thinking · {name}\n\n"
        ));
        for s in sentences {
            m.push_str(&format!("- {s}\n"));
        }
        m.push('\n');
    }
    m
}

/// The section in Markdown, empty without a pairwise review.
fn preference(runs: &[RunData]) -> String {
    let all = rankings(runs);
    if all.is_empty() {
        return String::new();
    }
    let mut m = String::from("## Clinicians' pairwise preference\n\n");
    for p in all {
        m.push_str(&format!("### {}\n\n{}\n\n", title(p), p.sentence));
        for n in &p.notes {
            m.push_str(&format!("> {n}\n\n"));
        }
        m.push_str(&ranking_table(p).markdown());
        m.push('\n');
        m.push_str(&win_rate_table(p).markdown());
        m.push('\n');
        if let Some(t) = judges_table(p) {
            for j in &p.judges {
                m.push_str(&format!("{}\n\n", j.sentence));
            }
            m.push_str(&t.markdown());
            m.push('\n');
        }
    }
    m
}
