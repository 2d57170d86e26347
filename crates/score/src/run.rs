//! Scoring a stored run from its id alone: find the suite it was made on, connect the judges, score, store the
//! report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use nmb_judges::judge::JudgeImage;
use nmb_requests::{Scheduler, SchedulerConfig};
use nmb_results::stored;
use nmb_results::ScoreReport;
use nmb_store::{Manifest, Store};
use nmb_suite::{Filter, Level, Source, Suite};

use crate::config::{ConnectJudges, ScoringConfig, SuiteOverride};
use crate::scorer::ShownImages;
use crate::{score_loaded, ScoreError};

/// Scores `run_id` as `config` says and stores the report (replacing one with the same configuration hash).
///
/// The suite is the one the run's manifest records (as a text-only run loaded it), with `config.suite`'s fields
/// in place of the recorded ones; a run of a bundled suite that recorded no source finds it by its id. A judge
/// run is refused: it holds verdicts, not answers.
pub async fn score_run(
    store: &Arc<Store>,
    run_id: &str,
    config: &ScoringConfig,
    judges: &dyn ConnectJudges,
) -> Result<ScoreReport, ScoreError> {
    let run = store.run(run_id)?;
    if let Some(judged) = run.manifest.judged_run() {
        return Err(ScoreError::JudgeRun {
            run_id: run_id.to_string(),
            judged: judged.to_string(),
        });
    }
    let source = suite_source(run_id, &run.manifest, &config.suite)?;
    let suite = source
        .load(run.manifest.input_mode == nmb_store::InputMode::Text)?
        .suite;
    score_suite(store, run_id, &suite, config, judges).await
}

/// [`score_run`] for a run whose suite is already loaded (an evaluation that scores what it just ran):
/// `config.suite` is not read.
pub async fn score_suite(
    store: &Arc<Store>,
    run_id: &str,
    suite: &Suite,
    config: &ScoringConfig,
    judges: &dyn ConnectJudges,
) -> Result<ScoreReport, ScoreError> {
    let model = store.run(run_id)?.manifest.model;
    let opts = config.options(config.connect_judges(judges)?, &model)?;
    let mut limits = SchedulerConfig::default();
    if opts.judge_batch.is_some() {
        limits.global_limit = limits.global_limit.max(nmb_record::BATCH_IN_FLIGHT);
    }
    let scheduler = Scheduler::new(limits);
    let report = score_loaded(store, &scheduler, run_id, suite, &opts).await?;
    stored::save(store, &report)?;
    Ok(report)
}

/// What a judge that sees the model's images (`--judge-images same`) is shown with each stored sample
/// `(run_id, task_id, sample_index)` of `samples`: the exact bytes its model received, in order, captioned from
/// the case of the suite its run's manifest records (each run's suite loaded once). A sample that is not stored,
/// or was never answered, shows nothing.
pub fn shown_images(
    store: &Store,
    samples: &[(&str, &str, u32)],
) -> Result<Vec<Vec<JudgeImage>>, ScoreError> {
    let mut suites: HashMap<String, Suite> = HashMap::new();
    let mut reader = ShownImages::new(store);
    let mut out = Vec::with_capacity(samples.len());
    for &(run_id, task_id, sample) in samples {
        let Some(record) = store.sample_record(run_id, task_id, sample)? else {
            out.push(Vec::new());
            continue;
        };
        if !suites.contains_key(run_id) {
            let manifest = store.run(run_id)?.manifest;
            let source = suite_source(run_id, &manifest, &SuiteOverride::default())?;
            let text_only = manifest.input_mode == nmb_store::InputMode::Text;
            suites.insert(run_id.to_string(), source.load(text_only)?.suite);
        }
        let case = suites[run_id]
            .tasks()
            .find(|(_, t)| t.id == task_id)
            .map(|(c, _)| c);
        out.push(reader.of(run_id, &record, case)?);
    }
    Ok(out)
}

/// Where the suite of a run is and how it was loaded: the manifest's record, each field replaced where `over`
/// has one.
pub fn suite_source(
    run_id: &str,
    manifest: &Manifest,
    over: &SuiteOverride,
) -> Result<Source, ScoreError> {
    let recorded = &manifest.suite_source;
    let bundled = ["sample", nmb_suite::sample::structured::SUITE_ID];
    let spec = over
        .spec
        .clone()
        .or_else(|| recorded.suite_spec.clone())
        .or_else(|| {
            bundled
                .contains(&manifest.suite_id.as_str())
                .then(|| manifest.suite_id.clone())
        })
        .ok_or_else(|| ScoreError::SuiteUnknown {
            run_id: run_id.to_string(),
            suite_id: manifest.suite_id.clone(),
        })?;
    let bad = |field: &'static str, value: &str, message: String| ScoreError::ManifestSource {
        run_id: run_id.to_string(),
        field,
        value: value.to_string(),
        message,
    };
    let filters = if over.filters.is_empty() {
        recorded
            .filters
            .iter()
            .flatten()
            .map(|f| {
                f.parse::<Filter>()
                    .map_err(|e| bad("filter", f, e.to_string()))
            })
            .collect::<Result<_, _>>()?
    } else {
        over.filters.clone()
    };
    let level = match over.level {
        Some(l) => Some(l),
        None => recorded
            .level
            .as_deref()
            .map(|l| {
                l.parse::<Level>()
                    .map_err(|e| bad("level", l, e.to_string()))
            })
            .transpose()?,
    };
    let map = recorded
        .map
        .iter()
        .flatten()
        .map(|m| nmb_suite::parse_map(m).map_err(|e| bad("map", m, e)))
        .collect::<Result<_, _>>()?;
    Ok(Source {
        spec,
        answers: over
            .answers
            .clone()
            .or_else(|| recorded.answers_path.as_ref().map(PathBuf::from)),
        filters,
        level,
        map,
        images_root: recorded.images_root.as_ref().map(PathBuf::from),
        split: recorded.split.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(suite_id: &str, source: serde_json::Value) -> Manifest {
        let mut m = Manifest {
            suite_id: suite_id.into(),
            ..Manifest::default()
        };
        m.suite_source = serde_json::from_value(source).unwrap();
        m
    }

    #[test]
    fn the_suite_is_the_recorded_one_with_overrides_field_by_field() {
        let m = manifest(
            "site-x",
            serde_json::json!({"suite_spec": "site:/s/x.json", "answers_path": "/s/a.jsonl",
                "filters": ["family=differential"], "level": "complex", "map": ["diagnosis_name=label"]}),
        );
        let s = suite_source("r1", &m, &SuiteOverride::default()).unwrap();
        assert_eq!(s.spec, "site:/s/x.json");
        assert_eq!(s.answers, Some(PathBuf::from("/s/a.jsonl")));
        assert_eq!(s.filters, vec!["family=differential".parse().unwrap()]);
        assert_eq!(s.level, Some(Level::Complex));
        assert_eq!(s.map, vec![("diagnosis_name".into(), "label".into())]);

        let over = SuiteOverride {
            answers: Some(PathBuf::from("b.jsonl")),
            ..SuiteOverride::default()
        };
        let s = suite_source("r1", &m, &over).unwrap();
        assert_eq!(
            (s.spec.as_str(), s.answers),
            ("site:/s/x.json", Some(PathBuf::from("b.jsonl")))
        );
    }

    #[test]
    fn a_suite_nobody_recorded_is_refused_unless_bundled() {
        let m = manifest("site-x", serde_json::json!({}));
        let err = suite_source("r1", &m, &SuiteOverride::default()).unwrap_err();
        assert!(err.to_string().contains("pass --suite"), "{err}");
        let s = suite_source(
            "r1",
            &manifest("sample", serde_json::json!({})),
            &SuiteOverride::default(),
        );
        assert_eq!(s.unwrap().spec, "sample");

        let m = manifest("sample", serde_json::json!({"filters": ["nonsense"]}));
        let err = suite_source("r1", &m, &SuiteOverride::default()).unwrap_err();
        assert!(
            err.to_string().contains("run manifest filter \"nonsense\""),
            "{err}"
        );
    }
}
