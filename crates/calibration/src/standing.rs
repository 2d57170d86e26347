//! Where a judge stands among the clinicians on one dimension: its agreement with each clinician, set beside
//! each clinician's agreement with the other clinicians (the clinician left out of their own comparison).
//!
//! Agreement is the quadratic-weighted kappa on scores rounded to whole points (rubric scores are ordinal). The
//! judge's figure is its mean kappa with each clinician; the clinicians' is the median, over clinicians, of a
//! clinician's mean kappa with the others. Both, and their difference, are bootstrapped over items on the same
//! resamples, so the sentence that says where the judge stands rests on the difference's interval.

use std::collections::BTreeMap;

use nmb_stats::{bootstrap_many, quadratic_kappa, BootstrapConfig, Design, Estimate};
use serde::Serialize;

/// A judge among the clinicians on one dimension.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    pub judge: String,
    /// The judge's mean quadratic kappa with each clinician.
    pub judge_agreement: Estimate,
    /// The median clinician's mean quadratic kappa with the other clinicians.
    pub clinician_agreement: Estimate,
    /// Judge minus median clinician: above 0, the judge agrees with the clinicians better than they agree with
    /// one another.
    pub difference: Estimate,
    /// What this says, in one sentence a clinician can read.
    pub sentence: String,
}

/// Scores of one dimension: annotator -> item -> score.
type Table = BTreeMap<String, BTreeMap<String, f64>>;

/// The judge's standing, or why it cannot be computed (fewer than two clinicians, too few shared items).
pub fn standing(
    judge: &str,
    t: &Table,
    clinicians: &[&String],
    cfg: &BootstrapConfig,
) -> Result<Standing, String> {
    if clinicians.len() < 2 {
        return Err("it needs at least two clinicians".into());
    }
    let raters: Vec<&BTreeMap<String, f64>> = std::iter::once(&t[judge])
        .chain(clinicians.iter().map(|c| &t[*c]))
        .collect();
    let mut items: Vec<&String> = raters.iter().flat_map(|r| r.keys()).collect();
    items.sort();
    items.dedup();
    // scores[r][i]: rater r's score of item i, rounded to whole points.
    let scores: Vec<Vec<Option<i64>>> = (raters.iter())
        .map(|r| {
            items
                .iter()
                .map(|i| r.get(*i).map(|s| s.round() as i64))
                .collect()
        })
        .collect();
    let estimates = bootstrap_many(&Design::units(items.len()), cfg, 3, |resample| {
        let stats = statistics(&scores, resample);
        vec![
            stats.map(|s| s.0),
            stats.map(|s| s.1),
            stats.map(|s| s.0 - s.1),
        ]
    })
    .map_err(|e| e.to_string())?;
    let [judge_agreement, clinician_agreement, difference]: [Estimate; 3] = estimates
        .try_into()
        .map_err(|_| "the bootstrap gave no estimates".to_string())?;
    let sentence = sentence(judge, &judge_agreement, &clinician_agreement, &difference);
    Ok(Standing {
        judge: judge.to_string(),
        judge_agreement,
        clinician_agreement,
        difference,
        sentence,
    })
}

/// (the judge's mean kappa with the clinicians, the median clinician's mean kappa with the others) on the items
/// `resample` lists (with repeats). Rater 0 is the judge.
fn statistics(scores: &[Vec<Option<i64>>], resample: &[usize]) -> Option<(f64, f64)> {
    let kappa = |a: usize, b: usize| {
        let (x, y): (Vec<i64>, Vec<i64>) = (resample.iter())
            .filter_map(|&i| Some((scores[a][i]?, scores[b][i]?)))
            .unzip();
        quadratic_kappa(&x, &y).ok().filter(|k| k.is_finite())
    };
    let clinicians: Vec<usize> = (1..scores.len()).collect();
    let judge = mean(clinicians.iter().filter_map(|&c| kappa(0, c)))?;
    let mut each: Vec<f64> = (clinicians.iter())
        .filter_map(|&c| {
            mean(
                clinicians
                    .iter()
                    .filter(|&&o| o != c)
                    .filter_map(|&o| kappa(c, o)),
            )
        })
        .collect();
    each.sort_by(f64::total_cmp);
    let median = match each.len() {
        0 => return None,
        n if n % 2 == 1 => each[n / 2],
        n => (each[n / 2 - 1] + each[n / 2]) / 2.0,
    };
    Some((judge, median))
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn sentence(judge: &str, j: &Estimate, c: &Estimate, d: &Estimate) -> String {
    let how = if d.ci_low > 0.0 {
        "better than the median clinician agrees with the others"
    } else if d.ci_high < 0.0 {
        "less well than the median clinician agrees with the others"
    } else {
        "as well as the median clinician agrees with the others (the difference's interval holds 0)"
    };
    let interval = |e: &Estimate| format!("{:.2} [{:.2}, {:.2}]", e.value, e.ci_low, e.ci_high);
    format!(
        "{judge} agrees with the clinicians {how}: quadratic kappa {} against {}.",
        interval(j),
        interval(c)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four clinicians who grade the truth with a little noise; a judge like them, and one who guesses.
    fn table() -> Table {
        let mut t = Table::new();
        let mut x: u64 = 0x5eed_cafe;
        let mut noise = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 10
        };
        for item in 0..80 {
            let truth = (item % 5) as f64;
            let name = format!("item{item:02}");
            for rater in ["c1", "c2", "c3", "c4", "judge:close"] {
                let off = match noise() {
                    0 => -1.0,
                    1 => 1.0,
                    _ => 0.0,
                };
                let score = (truth + off).clamp(0.0, 4.0);
                t.entry(rater.into())
                    .or_default()
                    .insert(name.clone(), score);
            }
            let guess = (noise() % 5) as f64;
            t.entry("judge:guess".into())
                .or_default()
                .insert(name, guess);
        }
        t
    }

    #[test]
    fn a_judge_like_the_clinicians_stands_among_them_and_a_guesser_below() {
        let t = table();
        let names: Vec<String> = ["c1", "c2", "c3", "c4"].map(String::from).to_vec();
        let clinicians: Vec<&String> = names.iter().collect();
        let cfg = BootstrapConfig {
            resamples: 500,
            ..BootstrapConfig::default()
        };
        let close = standing("judge:close", &t, &clinicians, &cfg).unwrap();
        assert!(
            close.difference.ci_low < 0.0 && close.difference.ci_high > 0.0,
            "{close:?}"
        );
        assert!(
            close.sentence.contains("as well as the median clinician"),
            "{}",
            close.sentence
        );
        let guess = standing("judge:guess", &t, &clinicians, &cfg).unwrap();
        assert!(guess.difference.ci_high < 0.0, "{guess:?}");
        assert!(guess
            .sentence
            .starts_with("judge:guess agrees with the clinicians less well"));
        assert!(standing("judge:close", &t, &clinicians[..1], &cfg).is_err());
    }
}
