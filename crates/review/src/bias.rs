//! How each judge's scores lean, measured on the reviewed answers against the clinicians who graded them:
//! - **length bias**: the slope of the judge's overall score on log2 of the answer's words, holding the
//!   clinicians' overall grade fixed (one intercept per grade), so "points per doubling of length";
//! - **self-preference**: the judge's residual against the clinicians (judge minus clinicians' median grade)
//!   on answers of its own family or vendor (`nmb_results::family::self_grading`) minus on the others'.
//!
//! Both come with a percentile bootstrap interval over cases ([`nmb_stats::length_slope`],
//! [`nmb_stats::group_gap`]) and one sentence a clinician can read.

use std::collections::BTreeMap;

use nmb_calibration::Ratings;
use nmb_results::ScoreReport;
use nmb_stats::{group_gap, length_slope, BootstrapConfig, Design, Estimate};
use serde::Serialize;

use crate::ratings::item_key;

/// One reviewed answer as one judge and the clinicians graded it.
#[derive(Debug, Clone, PartialEq)]
pub struct BiasItem {
    pub judge: String,
    /// What resampling keeps together: the run and the case.
    pub cluster: String,
    pub judge_score: f64,
    /// The clinicians' median overall grade (the lower median when they are even in number).
    pub clinician_grade: i64,
    pub words: usize,
    /// The graded model is of the judge's own family or vendor.
    pub own: bool,
}

/// One judge's leanings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiasProbe {
    pub judge: String,
    /// Reviewed answers with a judge score, a clinician grade and a length.
    pub items: usize,
    /// Of them, answers of the judge's own family or vendor.
    pub own_items: usize,
    /// Points of the judge's overall score per doubling of the answer's words, at a fixed clinician grade.
    pub length_slope: Option<Estimate>,
    /// Judge-minus-clinician residual on its own family's answers minus on the others'.
    pub self_preference: Option<Estimate>,
    /// One sentence per estimate, or why it is missing.
    pub sentences: Vec<String>,
}

/// The items of every judge that rated the overall dimension, from a review set's ratings and the score reports
/// of its runs (for the answers' lengths, cases and which judge is of the graded model's family).
pub fn bias_items(ratings: &Ratings, reports: &[&ScoreReport]) -> Vec<BiasItem> {
    let mut clinicians: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut judges: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for r in ratings.rows.iter().filter(|r| r.dimension == "overall") {
        match r.annotator.strip_prefix("judge:") {
            Some(judge) => {
                judges.insert((judge, r.item.as_str()), r.score);
            }
            None => clinicians.entry(r.item.as_str()).or_default().push(r.score),
        }
    }
    let mut out = Vec::new();
    for report in reports {
        let own: BTreeMap<&str, bool> = report
            .config
            .judges
            .iter()
            .map(|j| (j.spec.as_str(), j.self_grading))
            .collect();
        for s in &report.samples {
            let key = item_key(&report.run_id, &s.task_id, s.sample_index);
            let (Some(grades), Some(words)) = (clinicians.get(key.as_str()), s.facts.answer_words)
            else {
                continue;
            };
            let mut grades = grades.clone();
            grades.sort_by(f64::total_cmp);
            let grade = grades[(grades.len() - 1) / 2].round() as i64;
            for (&judge, &self_grading) in &own {
                if let Some(&score) = judges.get(&(judge, key.as_str())) {
                    out.push(BiasItem {
                        judge: judge.to_string(),
                        cluster: format!("{}/{}", report.run_id, s.case_id),
                        judge_score: score,
                        clinician_grade: grade,
                        words,
                        own: self_grading,
                    });
                }
            }
        }
    }
    out
}

/// Each judge's length slope and self-preference, judges in name order.
pub fn bias_probes(items: &[BiasItem], cfg: &BootstrapConfig) -> Vec<BiasProbe> {
    let mut by_judge: BTreeMap<&str, Vec<&BiasItem>> = BTreeMap::new();
    for i in items {
        by_judge.entry(i.judge.as_str()).or_default().push(i);
    }
    by_judge
        .into_iter()
        .map(|(judge, items)| probe(judge, &items, cfg))
        .collect()
}

fn probe(judge: &str, items: &[&BiasItem], cfg: &BootstrapConfig) -> BiasProbe {
    let score: Vec<f64> = items.iter().map(|i| i.judge_score).collect();
    // log2 of words, so the slope reads "per doubling"; an empty answer counts as one word.
    let length: Vec<f64> = items
        .iter()
        .map(|i| (i.words.max(1) as f64).log2())
        .collect();
    let grade: Vec<i64> = items.iter().map(|i| i.clinician_grade).collect();
    let own: Vec<bool> = items.iter().map(|i| i.own).collect();
    let residual: Vec<f64> = items
        .iter()
        .map(|i| i.judge_score - i.clinician_grade as f64)
        .collect();
    let clusters: Vec<&str> = items.iter().map(|i| i.cluster.as_str()).collect();
    let design = Design::clusters_by(&clusters);
    let mut sentences = Vec::new();
    let slope = if items.len() < 3 {
        sentences.push(format!(
            "Length bias of {judge}: too few reviewed answers ({}).",
            items.len()
        ));
        None
    } else {
        match length_slope(&score, &length, &grade, &design, cfg) {
            Ok(e) => {
                sentences.push(format!(
                    "Length bias: at the same clinician grade, {judge} gives {:+.2} points [{:+.2}, {:+.2}] per \
                     doubling of an answer's length (0 means length does not sway it).",
                    e.value, e.ci_low, e.ci_high
                ));
                Some(e)
            }
            Err(e) => {
                sentences.push(format!("Length bias of {judge}: not measurable ({e})."));
                None
            }
        }
    };
    let own_items = own.iter().filter(|o| **o).count();
    let gap = match group_gap(&residual, &own, &design, cfg) {
        Ok(e) => {
            sentences.push(format!(
                "Self-preference: against the clinicians, {judge} scores answers of its own family {:+.2} points \
                 [{:+.2}, {:+.2}] higher than other models' answers (0 means no favouritism).",
                e.value, e.ci_low, e.ci_high
            ));
            Some(e)
        }
        Err(_) => {
            sentences.push(format!(
                "Self-preference of {judge}: not measurable, the reviewed answers need both models of its own \
                 family ({own_items}) and others ({}).",
                items.len() - own_items
            ));
            None
        }
    };
    BiasProbe {
        judge: judge.to_string(),
        items: items.len(),
        own_items,
        length_slope: slope,
        self_preference: gap,
        sentences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(score: f64, grade: i64, words: usize, own: bool, case: usize) -> BiasItem {
        BiasItem {
            judge: "j".into(),
            cluster: format!("case{case}"),
            judge_score: score,
            clinician_grade: grade,
            words,
            own,
        }
    }

    #[test]
    fn slope_per_doubling_and_gap_between_families() {
        // Within each grade the judge adds half a point per doubling; own-family answers sit one point higher.
        let mut items = Vec::new();
        for (k, words) in [16usize, 32, 64, 128].into_iter().enumerate() {
            for grade in 0..3 {
                for own in [false, true] {
                    let score =
                        grade as f64 + 0.5 * (words as f64).log2() + if own { 1.0 } else { 0.0 };
                    items.push(item(score, grade, words, own, k * 10 + grade as usize));
                }
            }
        }
        let cfg = BootstrapConfig {
            resamples: 200,
            ..Default::default()
        };
        let p = &bias_probes(&items, &cfg)[0];
        assert!((p.length_slope.as_ref().unwrap().value - 0.5).abs() < 1e-12);
        assert!((p.self_preference.as_ref().unwrap().value - 1.0).abs() < 1e-12);
        assert_eq!(p.sentences.len(), 2);
        assert!(p.sentences[0].contains("+0.50"), "{}", p.sentences[0]);
    }

    #[test]
    fn one_family_only_says_why_there_is_no_self_preference() {
        let items: Vec<BiasItem> = (0..6)
            .map(|i| item(i as f64, i % 2, 10 + i as usize, false, i as usize))
            .collect();
        let p = &bias_probes(&items, &BootstrapConfig::default())[0];
        assert!(p.self_preference.is_none());
        assert!(
            p.sentences[1].contains("not measurable"),
            "{:?}",
            p.sentences
        );
    }
}
