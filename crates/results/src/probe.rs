//! Context probes, read side: what each probed sample was suggested and whether it took it, and the effect of a
//! probe on one model: the switch rate and the change in accuracy, each with a case-clustered bootstrap CI.

use std::collections::HashMap;

use nmb_stats::{bootstrap, BootstrapConfig, Design, Estimate};
use serde::{Deserialize, Serialize};

pub use crate::sample::ProbeAnswer;
use crate::SampleScore;

/// A probe's effect on one model: its probed run paired with the same evaluation without the probe, sample by
/// sample (task and sample index), over the probed tasks whose samples were scored in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeEffect {
    /// Pairs of samples compared.
    pub pairs: usize,
    /// Pairs whose unprobed answer was right: the switch rate's denominator.
    pub right_without: usize,
    /// Of those, the pairs whose probed answer is the suggested diagnosis.
    pub switched: usize,
    /// `switched / right_without`, clustered by case; `None` when no unprobed answer was right.
    pub switch_rate: Option<Estimate>,
    pub accuracy_without: f64,
    pub accuracy_with: f64,
    /// Accuracy with the probe minus without, clustered by case.
    pub accuracy_change: Estimate,
}

/// One pair: the case, right without the probe, right with it, took the suggestion.
struct Pair<'a> {
    case: &'a str,
    right_without: bool,
    right_with: bool,
    follows: bool,
}

/// The effect of a probe, from the unprobed and the probed run's samples; `None` when no probed sample was
/// scored in both runs.
pub fn effect(
    without: &[SampleScore],
    with: &[SampleScore],
    cfg: &BootstrapConfig,
) -> Option<ProbeEffect> {
    let unprobed: HashMap<(&str, u32), &SampleScore> = without
        .iter()
        .map(|s| ((s.task_id.as_str(), s.sample_index), s))
        .collect();
    let pairs: Vec<Pair> = with
        .iter()
        .filter_map(|p| {
            let probe = p.probe.as_ref()?;
            let u = unprobed.get(&(p.task_id.as_str(), p.sample_index))?;
            Some(Pair {
                case: p.case_id.as_str(),
                right_without: u.correct?,
                right_with: p.correct?,
                follows: probe.follows,
            })
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let design = Design::clusters_by(&pairs.iter().map(|p| p.case).collect::<Vec<_>>());
    let count =
        |idx: &[usize], f: &dyn Fn(&Pair) -> bool| idx.iter().filter(|&&i| f(&pairs[i])).count();
    let switch = |idx: &[usize]| {
        let right = count(idx, &|p| p.right_without);
        let switched = count(idx, &|p| p.right_without && p.follows);
        (right > 0).then(|| switched as f64 / right as f64)
    };
    let change = |idx: &[usize]| {
        let with = count(idx, &|p| p.right_with) as f64;
        let without = count(idx, &|p| p.right_without) as f64;
        Some((with - without) / idx.len() as f64)
    };
    let all: Vec<usize> = (0..pairs.len()).collect();
    let right_without = count(&all, &|p| p.right_without);
    Some(ProbeEffect {
        pairs: pairs.len(),
        right_without,
        switched: count(&all, &|p| p.right_without && p.follows),
        switch_rate: (right_without > 0)
            .then(|| bootstrap(&design, cfg, switch).ok())
            .flatten(),
        accuracy_without: right_without as f64 / pairs.len() as f64,
        accuracy_with: count(&all, &|p| p.right_with) as f64 / pairs.len() as f64,
        accuracy_change: bootstrap(&design, cfg, change).ok()?,
    })
}

/// A run's probe as its manifest records it: kind, seed, and how many tasks were and were not probed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedProbe {
    pub kind: String,
    pub seed: u64,
    pub probed_tasks: usize,
    /// Tasks asking for a diagnosis for which no wrong diagnosis could be chosen.
    pub unprobed_tasks: Vec<String>,
}

impl RecordedProbe {
    /// The probe of a run, `None` for a run without one.
    pub fn of(manifest: &nmb_store::Manifest) -> Option<RecordedProbe> {
        let p = manifest.probe.as_ref()?;
        Some(RecordedProbe {
            kind: p.get("kind")?.as_str()?.to_string(),
            seed: p.get("seed")?.as_u64()?,
            probed_tasks: p.get("suggestions")?.as_object()?.len(),
            unprobed_tasks: p
                .get("unprobed")
                .and_then(|u| serde_json::from_value(u.clone()).ok())
                .unwrap_or_default(),
        })
    }
}

/// Whether `plain` is the evaluation `probed` was made from, without its probe: no probe of its own, and the
/// same suite, templates, model, parameters, input mode, samples, limit and answer language.
pub fn is_unprobed_twin(probed: &nmb_store::Manifest, plain: &nmb_store::Manifest) -> bool {
    probed.probe.is_some()
        && plain.probe.is_none()
        && probed.suite_hash == plain.suite_hash
        && probed.template_hash == plain.template_hash
        && probed.model == plain.model
        && probed.model_identity == plain.model_identity
        && probed.params == plain.params
        && probed.input_mode == plain.input_mode
        && probed.samples == plain.samples
        && probed.limit == plain.limit
        && probed.answer_language == plain.answer_language
}
