//! Context probes: the configuration of an evaluation's probed run (`nmb eval --probe`, a run file's `probes`),
//! with the wrong diagnosis each task is suggested chosen from the suite by the seed.

use nmb_plan::{Probe, ProbeKind};
use nmb_run::EvalConfig;

/// `config` with `kind` added, its suggestions drawn with `seed` from the suite `config` names (loaded here),
/// and its name `NAME [kind]` when `name` is given. The probe's tasks without a suggestion are in
/// [`Probe::unprobed`].
pub fn probed(
    config: &EvalConfig,
    kind: ProbeKind,
    seed: u64,
    name: Option<&str>,
) -> Result<EvalConfig, nmb_suite::SourceError> {
    let loaded = config.suite.load_checked(config.text_only())?;
    let lexicon = nmb_score::lexicon::builtin();
    let chosen = nmb_score::probe::suggestions(lexicon, &loaded.suite, seed);
    let mut probed = config.clone();
    probed.probe = Some(Probe {
        kind,
        seed,
        suggestions: chosen.by_task,
        unprobed: chosen.unprobed,
    });
    if let Some(name) = name {
        probed.name = Some(format!("{name} [{kind}]"));
    }
    Ok(probed)
}
