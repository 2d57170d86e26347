//! How a run is scored, as one typed value ([`ScoringConfig`]): what `nmb score` and `nmb eval` parse their flags
//! into, what can be checked before any model is asked ([`ScoringConfig::check`]), and the [`ScoreOptions`] it
//! becomes once its judges are connected.
//!
//! Judges are connected by the caller ([`ConnectJudges`]): an API judge needs only `nmb-requests`, but a `local:`
//! judge needs the engine that loads it, which this crate does not depend on.

use std::path::PathBuf;

use nmb_judges::judge::JudgeModel;
use nmb_requests::{BackendKind, ModelSpec, Transport};
use nmb_results::cost::Prices;
use nmb_results::criteria::CriterionRubric;
use nmb_results::rubric::Rubric;
use nmb_results::structured::paper::PaperOptions;
use nmb_results::Aggregation;
use nmb_stats::BootstrapConfig;
use nmb_suite::{Filter, Level};
use serde::{Deserialize, Serialize};

use crate::error::ConnectError;
use crate::semantic::BertScoreSetting;
use crate::{JudgeImages, ScoreError, ScoreOptions};

/// Everything that decides how a run is scored: judges, jury aggregation, rubric, error taxonomy, BERTScore,
/// re-asks, concurrency, prices and the bootstrap, and, for scoring a stored run (`score_run`), where the run's
/// suite is when its manifest is not to be followed. `Default` is what `nmb score` does without options.
///
/// Serialised with judges as spec text (`openai:gpt-4o@http://127.0.0.1:8000/v1`); fields left out take their
/// default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoringConfig {
    /// The judge, or the jury when there are several. None: matching by rules only, no rubric, no judged
    /// taxonomy.
    #[serde(with = "spec_text")]
    pub judges: Vec<ModelSpec>,
    /// How a jury's verdicts combine.
    pub aggregation: Aggregation,
    pub rubric: RubricChoice,
    /// Ask the judges for the error class of wrong answers.
    pub taxonomy: bool,
    /// Human error-taxonomy labels (CSV), which take precedence over judges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxonomy_labels: Option<PathBuf>,
    pub bertscore: BertScoreSetting,
    /// Re-asks after an invalid judge answer.
    pub max_reasks: u32,
    /// Judge calls in flight per judge (at least 1 is used).
    pub judge_concurrency: usize,
    /// Model prices, for the cost of structured answers per 1,000 images.
    #[serde(skip_serializing_if = "is_empty")]
    pub prices: Prices,
    /// Bootstrap resampling of every interval (at least 1 resample is used).
    pub bootstrap: BootstrapConfig,
    /// Where the run's suite is, where its manifest is not to be followed.
    #[serde(skip_serializing_if = "SuiteOverride::is_empty")]
    pub suite: SuiteOverride,
    /// NeuroVLM-Bench answers are also read as the paper's evaluator reads them (`--protocol neurovlm-paper`),
    /// beside nmb's own reading; `None` reads them nmb's way only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<PaperOptions>,
    /// Judges see a reasoning model's thinking before each answer (`--judge-sees-thinking`), for grading how it
    /// reasoned; off by default, when they see the answers alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub judge_sees_thinking: bool,
    /// Judges send through their providers' batch APIs (`--judge-batch`), polled every this many seconds; `None`:
    /// call by call. How judges are asked, not what: it does not enter the scores' hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_batch_poll_secs: Option<f64>,
    /// Times each judge is asked each question (`--judge-repeats`), with seeds `0, 1, ...`; the jury uses the
    /// median of each judge's repeats, and the report measures how far they agree. 1 (the default) asks once.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub judge_repeats: u32,
    /// A criterion rubric (`--criteria`, HealthBench's form): judges decide each criterion of the tasks it
    /// covers, met or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<PathBuf>,
    /// The most MiB one judge response may take (`--max-response-mib`) [default: 1 MiB plus 64 bytes per token
    /// the judge may generate]. How judges are read, not what: it does not enter the scores' hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_mib: Option<u64>,
    /// Subgroup fields (`--by sex`, `--by age:0-40,40-65,65-`): every headline number is also given per
    /// subgroup. Enters the scores' hash only when given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// What judges see of the images the model was shown (`--judge-images`): `same` sends the very bytes with
    /// every question about a case. Enters the scores' hash only when `same`.
    #[serde(default, skip_serializing_if = "JudgeImages::is_none")]
    pub judge_images: JudgeImages,
}

/// Serde's default for a count that is 1 unless given.
fn one() -> u32 {
    1
}

/// Leaves a count of 1 out of what is serialised, so configs from before the count keep their bytes.
fn is_one(v: &u32) -> bool {
    *v == 1
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            judges: Vec::new(),
            aggregation: Aggregation::Majority,
            rubric: RubricChoice::Builtin,
            taxonomy: true,
            taxonomy_labels: None,
            bertscore: BertScoreSetting::model(
                PathBuf::from(crate::semantic::DEFAULT_MODEL_DIR),
                None,
            ),
            max_reasks: 2,
            judge_concurrency: 8,
            prices: Prices::default(),
            bootstrap: BootstrapConfig::default(),
            suite: SuiteOverride::default(),
            paper: None,
            judge_sees_thinking: false,
            judge_batch_poll_secs: None,
            judge_repeats: 1,
            criteria: None,
            max_response_mib: None,
            by: Vec::new(),
            judge_images: JudgeImages::None,
        }
    }
}

/// Which rubric grades answers. Serialised as `"builtin"`, `"off"` or `{"file": PATH}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RubricChoice {
    /// The built-in `rubrics/neurology-v1.toml`.
    #[default]
    Builtin,
    /// A rubric file (TOML).
    File(PathBuf),
    /// No rubric grading.
    Off,
}

/// What replaces the suite source a run's manifest records, field by field: a field left empty is taken from the
/// manifest, so that `--answers` alone scores the recorded suite against another answer key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SuiteOverride {
    /// `sample`, a path, or `FORMAT:PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// An answer-key JSONL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers: Option<PathBuf>,
    /// Task filters; empty keeps the manifest's.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "filters_as_text",
        deserialize_with = "filters_from_text"
    )]
    pub filters: Vec<Filter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
}

impl SuiteOverride {
    pub fn is_empty(&self) -> bool {
        self == &SuiteOverride::default()
    }
}

/// Turns a judge spec into a backend. Scoring calls it once per judge, with one HTTP transport shared by all
/// judges of a scoring. Any `Fn(&ModelSpec, &Transport) -> Result<JudgeModel, E>` is one; the spec a judge is
/// recorded by is its identity ([`ModelSpec::identity`]), whatever the returned [`JudgeModel::spec`] says.
pub trait ConnectJudges {
    fn connect(&self, spec: &ModelSpec, transport: &Transport) -> Result<JudgeModel, ConnectError>;
}

impl<F, E> ConnectJudges for F
where
    F: Fn(&ModelSpec, &Transport) -> Result<JudgeModel, E>,
    E: Into<ConnectError>,
{
    fn connect(&self, spec: &ModelSpec, transport: &Transport) -> Result<JudgeModel, ConnectError> {
        self(spec, transport).map_err(Into::into)
    }
}

impl ScoringConfig {
    /// Checks what can fail before any model is asked, so that a bad option fails before an evaluation rather
    /// than after it: each judge is a spec that can judge, prices are prices, the rubric file loads, the
    /// BERTScore baseline exists for the layer used.
    pub fn check(&self) -> Result<(), ScoreError> {
        for spec in &self.judges {
            check_judge(spec)?;
            self.check_sees_images(spec)?;
        }
        for (model, price) in &self.prices.0 {
            let ok = |v: f64| v.is_finite() && (0.0..=nmb_results::cost::MAX_RATE).contains(&v);
            if model.trim().is_empty() || !ok(price.input_per_mtok) || !ok(price.output_per_mtok) {
                return Err(ScoreError::Price {
                    model: model.clone(),
                });
            }
        }
        if let RubricChoice::File(path) = &self.rubric {
            Rubric::load(path)?;
        }
        if let Some(path) = &self.criteria {
            CriterionRubric::load(path)?;
        }
        for spec in &self.by {
            nmb_results::subgroup::parse(spec)?;
        }
        crate::semantic::check(&self.bertscore)
    }

    /// The options of a scoring of a run of `model` (the spec its manifest records, for its price), with its
    /// judges connected (in [`ScoringConfig::judges`]' order).
    pub fn options(
        &self,
        judges: Vec<JudgeModel>,
        model: &str,
    ) -> Result<ScoreOptions, ScoreError> {
        let rubric = match &self.rubric {
            RubricChoice::Builtin => Some(Rubric::builtin()),
            RubricChoice::File(path) => Some(Rubric::load(path)?),
            RubricChoice::Off => None,
        };
        Ok(ScoreOptions {
            judges,
            aggregation: self.aggregation,
            max_reasks: self.max_reasks,
            judge_concurrency: self.judge_concurrency.max(1),
            rubric,
            taxonomy: self.taxonomy,
            human_labels: self.taxonomy_labels.clone(),
            bertscore: self.bertscore.clone(),
            bootstrap: BootstrapConfig {
                resamples: self.bootstrap.resamples.max(1),
                ..self.bootstrap
            },
            price: self.prices.for_model(model),
            paper: self.paper,
            judge_sees_thinking: self.judge_sees_thinking,
            judge_repeats: self.judge_repeats.max(1),
            judge_batch: self
                .judge_batch_poll_secs
                .map(nmb_record::BatchOptions::polling_every),
            criteria: self
                .criteria
                .as_deref()
                .map(CriterionRubric::load)
                .transpose()?,
            by: self.by.clone(),
            judge_images: self.judge_images,
            ..ScoreOptions::default()
        })
    }

    /// The judge questions about one sample that carry its images, over every judge and repeat (at most: the
    /// taxonomy asks about wrong answers only, criteria about the tasks they cover): 0 unless `--judge-images
    /// same` with judges.
    pub fn image_questions_per_sample(&self) -> u64 {
        if self.judge_images != JudgeImages::Same {
            return 0;
        }
        let kinds = u64::from(self.rubric != RubricChoice::Off)
            + u64::from(self.taxonomy)
            + u64::from(self.criteria.is_some());
        kinds * self.judges.len() as u64 * u64::from(self.judge_repeats.max(1))
    }

    /// With `--judge-images same`, a judge whose backend cannot take images is refused before it is connected.
    fn check_sees_images(&self, spec: &ModelSpec) -> Result<(), ScoreError> {
        if self.judge_images != JudgeImages::Same {
            return Ok(());
        }
        match crate::scorer::blind_spec(spec) {
            Some(why) => Err(ScoreError::JudgeWithoutImages {
                spec: spec.to_string(),
                why: why.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Connects every judge through `connect`, sharing one HTTP transport, built only when there is a judge.
    pub fn connect_judges(
        &self,
        connect: &dyn ConnectJudges,
    ) -> Result<Vec<JudgeModel>, ScoreError> {
        if self.judges.is_empty() {
            return Ok(Vec::new());
        }
        let transport = Transport::new(&nmb_requests::HttpOptions {
            max_response_bytes: self.max_response_mib.map(|m| m.saturating_mul(1 << 20)),
            ..nmb_requests::HttpOptions::default()
        })?;
        self.judges
            .iter()
            .map(|spec| {
                check_judge(spec)?;
                self.check_sees_images(spec)?;
                let judge = connect.connect(spec, &transport).map_err(|source| {
                    ScoreError::ConnectJudge {
                        spec: spec.to_string(),
                        source,
                    }
                })?;
                Ok(JudgeModel {
                    spec: spec.identity(),
                    ..judge
                })
            })
            .collect()
    }
}

/// A judge must be a spec its own text parses back to (a spec built field by field may not be), and a model that
/// answers: a human's answers come from the store, never to a judge's question.
fn check_judge(spec: &ModelSpec) -> Result<(), ScoreError> {
    let text = spec.to_string();
    let reason = match ModelSpec::parse(&text) {
        Err(e) => e.to_string(),
        Ok(parsed) if parsed != *spec => format!("it reads back as {parsed}"),
        Ok(_) if spec.backend == BackendKind::Human => {
            "a human's answers come from the run store; a judge must be a model".to_string()
        }
        Ok(_) if spec.backend == BackendKind::Imported => {
            "an imported model's answers were read from a file; a judge must be a model it can ask"
                .to_string()
        }
        Ok(_) => return Ok(()),
    };
    Err(ScoreError::BadJudge { spec: text, reason })
}

fn is_empty(prices: &Prices) -> bool {
    prices.0.is_empty()
}

mod spec_text {
    use nmb_requests::ModelSpec;
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(specs: &[ModelSpec], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(specs.iter().map(ToString::to_string))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ModelSpec>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| ModelSpec::parse(t).map_err(de::Error::custom))
            .collect()
    }
}

fn filters_as_text<S: serde::Serializer>(filters: &[Filter], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(filters.iter().map(ToString::to_string))
}

fn filters_from_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Filter>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|f| f.parse().map_err(serde::de::Error::custom))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantic::Rescale;

    #[test]
    fn the_default_is_what_score_options_default_to() {
        let c = ScoringConfig::default();
        let o = c.options(Vec::new(), "openai:m").unwrap();
        let d = ScoreOptions::default();
        assert_eq!(
            (o.aggregation, o.max_reasks, o.judge_concurrency, o.taxonomy),
            (d.aggregation, d.max_reasks, d.judge_concurrency, d.taxonomy)
        );
        assert_eq!(o.rubric.map(|r| r.info()), d.rubric.map(|r| r.info()));
        assert_eq!((o.bertscore, o.bootstrap), (d.bertscore, d.bootstrap));
        assert_eq!(o.human_labels, d.human_labels);
        assert_eq!(o.price, None);
    }

    #[test]
    fn a_config_round_trips_through_json_with_judges_as_spec_text() {
        let config = ScoringConfig {
            judges: vec![
                ModelSpec::parse("openai:judge@http://127.0.0.1:8000/v1").unwrap(),
                ModelSpec::parse("anthropic:claude-sonnet-4-0").unwrap(),
            ],
            aggregation: Aggregation::Mean,
            rubric: RubricChoice::File(PathBuf::from("/r/rubric.toml")),
            taxonomy: false,
            taxonomy_labels: Some(PathBuf::from("labels.csv")),
            bertscore: BertScoreSetting::Model {
                dir: PathBuf::from("/m"),
                layer: Some(4),
                idf: true,
                rescale: Some(Rescale::Default),
            },
            max_reasks: 0,
            judge_concurrency: 3,
            prices: Prices::from_specs(&["*=1,2"]).unwrap(),
            bootstrap: BootstrapConfig {
                resamples: 50,
                level: 0.95,
                seed: 7,
            },
            judge_sees_thinking: true,
            judge_repeats: 3,
            judge_batch_poll_secs: Some(0.5),
            criteria: Some(PathBuf::from("criteria.toml")),
            max_response_mib: Some(64),
            by: vec!["age:0-40,40-".into(), "sex".into()],
            judge_images: JudgeImages::Same,
            suite: SuiteOverride {
                spec: Some("sample".into()),
                answers: Some(PathBuf::from("a.jsonl")),
                filters: vec!["family=differential".parse().unwrap()],
                level: Some(Level::Complex),
            },
            paper: Some(PaperOptions {
                json_validity_bug: true,
            }),
        };
        let text = serde_json::to_string(&config).unwrap();
        assert!(
            text.contains(
                r#""judges":["openai:judge@http://127.0.0.1:8000/v1","anthropic:claude-sonnet-4-0"]"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#""filters":["family=differential"]"#),
            "{text}"
        );
        let back: ScoringConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, config);

        let default: ScoringConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(default, ScoringConfig::default());
        let text = serde_json::to_string(&ScoringConfig::default()).unwrap();
        assert!(
            !text.contains("suite") && !text.contains("prices") && !text.contains("judge_images"),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<ScoringConfig>(&text).unwrap(),
            ScoringConfig::default()
        );
        let off: ScoringConfig =
            serde_json::from_str(r#"{"rubric":"off","bertscore":"off"}"#).unwrap();
        assert_eq!(
            (off.rubric, off.bertscore),
            (RubricChoice::Off, BertScoreSetting::Off)
        );
        let bad = serde_json::from_str::<ScoringConfig>(r#"{"judges":["gpt-4o"]}"#).unwrap_err();
        assert!(bad.to_string().contains("no backend"), "{bad}");
    }

    #[test]
    fn check_refuses_a_judge_that_cannot_judge() {
        let mut config = ScoringConfig {
            bertscore: BertScoreSetting::Off,
            ..ScoringConfig::default()
        };
        config.check().unwrap();

        config.judges = vec![ModelSpec::parse("human:dr.lee").unwrap()];
        let err = config.check().unwrap_err();
        assert!(matches!(err, ScoreError::BadJudge { .. }), "{err}");
        assert!(err.to_string().contains("human:dr.lee"), "{err}");

        // Built field by field, a spec may hold what its text form cannot say.
        config.judges = vec![ModelSpec {
            backend: BackendKind::OpenAi,
            model: "m".into(),
            base_urls: vec!["ftp://host".into()],
        }];
        let err = config.check().unwrap_err();
        assert!(err.to_string().contains("openai:m@ftp://host"), "{err}");

        // And connecting refuses it before the caller is asked.
        let never = |_: &ModelSpec, _: &Transport| -> Result<JudgeModel, ConnectError> {
            panic!("a bad judge spec reached the connector")
        };
        let err = config.connect_judges(&never).err();
        assert!(matches!(err, Some(ScoreError::BadJudge { .. })), "{err:?}");
    }

    #[test]
    fn check_refuses_a_missing_rubric_and_a_bad_price() {
        let mut config = ScoringConfig {
            bertscore: BertScoreSetting::Off,
            rubric: RubricChoice::File(PathBuf::from("/no/such/rubric.toml")),
            ..ScoringConfig::default()
        };
        assert!(config.check().is_err());
        config.rubric = RubricChoice::Off;
        config.prices = serde_json::from_str(
            r#"{"openai:m": {"input_per_mtok": -1.0, "output_per_mtok": 2.0}}"#,
        )
        .unwrap();
        let err = config.check().unwrap_err();
        assert!(err.to_string().contains("openai:m"), "{err}");
    }
}
