//! What a paired comparison of two scored runs on this suite can detect: the smallest difference in accuracy
//! it detects with the asked power, and the cases a target difference needs, from the runs' own per-case
//! variance, the correlation between their paired answers and the clustering of answers within cases
//! (`nmb_stats::PairedVariance`, method in `docs/report.md`).
//!
//! The items are those `nmb compare` pairs: (task, sample index) scored in both runs, errored, pending and
//! no-reference samples left out on either side; the score is accuracy (0/1). With one run, run B is assumed
//! to have run A's variance and clustering, and the correlation between paired answers is the caller's.

use std::collections::BTreeMap;

use nmb_stats::{power_summary, PairedTest, PairedVariance, PowerSummary};
use serde::{Deserialize, Serialize};

use crate::error::ResultsError;
use crate::report::ScoreReport;
use crate::sample::SampleScore;

/// What to compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerOptions {
    /// Two-sided level, in (0, 1).
    pub alpha: f64,
    /// Power asked for, in [0.5, 1).
    pub power: f64,
    /// A target difference in accuracy (0.05 is 5 points) whose cases needed are computed.
    pub detect: Option<f64>,
    /// One run alone: the assumed correlation between its answers and a second run's on the same items.
    pub correlation: f64,
}

impl Default for PowerOptions {
    fn default() -> Self {
        PowerOptions {
            alpha: crate::multiplicity::DEFAULT_ALPHA,
            power: 0.8,
            detect: None,
            correlation: 0.0,
        }
    }
}

/// The power analysis of a comparison of two runs (or of one run with a run not made yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerAnalysis {
    pub run_a: String,
    /// `None` for one run alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_b: Option<String>,
    /// The score the figures are for.
    pub score: String,
    /// With one run: the assumption that stands in for the second run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumption: Option<String>,
    /// The paired bootstrap resampling cases, then the cluster-adjusted McNemar test (where it is defined).
    pub tests: Vec<PowerSummary>,
}

impl PowerAnalysis {
    /// The paired bootstrap's figures (the A − B interval and p-value of `nmb compare`).
    pub fn bootstrap(&self) -> Option<&PowerSummary> {
        self.tests.iter().find(|t| t.test == PairedTest::Bootstrap)
    }

    /// "With N cases this suite detects differences in accuracy of X points or more with 80% power at
    /// α = 0.05 (paired bootstrap resampling cases)."
    pub fn sentence(&self) -> Option<String> {
        let s = self.bootstrap()?;
        let v = &s.variance;
        let mut text = format!(
            "With {} cases ({} paired answers) this suite detects differences in {} of {:.1} points or more with \
             {:.0}% power at α = {} ({}).",
            v.cases,
            v.items,
            self.score,
            s.detectable_difference * 100.0,
            s.power * 100.0,
            s.alpha,
            s.test.label()
        );
        if let (Some(t), Some(k)) = (s.target, s.cases_needed) {
            text.push_str(&format!(
                " A difference of {:.1} points needs {k} cases like these.",
                t * 100.0
            ));
        }
        Some(text)
    }
}

/// Why no power analysis: the runs cannot be paired.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    #[error(
        "runs {run_a} and {run_b} were scored against different suites or answer keys (suite hashes {hash_a} \
         and {hash_b}); a paired comparison needs the same suite"
    )]
    DifferentSuites {
        run_a: String,
        run_b: String,
        hash_a: String,
        hash_b: String,
    },
    #[error("runs {run_a} and {run_b} have no case scored in both; nothing to pair")]
    NoCommonCases { run_a: String, run_b: String },
    #[error("run {run}: {why}")]
    Run { run: String, why: String },
    #[error(transparent)]
    Results(#[from] ResultsError),
}

/// The power analysis of comparing `a` with `b` on their paired answers.
pub fn paired_power(
    a: &ScoreReport,
    b: &ScoreReport,
    opts: &PowerOptions,
) -> Result<PowerAnalysis, PowerError> {
    if a.config.suite_hash_scored != b.config.suite_hash_scored {
        return Err(PowerError::DifferentSuites {
            run_a: a.run_id.clone(),
            run_b: b.run_id.clone(),
            hash_a: a.config.suite_hash_scored.clone(),
            hash_b: b.config.suite_hash_scored.clone(),
        });
    }
    let b_index: BTreeMap<(&str, u32), &SampleScore> = scored(b)
        .map(|s| ((s.task_id.as_str(), s.sample_index), s))
        .collect();
    let pairs: Vec<(&SampleScore, &SampleScore)> = scored(a)
        .filter_map(|s| {
            b_index
                .get(&(s.task_id.as_str(), s.sample_index))
                .map(|t| (s, *t))
        })
        .collect();
    if pairs.is_empty() {
        return Err(PowerError::NoCommonCases {
            run_a: a.run_id.clone(),
            run_b: b.run_id.clone(),
        });
    }
    let xa: Vec<f64> = pairs.iter().map(|(s, _)| correct(s)).collect();
    let xb: Vec<f64> = pairs.iter().map(|(_, t)| correct(t)).collect();
    let cases: Vec<&str> = pairs.iter().map(|(s, _)| s.case_id.as_str()).collect();
    let tasks: Vec<&str> = pairs.iter().map(|(s, _)| s.task_id.as_str()).collect();
    let both = format!("{} and {}", a.run_id, b.run_id);
    let variance = PairedVariance::estimate(&xa, &xb, &cases, &tasks).map_err(|e| run(&both, e))?;
    Ok(PowerAnalysis {
        run_a: a.run_id.clone(),
        run_b: Some(b.run_id.clone()),
        score: "accuracy".into(),
        assumption: None,
        tests: summaries(&variance, opts).map_err(|e| run(&both, e))?,
    })
}

/// The power analysis of comparing `a` with a second run not made yet, on the same suite, whose answers
/// correlate with `a`'s by `opts.correlation` and which has `a`'s variance and clustering.
pub fn one_run_power(a: &ScoreReport, opts: &PowerOptions) -> Result<PowerAnalysis, PowerError> {
    let samples: Vec<&SampleScore> = scored(a).collect();
    if samples.is_empty() {
        return Err(PowerError::Run {
            run: a.run_id.clone(),
            why: "no scored answer (every sample errored, is pending or has no reference)".into(),
        });
    }
    let xa: Vec<f64> = samples.iter().map(|s| correct(s)).collect();
    let cases: Vec<&str> = samples.iter().map(|s| s.case_id.as_str()).collect();
    let tasks: Vec<&str> = samples.iter().map(|s| s.task_id.as_str()).collect();
    let variance = PairedVariance::from_one_run(&xa, &cases, &tasks, opts.correlation)
        .map_err(|e| run(&a.run_id, e))?;
    Ok(PowerAnalysis {
        run_a: a.run_id.clone(),
        run_b: None,
        score: "accuracy".into(),
        assumption: Some(format!(
            "one run: the second run is assumed to have this run's per-answer variance and clustering of answers \
             in cases, and its answers to correlate with this run's on the same item by ρ = {} (--correlation); \
             runs of similar models usually correlate positively, which makes the detectable difference smaller",
            opts.correlation
        )),
        tests: summaries(&variance, opts).map_err(|e| run(&a.run_id, e))?,
    })
}

fn scored(r: &ScoreReport) -> impl Iterator<Item = &SampleScore> {
    r.samples.iter().filter(|s| s.status.is_scored())
}

fn correct(s: &SampleScore) -> f64 {
    f64::from(u8::from(s.correct == Some(true)))
}

fn run(run: &str, e: nmb_stats::StatsError) -> PowerError {
    PowerError::Run {
        run: run.to_string(),
        why: e.to_string(),
    }
}

/// Both tests' figures; the McNemar test is left out where it cannot reach the power with so few cases.
fn summaries(
    variance: &PairedVariance,
    opts: &PowerOptions,
) -> Result<Vec<PowerSummary>, nmb_stats::StatsError> {
    let mut out = vec![power_summary(
        variance,
        PairedTest::Bootstrap,
        opts.alpha,
        opts.power,
        opts.detect,
    )?];
    if let Ok(s) = power_summary(
        variance,
        PairedTest::ClusteredMcNemar,
        opts.alpha,
        opts.power,
        opts.detect,
    ) {
        out.push(s);
    }
    Ok(out)
}
