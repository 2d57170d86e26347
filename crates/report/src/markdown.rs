//! Markdown with the same tables as the HTML report, for papers and pull requests.

use std::fmt::Write;

use nmb_stats::Estimate;
use nmb_suite::{Family, Level};

use crate::analysis::Analysis;
use crate::input::RunData;

/// Table cells: no pipes or line breaks from any text.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn pct(e: Option<&Estimate>) -> String {
    e.map_or("–".into(), |e| {
        format!(
            "{:.1}% [{:.1}–{:.1}]",
            e.value * 100.0,
            e.ci_low * 100.0,
            e.ci_high * 100.0
        )
    })
}

fn num(e: Option<&Estimate>, d: usize) -> String {
    e.map_or("–".into(), |e| {
        format!("{:.d$} [{:.d$}–{:.d$}]", e.value, e.ci_low, e.ci_high)
    })
}

pub fn render(runs: &[RunData], analysis: &Analysis) -> String {
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
    headline(&mut m, runs, analysis);
    levels(&mut m, runs);
    breadth(&mut m, runs);
    revision(&mut m, runs);
    neurovlm(&mut m, runs, analysis);
    two_axis(&mut m, analysis);
    sweep(&mut m, analysis);
    paired(&mut m, analysis);
    m.push_str(&crate::calibration::markdown(runs));
    manifests(&mut m, runs);
    m
}

fn headline(m: &mut String, runs: &[RunData], analysis: &Analysis) {
    m.push_str("## Headline\n\n| model | suite | samples ok/errored/pending | pass@1 (a) | pass@5 (a) | pass@1 (b) | pass@5 (b) | accuracy | tokens in/out | cost | latency p50/p90 ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (r, c) in runs.iter().zip(&analysis.costs) {
        let o = r.scores.as_ref().map(|s| &s.overall);
        let s = &r.summary;
        let _ = writeln!(
            m,
            "| {} | {} | {}/{}/{} | {} | {} | {} | {} | {} | {}/{} | {} | {}/{} |",
            cell(&r.name()),
            cell(&r.manifest.suite_id),
            s.samples_ok,
            s.samples_errored,
            s.samples_pending,
            pct(o.and_then(|o| o.pass_at_1.unbiased_estimator.as_ref())),
            pct(o.and_then(|o| o.pass_at_5.unbiased_estimator.as_ref())),
            pct(o.and_then(|o| o.pass_at_1.top_k_in_answer.as_ref())),
            pct(o.and_then(|o| o.pass_at_5.top_k_in_answer.as_ref())),
            accuracy(r, o.and_then(|o| o.accuracy.as_ref())),
            s.tokens_in,
            s.tokens_out,
            c.dollars.map_or("no price".into(), |d| format!("${d:.4}")),
            s.latency_ms.p50,
            s.latency_ms.p90,
        );
    }
    m.push('\n');
}

/// The accuracy, with the clinician-corrected rate after it when a review measured the scoring's decisions.
fn accuracy(r: &RunData, e: Option<&Estimate>) -> String {
    match crate::calibration::corrected_note(r) {
        Some(note) => format!("{} ({})", pct(e), cell(&note)),
        None => pct(e),
    }
}

fn levels(m: &mut String, runs: &[RunData]) {
    let mut rows = String::new();
    for r in runs {
        let Some(s) = &r.scores else { continue };
        for g in s
            .by_level_family
            .iter()
            .filter(|g| g.family.is_some_and(Family::is_depth))
        {
            let _ = writeln!(
                rows,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(&r.name()),
                g.level.map_or("all", Level::as_str),
                g.family.map_or("all", Family::as_str),
                g.n,
                pct(g.pass_at_1.unbiased_estimator.as_ref()),
                pct(g.pass_at_5.unbiased_estimator.as_ref()),
                pct(g.pass_at_1.top_k_in_answer.as_ref()),
                pct(g.pass_at_5.top_k_in_answer.as_ref()),
                g.errored,
                g.parse_failed,
                num(g.rubric.as_ref().and_then(|x| x.overall.as_ref()), 2),
                num(g.bertscore.as_ref().and_then(|x| x.f.as_ref()), 3),
            );
        }
    }
    if !rows.is_empty() {
        m.push_str("## By level and family\n\n| model | level | family | n | pass@1 (a) | pass@5 (a) | pass@1 (b) | pass@5 (b) | errored | parse failed | rubric overall | BERTScore F1 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        m.push_str(&rows);
        m.push('\n');
    }
}

fn breadth(m: &mut String, runs: &[RunData]) {
    let mut rows = String::new();
    for r in runs {
        let Some(s) = &r.scores else { continue };
        for g in &s.by_family {
            let Some(b) = &g.breadth else { continue };
            let _ = writeln!(
                rows,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(&r.name()),
                cell(&r.manifest.suite_id),
                g.family.map_or("all", Family::as_str),
                b.n,
                pct(b.accuracy.as_ref()),
                pct(b.exact_match.as_ref()),
                pct(b.token_recall.as_ref()),
                b.extraction_failures,
            );
        }
    }
    if !rows.is_empty() {
        m.push_str("## Breadth\n\n| model | suite | family | n | accuracy | exact match | token recall | extraction failures |\n|---|---|---|---|---|---|---|---|\n");
        m.push_str(&rows);
        m.push('\n');
    }
    if let Some(t) = crate::label_set::table(runs) {
        m.push_str("### Fixed label sets (accuracy and macro-F1)\n\n");
        m.push_str(&t.markdown());
        m.push('\n');
    }
}

/// Revision in multi-turn consults, as in the HTML report.
fn revision(m: &mut String, runs: &[RunData]) {
    if let Some(t) = crate::revision::table(runs) {
        m.push_str("## Revision in consults\n\n");
        m.push_str(&t.markdown());
        m.push('\n');
    }
}

/// The NeuroVLM-Bench tables of every run with structured scores, as in the HTML report.
fn neurovlm(m: &mut String, runs: &[RunData], analysis: &Analysis) {
    let sections = crate::neurovlm::sections(runs, analysis);
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
        for (heading, t) in crate::neurovlm::tables(s) {
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
    m.push_str(
        "## Breadth vs depth\n\n| model | breadth accuracy | depth pass@1 (a) |\n|---|---|---|\n",
    );
    for p in &t.points {
        let _ = writeln!(
            m,
            "| {} | {} | {} |",
            cell(&p.name),
            pct(Some(&p.breadth)),
            pct(Some(&p.depth))
        );
    }
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
    let (groups, ranking) = crate::sweep::tables(&analysis.sweep);
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
    m.push_str(&crate::paired_table(&analysis.paired).markdown());
    m.push('\n');
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
