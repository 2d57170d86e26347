//! Judges' pairwise votes as they are stored: the pair a judge is shown ([`PairToJudge`]), its verdicts in both
//! orders ([`PairVerdicts`]), and reading them back from the judge runs of a scored run ([`stored_verdicts`]).
//! A judge answers `{"better": "1" | "2" | "tie", "rationale": ...}`; [`better`] reads that answer, when it is
//! asked (`nmb_judges::pairwise`) and when it is read back.

use nmb_stats::Preference;
use nmb_store::Store;
use serde_json::Value;

use crate::error::ResultsError;

/// Two answers `x` and `y` to one question; `key` names the pair in the judge run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairToJudge {
    pub key: String,
    pub question: String,
    pub x: String,
    pub y: String,
}

/// One judge's verdicts on one pair, both written as X against Y (`AWins`: X is better); `None` where the judge
/// gave no valid answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairVerdicts {
    pub x_first: Option<Preference>,
    pub y_first: Option<Preference>,
}

/// "1", "2" or "tie" from the judge's JSON answer (the first JSON object in the text).
pub fn better(text: &str) -> Result<&'static str, String> {
    let start = text.find('{').ok_or("expected a JSON object")?;
    let end = text.rfind('}').ok_or("expected a JSON object")?;
    let v: Value = serde_json::from_str(text.get(start..=end).unwrap_or(""))
        .map_err(|e| format!("not JSON: {e}"))?;
    match v.get("better").and_then(Value::as_str) {
        Some("1") => Ok("1"),
        Some("2") => Ok("2"),
        Some("tie") => Ok("tie"),
        other => Err(format!(
            "\"better\" is {other:?}; expected \"1\", \"2\" or \"tie\""
        )),
    }
}

/// The pairwise verdicts judges already gave on the pairs `keys`, read from the judge runs of `scored_run_id`
/// (one entry per judge run that holds any of them, oldest first): what `nmb_judges::pairwise::judge_pairs` stored.
pub fn stored_verdicts(
    store: &Store,
    scored_run_id: &str,
    keys: &[String],
) -> Result<Vec<(String, Vec<PairVerdicts>)>, ResultsError> {
    let mut runs = store.list_runs()?;
    runs.reverse();
    let mut out = Vec::new();
    for run in runs
        .iter()
        .filter(|r| r.manifest.judged_run() == Some(scored_run_id))
    {
        let texts: std::collections::BTreeMap<String, String> = (store.run_samples(&run.run_id)?)
            .into_iter()
            .filter(|s| s.task_id.starts_with("pair:"))
            .filter_map(|s| Some((s.task_id, s.final_text?)))
            .collect();
        if texts.is_empty() {
            continue;
        }
        let read = |key: &str, order: &str, x_first: bool| {
            let text = texts.get(&format!("pair:{key}:{order}"))?;
            Some(as_x_against_y(better(text).ok()?, x_first))
        };
        let verdicts = keys
            .iter()
            .map(|k| PairVerdicts {
                x_first: read(k, "xy", true),
                y_first: read(k, "yx", false),
            })
            .collect();
        // A judge run that was sent images says so by its input mode (text-only judge runs record `text`).
        let images = run.manifest.input_mode != nmb_store::InputMode::Text;
        out.push((judge_name(&run.manifest.model, images), verdicts));
    }
    Ok(out)
}

/// How a judge is named beside its pairwise verdicts: its spec, and `(with images)` when its questions carried the
/// images the models were shown (`nmb review judge --judge-images same`), so that the two askings of one judge
/// stay apart.
pub fn judge_name(spec: &str, images: bool) -> String {
    match images {
        true => format!("{spec} (with images)"),
        false => spec.to_string(),
    }
}

pub fn as_x_against_y(better: &str, x_first: bool) -> Preference {
    match (better, x_first) {
        ("tie", _) => Preference::Tie,
        ("1", true) | ("2", false) => Preference::AWins,
        _ => Preference::BWins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_in_the_order_it_was_shown() {
        assert_eq!(
            better("sure: {\"better\": \"2\", \"rationale\": \"x\"}"),
            Ok("2")
        );
        assert!(better("{\"better\": \"both\"}").is_err());
        assert_eq!(as_x_against_y("1", false), Preference::BWins);
        assert_eq!(as_x_against_y("2", false), Preference::AWins);
    }
}
