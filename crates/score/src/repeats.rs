//! The stability section of a score report, computed: how steady each judge is when asked again
//! (`--judge-repeats K`), per judge and quantity (each rubric dimension, the overall grade, the yes/no of a match)
//! the test–retest ICC and Fleiss' kappa between its repeats, the items whose repeats disagree (by
//! [`unstable_item`], the rule the report and the viewer share), and what the repeats cost.
//!
//! The judge's own answer is the median of its repeats ([`nmb_judges::judge::Repeated`]); this module only measures
//! them. The statistics are `nmb-stats`' ([`nmb_stats::retest_icc`], [`nmb_stats::retest_kappa`]).

use nmb_results::stability::{
    repeat_scores, spread, unstable_item, JudgeStability, RepeatCost, StabilityReport,
    UNSTABLE_SPREAD,
};
use nmb_results::{JudgeInfo, RepeatRun, SampleScore};
use nmb_stats::{retest_icc, retest_kappa, BootstrapConfig, Design};

/// Each repeat's yes/no per question and judge (`[question][judge][repeat]`).
pub type EquivalenceRepeats = Vec<Vec<Vec<Option<bool>>>>;

/// The stability section, from the scored samples (their rubric verdicts carry every repeat), each match
/// question's repeats, and the judges' runs.
pub fn stability_report(
    samples: &[SampleScore],
    dimensions: &[String],
    equivalence: &EquivalenceRepeats,
    judges: &[JudgeInfo],
    seeds: Vec<u64>,
    cfg: &BootstrapConfig,
) -> StabilityReport {
    let repeats = seeds.len() as u32;
    let mut measures = Vec::new();
    let mut unstable = Vec::new();
    for (j, judge) in judges.iter().enumerate() {
        let graded: Vec<&SampleScore> = samples
            .iter()
            .filter(|s| s.rubric.as_ref().is_some_and(|r| r.judges.len() > j))
            .collect();
        let mut quantities: Vec<String> = dimensions.to_vec();
        quantities.push("overall".into());
        for q in &quantities {
            let rows: Vec<Vec<Option<f64>>> =
                graded.iter().map(|s| repeat_scores(s, j, q)).collect();
            let cases: Vec<&str> = graded.iter().map(|s| s.case_id.as_str()).collect();
            if !graded.is_empty() {
                measures.push(measure(
                    &judge.spec,
                    &format!("rubric:{q}"),
                    &rows,
                    &cases,
                    true,
                    cfg,
                ));
            }
        }
        unstable.extend(
            graded
                .iter()
                .filter_map(|s| unstable_item(s, j, &judge.spec, dimensions)),
        );
        let rows: Vec<Vec<Option<f64>>> = equivalence
            .iter()
            .filter_map(|q| q.get(j))
            .map(|r| {
                r.iter()
                    .map(|v| v.map(|b| f64::from(u8::from(b))))
                    .collect()
            })
            .collect();
        if !rows.is_empty() {
            let units: Vec<String> = (0..rows.len()).map(|i| i.to_string()).collect();
            let units: Vec<&str> = units.iter().map(String::as_str).collect();
            measures.push(measure(
                &judge.spec,
                "equivalence",
                &rows,
                &units,
                false,
                cfg,
            ));
        }
    }
    StabilityReport {
        repeats,
        seeds,
        unstable_spread: UNSTABLE_SPREAD,
        measures,
        unstable,
        added: judges.iter().map(added_cost).collect(),
    }
}

/// ICC (for scores) and kappa on the items every repeat answered, clustered by `clusters` (the case).
fn measure(
    judge: &str,
    quantity: &str,
    rows: &[Vec<Option<f64>>],
    clusters: &[&str],
    scores: bool,
    cfg: &BootstrapConfig,
) -> JudgeStability {
    let (complete, kept): (Vec<Vec<f64>>, Vec<&str>) = rows
        .iter()
        .zip(clusters)
        .filter_map(|(r, c)| Some((r.iter().copied().collect::<Option<Vec<f64>>>()?, *c)))
        .unzip();
    let spreads: Vec<f64> = rows.iter().filter_map(|r| spread(r)).collect();
    let unstable_items = spreads
        .iter()
        .filter(|d| {
            if scores {
                **d >= UNSTABLE_SPREAD
            } else {
                **d > 0.0
            }
        })
        .count();
    let mut notes = Vec::new();
    let icc = if scores {
        retest_icc(&complete, cfg.level)
            .map_err(|e| notes.push(format!("ICC: {e}")))
            .ok()
    } else {
        None
    };
    let codes: Vec<Vec<i64>> = complete
        .iter()
        .map(|r| r.iter().map(|v| *v as i64).collect())
        .collect();
    let design = Design::clusters_by(&kept);
    let kappa = if complete.is_empty() {
        notes.push("kappa: no item answered validly by every repeat".into());
        None
    } else {
        retest_kappa(&codes, &design, cfg)
            .map_err(|e| notes.push(format!("kappa: {e}")))
            .ok()
    };
    JudgeStability {
        judge: judge.to_string(),
        quantity: quantity.to_string(),
        items: complete.len(),
        icc,
        kappa,
        mean_spread: (!spreads.is_empty())
            .then(|| spreads.iter().sum::<f64>() / spreads.len() as f64),
        unstable_items,
        notes,
    }
}

fn added_cost(j: &JudgeInfo) -> RepeatCost {
    // Saturating: a store may hold counts near 2^64 from before they were range-checked.
    let total = |f: fn(&RepeatRun) -> u64| {
        j.repeat_runs
            .iter()
            .fold(0u64, |a, r| a.saturating_add(f(r)))
    };
    RepeatCost {
        judge: j.spec.clone(),
        calls: total(|r| r.calls),
        tokens_in: total(|r| r.tokens_in),
        tokens_out: total(|r| r.tokens_out),
        first_calls: j.calls,
        first_tokens_in: j.tokens_in,
        first_tokens_out: j.tokens_out,
    }
}
