//! Image reliance and robustness (`nmb eval --perturb`): per model, each perturbed run paired answer by
//! answer (task and sample) with the unperturbed run of the same model, suite, template and parameters.
//!
//! For every perturbation, overall and per level x family: accuracy (pass@1: the share of right samples) under
//! the perturbation, its difference from the unperturbed accuracy with a paired bootstrap interval that resamples
//! whole cases (`nmb_stats::paired_bootstrap`), and the share of right answers that turn wrong. **Image
//! reliance** is accuracy with the true images minus accuracy with another case's (`mismatch`), and the same with
//! mid-grey images (`blank`); a model whose reliance interval lies above zero is shown to use its images. A run's
//! perturbation is the manifest's `perturbation` field; the unperturbed run has none and its name is the
//! perturbed run's without the bracketed label.
//!
//! When the runs were scored with the error taxonomy, each run's share of wrong answers labelled
//! `perceptual_failure` and `visual_hallucination` (the score report's overall taxonomy: shares of the labelled
//! wrong answers with case-clustered bootstrap intervals) is shown per perturbation, the unperturbed run
//! included, but only when no label came from a judge that did not see the images (`--judge-images same`, or
//! human labels alone): a blind judge's labels of visual errors are guesses, and a sentence says so instead.

use std::collections::BTreeMap;

use nmb_results::{ErrorCategory, JudgeImages, ScoreReport};
use nmb_stats::{paired_bootstrap, BootstrapConfig, Design, Estimate};
use serde::Serialize;

use crate::input::RunData;
use crate::table::{percent, Cell, Table};

/// The manifest field a perturbed run records its perturbation in.
const FIELD: &str = "perturbation";

/// One perturbation of one model, overall or in one level x family.
#[derive(Debug, Clone, Serialize)]
pub struct PerturbedRow {
    pub perturbation: String,
    pub run_id: String,
    /// `overall`, or `LEVEL × FAMILY`.
    pub group: String,
    /// Answers scored in both runs.
    pub pairs: usize,
    pub baseline_accuracy: f64,
    pub accuracy: f64,
    /// Accuracy under the perturbation minus accuracy unperturbed, with its case-clustered paired interval.
    pub difference: Option<Estimate>,
    /// Of the answers right unperturbed, the share wrong under the perturbation (`None` when none was right).
    pub right_turned_wrong: Option<f64>,
}

/// One model's perturbed runs against its unperturbed run.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReliance {
    pub name: String,
    pub baseline_run: String,
    pub rows: Vec<PerturbedRow>,
    /// Accuracy with the true images minus with another case's (`mismatch`), overall.
    pub reliance_mismatch: Option<Estimate>,
    /// Accuracy with the true images minus with mid-grey ones (`blank`), overall.
    pub reliance_blank: Option<Estimate>,
    /// Whether the interval of the reliance (mismatch, else blank) excludes zero.
    pub distinguishable: Option<bool>,
    pub sentence: String,
    /// The taxonomy's visual error shares per perturbation (`none` first), when every run's wrong answers were
    /// labelled by judges that saw the images or by people; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taxonomy: Vec<TaxonomyShares>,
    /// Why the shares are not shown when the runs were labelled by a judge that did not see the images.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxonomy_note: Option<String>,
}

/// One run's error taxonomy, as far as it concerns the images: of its wrong answers with a label, the share
/// labelled each visual error class.
#[derive(Debug, Clone, Serialize)]
pub struct TaxonomyShares {
    /// `none` for the unperturbed run.
    pub perturbation: String,
    pub run_id: String,
    /// Wrong answers with a label (the shares' denominator).
    pub labelled: usize,
    pub perceptual_failure: Option<Estimate>,
    pub visual_hallucination: Option<Estimate>,
}

/// What the sentence says in place of the shares when a judge labelled without the images.
const BLIND_TAXONOMY: &str = "the shares of perceptual failures and visual hallucinations per perturbation \
need the taxonomy scored with --judge-images same; a judge that does not see the images can only guess which \
errors are visual.";

/// How a run's wrong answers were labelled, as far as the shares can trust it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Labels {
    /// No taxonomy.
    None,
    /// Some labels came from a judge that did not see the images.
    Blind,
    /// By judges that saw the images, or by people.
    Sighted,
}

fn labels(scores: &ScoreReport) -> Labels {
    let t = &scores.config.taxonomy;
    if !t.judged && t.human_labels.is_none() {
        return Labels::None;
    }
    match t.judged && scores.config.judge_images == JudgeImages::None {
        true => Labels::Blind,
        false => Labels::Sighted,
    }
}

fn shares(label: &str, r: &RunData) -> Option<TaxonomyShares> {
    let t = r.scores.as_ref()?.overall.taxonomy.as_ref()?;
    let share = |c: ErrorCategory| {
        let found = t.classes.iter().find(|s| s.category == c);
        found.and_then(|s| s.share.clone())
    };
    Some(TaxonomyShares {
        perturbation: label.to_string(),
        run_id: r.info.run_id.clone(),
        labelled: t.labelled,
        perceptual_failure: share(ErrorCategory::PerceptualFailure),
        visual_hallucination: share(ErrorCategory::VisualHallucination),
    })
}

/// The taxonomy's shares of the unperturbed run and each perturbed one, or the sentence saying why not.
fn taxonomy(
    base: &RunData,
    perturbed: &[(&str, &RunData)],
) -> (Vec<TaxonomyShares>, Option<String>) {
    let all = std::iter::once(("none", base)).chain(perturbed.iter().copied());
    let kinds: Vec<Labels> = (all.clone())
        .map(|(_, r)| r.scores.as_ref().map_or(Labels::None, labels))
        .collect();
    if kinds.contains(&Labels::Blind) {
        return (
            Vec::new(),
            Some(format!("{}: {BLIND_TAXONOMY}", base.name())),
        );
    }
    if kinds.iter().all(|k| *k == Labels::None) {
        return (Vec::new(), None);
    }
    (
        all.filter_map(|(label, r)| shares(label, r)).collect(),
        None,
    )
}

fn perturbation(r: &RunData) -> Option<&str> {
    r.manifest.extra.get(FIELD).and_then(|v| v.as_str())
}

/// The unperturbed run `r` was made beside: same model, suite, templates, parameters and samples, named as `r`
/// without its bracketed label.
fn baseline<'a>(runs: &'a [RunData], r: &RunData, label: &str) -> Option<&'a RunData> {
    let name = r.name();
    let base = name.strip_suffix(&format!(" [{label}]")).unwrap_or(&name);
    let m = &r.manifest;
    runs.iter().rev().find(|b| {
        let bm = &b.manifest;
        perturbation(b).is_none()
            && b.scores.is_some()
            && b.name() == base
            && (
                bm.model.as_str(),
                bm.suite_hash.as_str(),
                bm.template_hash.as_str(),
                &bm.params,
                bm.samples,
            ) == (
                m.model.as_str(),
                m.suite_hash.as_str(),
                m.template_hash.as_str(),
                &m.params,
                m.samples,
            )
    })
}

/// Per (task, sample): right or not, the case and the group.
type Scored = BTreeMap<(String, u32), (bool, String, String)>;

fn scored(r: &RunData) -> Scored {
    let Some(scores) = &r.scores else {
        return Scored::new();
    };
    scores
        .samples
        .iter()
        .filter(|s| s.status.is_scored())
        .map(|s| {
            let group = format!("{} × {}", s.level.as_str(), s.family.as_str());
            (
                (s.task_id.clone(), s.sample_index),
                (s.correct == Some(true), s.case_id.clone(), group),
            )
        })
        .collect()
}

fn row(
    label: &str,
    run_id: &str,
    group: &str,
    pairs: &[(bool, bool, String)],
    cfg: &BootstrapConfig,
) -> PerturbedRow {
    let a: Vec<f64> = pairs.iter().map(|p| f64::from(u8::from(p.1))).collect();
    let b: Vec<f64> = pairs.iter().map(|p| f64::from(u8::from(p.0))).collect();
    let cases: Vec<&str> = pairs.iter().map(|p| p.2.as_str()).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let right = pairs.iter().filter(|p| p.0).count();
    let turned = pairs.iter().filter(|p| p.0 && !p.1).count();
    PerturbedRow {
        perturbation: label.to_string(),
        run_id: run_id.to_string(),
        group: group.to_string(),
        pairs: pairs.len(),
        baseline_accuracy: mean(&b),
        accuracy: mean(&a),
        difference: paired_bootstrap(&a, &b, &Design::clusters_by(&cases), cfg)
            .ok()
            .map(|c| c.diff),
        right_turned_wrong: (right > 0).then(|| turned as f64 / right as f64),
    }
}

fn negated(e: &Estimate) -> Estimate {
    Estimate {
        value: -e.value,
        ci_low: -e.ci_high,
        ci_high: -e.ci_low,
        ..e.clone()
    }
}

fn sentence(
    name: &str,
    mismatch: Option<&Estimate>,
    blank: Option<&Estimate>,
) -> (Option<bool>, String) {
    let (what, e) = match (mismatch, blank) {
        (Some(e), _) => ("another case's images (mismatch)", e),
        (None, Some(e)) => ("mid-grey images (blank)", e),
        (None, None) => {
            return (
                None,
                format!("{name}: no mismatch or blank run, so image reliance is not measured."),
            )
        }
    };
    let pct = |v: f64| format!("{:.1}", 100.0 * v);
    let range = format!(
        "{} points [{} to {}]",
        pct(e.value),
        pct(e.ci_low),
        pct(e.ci_high)
    );
    let apart = e.ci_low > 0.0 || e.ci_high < 0.0;
    let verdict = match (apart, e.value > 0.0) {
        (true, true) => "distinguishable from zero: its answers depend on the images",
        (true, false) => {
            "distinguishable from zero, and negative: it answers better without its own images"
        }
        (false, _) => {
            "not distinguishable from zero: no evidence here that its answers depend on the images"
        }
    };
    (
        Some(apart),
        format!("{name}: accuracy with the true images minus with {what} is {range}, {verdict}."),
    )
}

/// Every model with perturbed runs, in the order their unperturbed runs are given.
pub fn build(runs: &[RunData], cfg: &BootstrapConfig) -> Vec<ModelReliance> {
    let mut by_base: BTreeMap<usize, Vec<(&str, &RunData)>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.scores.is_some()) {
        let Some(label) = perturbation(r) else {
            continue;
        };
        let Some(base) = baseline(runs, r, label) else {
            continue;
        };
        let at = runs.iter().position(|x| std::ptr::eq(x, base)).unwrap_or(0);
        by_base.entry(at).or_default().push((label, r));
    }
    by_base
        .into_iter()
        .map(|(at, perturbed)| {
            let base = &runs[at];
            let truth = scored(base);
            let mut rows = Vec::new();
            for (label, r) in &perturbed {
                let other = scored(r);
                let mut groups: BTreeMap<String, Vec<(bool, bool, String)>> = BTreeMap::new();
                for (key, (right, case, group)) in &truth {
                    let Some((then, _, _)) = other.get(key) else {
                        continue;
                    };
                    let pair = (*right, *then, case.clone());
                    groups
                        .entry("overall".into())
                        .or_default()
                        .push(pair.clone());
                    groups.entry(group.clone()).or_default().push(pair);
                }
                let overall = groups.remove("overall").unwrap_or_default();
                rows.push(row(label, &r.info.run_id, "overall", &overall, cfg));
                if groups.len() > 1 {
                    for (group, pairs) in &groups {
                        rows.push(row(label, &r.info.run_id, group, pairs, cfg));
                    }
                }
            }
            let reliance = |p: &str| {
                rows.iter()
                    .find(|r| r.perturbation == p && r.group == "overall")
                    .and_then(|r| r.difference.as_ref())
                    .map(negated)
            };
            let (mismatch, blank) = (reliance("mismatch"), reliance("blank"));
            let (distinguishable, sentence) =
                sentence(&base.name(), mismatch.as_ref(), blank.as_ref());
            let (taxonomy, taxonomy_note) = taxonomy(base, &perturbed);
            ModelReliance {
                name: base.name(),
                baseline_run: base.info.run_id.clone(),
                rows,
                reliance_mismatch: mismatch,
                reliance_blank: blank,
                distinguishable,
                sentence,
                taxonomy,
                taxonomy_note,
            }
        })
        .collect()
}

/// The section's table: one row per model, perturbation and group.
pub fn table(models: &[ModelReliance]) -> Option<Table> {
    if models.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "",
        &[
            ("model", false),
            ("perturbation", false),
            ("group", false),
            ("answers", true),
            ("accuracy unperturbed", true),
            ("accuracy perturbed", true),
            ("difference", true),
            ("right turned wrong", true),
        ],
    );
    t.footnote = "Accuracy is pass@1 (the share of right samples) over the answers scored in both runs, paired by \
                  task and sample; the difference (perturbed minus unperturbed) has a 95% paired bootstrap \
                  interval that resamples whole cases. Right turned wrong: of the answers right unperturbed, the \
                  share wrong under the perturbation. Image reliance is minus the difference under mismatch \
                  (another case's images of the same modality) or blank (mid-grey images)."
        .into();
    let pct = |v: f64| format!("{:.1}%", 100.0 * v);
    for m in models {
        for r in &m.rows {
            t.push(vec![
                Cell::new(&m.name),
                Cell::new(&r.perturbation),
                Cell::new(&r.group),
                Cell::new(r.pairs.to_string()),
                Cell::new(pct(r.baseline_accuracy)),
                Cell::new(pct(r.accuracy)),
                percent(r.difference.as_ref()),
                r.right_turned_wrong
                    .map_or(Cell::muted("–"), |v| Cell::new(pct(v))),
            ]);
        }
    }
    Some(t)
}

/// The taxonomy's table: one row per model and run (the unperturbed one first) whose shares are shown.
pub fn taxonomy_table(models: &[ModelReliance]) -> Option<Table> {
    if models.iter().all(|m| m.taxonomy.is_empty()) {
        return None;
    }
    let mut t = Table::new(
        "",
        &[
            ("model", false),
            ("perturbation", false),
            ("wrong answers labelled", true),
            ("perceptual failure", true),
            ("visual hallucination", true),
        ],
    );
    t.footnote = "Of each run's wrong answers with an error-taxonomy label (judges that saw the images the model \
                  was shown, --judge-images same, or people), the share labelled perceptual failure (missed or \
                  misread a finding the images show) and visual hallucination (described a finding they do not \
                  show), with 95% bootstrap intervals that resample whole cases. Perturbation none is the \
                  unperturbed run."
        .into();
    for m in models {
        for r in &m.taxonomy {
            t.push(vec![
                Cell::new(&m.name),
                Cell::new(&r.perturbation),
                Cell::new(r.labelled.to_string()),
                percent(r.perceptual_failure.as_ref()),
                percent(r.visual_hallucination.as_ref()),
            ]);
        }
    }
    Some(t)
}
