//! Worst-at-k beside pass@k (HealthBench's worst-at-k: for each task the expected lowest score over k of its
//! n samples, averaged over tasks), for k = 1 up to the most samples a task has, per run, for accuracy and for
//! criterion-rubric scores, each with a bootstrap interval that resamples whole cases. Shown only where tasks
//! have more than one sample.

use std::collections::BTreeMap;

use nmb_results::SampleScore;
use nmb_stats::{
    bootstrap_mean, pass_at_k, worst_at_k_curve, Average, BootstrapConfig, Design, Estimate,
    TaskSamples,
};
use serde::Serialize;

use crate::input::RunData;
use crate::table::{percent, Cell, Table};

/// Which score the curve is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorstScore {
    /// Correct (1) or not (0), over scored samples.
    Accuracy,
    /// The criterion-rubric score of each decided answer (HealthBench's rule); the average over tasks is
    /// clipped to 0–1.
    Criteria,
}

impl WorstScore {
    pub fn label(self) -> &'static str {
        match self {
            WorstScore::Accuracy => "accuracy",
            WorstScore::Criteria => "criterion score",
        }
    }
}

/// One k of a curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorstPoint {
    pub k: usize,
    /// Tasks with at least k scored samples: the tasks behind both values.
    pub tasks: usize,
    /// The mean over those tasks of the expected worst score of k samples, with a case-clustered CI.
    pub worst_at_k: Estimate,
    /// The mean over the same tasks of pass@k (the unbiased estimator, reading (a)); accuracy only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass_at_k: Option<Estimate>,
}

/// One run's curve for one score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunWorst {
    pub run_id: String,
    pub name: String,
    pub score: WorstScore,
    /// The most scored samples any task has (the largest k).
    pub samples_per_task: usize,
    pub points: Vec<WorstPoint>,
}

/// Every scored run's curves where some task has two or more scored samples.
pub fn build(runs: &[RunData], cfg: &BootstrapConfig) -> Vec<RunWorst> {
    let mut out = Vec::new();
    for run in runs {
        let Some(scores) = &run.scores else { continue };
        let accuracy = by_task(&scores.samples, |s| {
            s.status
                .is_scored()
                .then(|| f64::from(u8::from(s.correct == Some(true))))
        });
        let criteria = by_task(&scores.samples, |s| s.criteria.as_ref()?.score);
        for (score, tasks) in [
            (WorstScore::Accuracy, accuracy),
            (WorstScore::Criteria, criteria),
        ] {
            if let Some(w) = curve(run, score, &tasks, cfg) {
                out.push(w);
            }
        }
    }
    out
}

/// Per task (in task order), its case and the scores `value` gives its samples, in sample order.
fn by_task(
    samples: &[SampleScore],
    value: impl Fn(&SampleScore) -> Option<f64>,
) -> Vec<(String, Vec<f64>)> {
    let mut tasks: BTreeMap<&str, (&str, BTreeMap<u32, f64>)> = BTreeMap::new();
    for s in samples {
        if let Some(v) = value(s) {
            let entry = tasks
                .entry(s.task_id.as_str())
                .or_insert((s.case_id.as_str(), BTreeMap::new()));
            entry.1.insert(s.sample_index, v);
        }
    }
    tasks
        .into_values()
        .map(|(case, values)| (case.to_string(), values.into_values().collect()))
        .collect()
}

fn curve(
    run: &RunData,
    score: WorstScore,
    tasks: &[(String, Vec<f64>)],
    cfg: &BootstrapConfig,
) -> Option<RunWorst> {
    let n = tasks.iter().map(|(_, v)| v.len()).max()?;
    if n < 2 {
        return None;
    }
    let samples: Vec<TaskSamples> = tasks
        .iter()
        .map(|(case, scores)| TaskSamples { case, scores })
        .collect();
    let average = match score {
        WorstScore::Accuracy => Average::Mean,
        WorstScore::Criteria => Average::ClippedToUnit,
    };
    let worst = worst_at_k_curve(&samples, average, cfg).ok()?;
    let points = worst
        .into_iter()
        .map(|w| WorstPoint {
            k: w.k,
            tasks: w.tasks,
            pass_at_k: (score == WorstScore::Accuracy)
                .then(|| pass_curve_point(tasks, w.k, cfg))
                .flatten(),
            worst_at_k: w.estimate,
        })
        .collect();
    Some(RunWorst {
        run_id: run.info.run_id.clone(),
        name: run.name(),
        score,
        samples_per_task: n,
        points,
    })
}

/// pass@k (reading (a)) averaged over the tasks with at least k samples, resampling cases.
fn pass_curve_point(
    tasks: &[(String, Vec<f64>)],
    k: usize,
    cfg: &BootstrapConfig,
) -> Option<Estimate> {
    let (values, cases): (Vec<f64>, Vec<&str>) = tasks
        .iter()
        .filter(|(_, s)| s.len() >= k)
        .filter_map(|(case, s)| {
            let c = s.iter().filter(|&&x| x > 0.5).count();
            Some((pass_at_k(s.len(), c, k).ok()?, case.as_str()))
        })
        .unzip();
    if values.is_empty() {
        return None;
    }
    bootstrap_mean(&values, &Design::clusters_by(&cases), cfg).ok()
}

/// How to read the table; the same words in every rendering.
pub const CAPTION: &str = "Worst-at-k (HealthBench): for each task, the expected lowest score among k of its n \
samples drawn at random, averaged over the tasks with at least k scored samples; for accuracy it is the chance that \
all k answers are right. pass@k (reading (a)) over the same tasks is the chance that at least one of k is right. \
The gap between them is how much a user asking k times sees the model disagree with itself. 95% CIs resample \
whole cases. Criterion scores are averaged and clipped to 0–100% as HealthBench does; they have no pass@k.";

/// One row per run, score and k, or `None` when no curve was built.
pub fn table(curves: &[RunWorst]) -> Option<Table> {
    if curves.is_empty() {
        return None;
    }
    let mut t = Table::new(
        CAPTION,
        &[
            ("run", false),
            ("score", false),
            ("k", true),
            ("tasks", true),
            ("pass@k (a) [95% CI]", true),
            ("worst-at-k [95% CI]", true),
        ],
    );
    for c in curves {
        for p in &c.points {
            t.push(vec![
                Cell::new(c.name.clone()),
                Cell::new(c.score.label()),
                Cell::new(p.k.to_string()),
                Cell::new(p.tasks.to_string()),
                percent(p.pass_at_k.as_ref()),
                percent(Some(&p.worst_at_k)),
            ]);
        }
    }
    t.id = Some("worst-at-k-table".into());
    Some(t)
}
