//! The headline numbers of a score report, flat: one named value each, a bootstrap CI's bounds as their own
//! names (`accuracy`, `accuracy_ci_low`, `accuracy_ci_high`). Every export writes these same names.

use nmb_results::{GroupAggregate, ScoreReport};
use nmb_stats::Estimate;

/// One named number.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    pub value: f64,
}

/// The overall group's numbers: counts, accuracy, pass@1 and pass@5 (both readings), lesion, rubric,
/// BERTScore and breadth numbers where the report has them; each estimate with its CI bounds.
pub fn headline(report: &ScoreReport) -> Vec<Metric> {
    let o: &GroupAggregate = &report.overall;
    let mut out = Vec::new();
    for (name, n) in [
        ("tasks", o.tasks),
        ("cases", o.cases),
        ("samples", o.samples),
        ("n", o.n),
        ("correct", o.correct),
        ("errored", o.errored),
        ("pending", o.pending),
        ("no_reference", o.no_reference),
        ("parse_failed", o.parse_failed),
        ("unresolved", o.unresolved),
    ] {
        out.push(Metric {
            name: name.into(),
            value: n as f64,
        });
    }
    let mut est = |name: &str, e: Option<&Estimate>| {
        if let Some(e) = e {
            for (suffix, v) in [
                ("", e.value),
                ("_ci_low", e.ci_low),
                ("_ci_high", e.ci_high),
            ] {
                if v.is_finite() {
                    out.push(Metric {
                        name: format!("{name}{suffix}"),
                        value: v,
                    });
                }
            }
        }
    };
    est("accuracy", o.accuracy.as_ref());
    for p in [&o.pass_at_1, &o.pass_at_5] {
        est(
            &format!("pass_at_{}_unbiased", p.k),
            p.unbiased_estimator.as_ref(),
        );
        est(
            &format!("pass_at_{}_top_k_in_answer", p.k),
            p.top_k_in_answer.as_ref(),
        );
    }
    if let Some(l) = &o.lesion {
        est("lesion_type_accuracy", l.type_accuracy.as_ref());
        est("lesion_location_accuracy", l.location_accuracy.as_ref());
    }
    if let Some(r) = &o.rubric {
        est("rubric_overall", r.overall.as_ref());
    }
    if let Some(b) = &o.bertscore {
        est("bertscore_p", b.p.as_ref());
        est("bertscore_r", b.r.as_ref());
        est("bertscore_f1", b.f.as_ref());
    }
    if let Some(b) = &o.breadth {
        est("breadth_accuracy", b.accuracy.as_ref());
        est("breadth_token_recall", b.token_recall.as_ref());
        est("breadth_exact_match", b.exact_match.as_ref());
    }
    est("answer_words", o.answer_words.as_ref());
    out
}
