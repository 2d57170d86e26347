//! What identifies a run: the settings an [`EvalConfig`](super::EvalConfig) resolves to once its model is
//! connected, the manifest recorded with the run, and the configuration hash it is found and resumed by.

use std::collections::BTreeMap;

use nmb_plan::{GenParams, OutputFormat, PlanOptions};
use nmb_requests::{Adjustment, Backend, ModelIdentity, Secrets};
use nmb_store::{Manifest, Recorded, SuiteSource, TemplateRef};
use nmb_suite::{Family, Suite};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{Claiming, Resume};

/// What `--no-n` records in the manifest.
pub const FORCED: &str = "--no-n: one request per sample";

/// Everything an evaluation needs besides the suite, the store and the backend.
#[derive(Debug, Clone)]
pub struct EvalSettings {
    /// The model as recorded and used in cache keys: with several base URLs (replicas of one model) the first
    /// alone, so a run has the same configuration hash and cached answers whichever replicas serve it.
    pub model: ModelIdentity,
    pub params: GenParams,
    pub plan: PlanOptions,
    /// Calls in flight at once, over all backends.
    pub concurrency: usize,
    /// Calls in flight at once on this backend (adaptive: halves on 429 and climbs back).
    pub per_backend: usize,
    /// Stop starting new calls after this many in this invocation; the run stays resumable.
    pub max_requests: Option<u64>,
    pub resume: Resume,
    /// Extra manifest fields that identify the model beyond its spec (e.g. a local model's content hash).
    pub model_identity: Map<String, Value>,
    /// Inputs the backend cannot take (e.g. images for a text-only model), recorded in the manifest.
    pub dropped_inputs: Vec<String>,
    /// How the suite was named, recorded in the manifest so that scoring can load the same suite again. Not part
    /// of the configuration hash: the suite hash is.
    pub suite_source: SuiteSource,
    /// The name reports show (`--name`); not part of the configuration hash.
    pub display_name: Option<String>,
    /// The study the run belongs to (`nmb eval --config`); not part of the configuration hash.
    pub study: Option<String>,
    /// Ask every sample in a request of its own even where the API has `n` (`--no-n`).
    pub no_n: bool,
    /// Create the run and its pending samples, then stop (`--plan-only`): workers do the rest.
    pub plan_only: bool,
    /// Share the run with other processes: claim samples under a lease instead of taking every unfinished one.
    pub claiming: Option<Claiming>,
    /// The [`EvalConfig`](super::EvalConfig) the run was made with, recorded so that `nmb worker` can run it again.
    pub eval_config: Option<Value>,
}

impl EvalSettings {
    pub fn new(model: ModelIdentity) -> Self {
        EvalSettings {
            model,
            params: GenParams::default(),
            plan: PlanOptions::default(),
            concurrency: 16,
            per_backend: 16,
            max_requests: None,
            resume: Resume::Auto,
            model_identity: Map::new(),
            dropped_inputs: Vec::new(),
            suite_source: SuiteSource::default(),
            display_name: None,
            study: None,
            no_n: false,
            plan_only: false,
            claiming: None,
            eval_config: None,
        }
    }
}

/// The manifest recorded with a run (the suite hash is computed here, which can fail).
pub(crate) fn build_manifest(
    suite: &Suite,
    settings: &EvalSettings,
    samples: u32,
    backend: &dyn Backend,
) -> Result<Manifest, nmb_suite::SuiteError> {
    let mut dropped = settings.dropped_inputs.clone();
    if !backend.supports_images() && settings.plan.input_mode.includes_images() {
        let note = "images (text-only model: image parts are not sent)".to_string();
        if !dropped.contains(&note) {
            dropped.push(note);
        }
    }
    let structured = suite.tasks().any(|(_, t)| t.family == Family::Structured);
    let json_tasks = suite.tasks().any(|(_, t)| {
        matches!(
            nmb_plan::output::output_format(t.family),
            OutputFormat::Json { schema: Some(_) }
        )
    });
    let constrained =
        json_tasks.then(|| backend.constrained_output().unwrap_or("none").to_string());
    let mut extra = Map::new();
    if let Some(p) = &settings.plan.perturbation {
        extra.insert(PERTURBATION.into(), p.to_string().into());
        extra.insert(
            PERTURBATION_VERSION.into(),
            nmb_imaging::perturb::PERTURB_VERSION.into(),
        );
    }
    if let Some(pool) = &settings.plan.examples {
        extra.insert(FEW_SHOT.into(), pool.record(suite, settings.plan.limit));
    }
    Ok(Manifest {
        extra,
        nmb_version: env!("CARGO_PKG_VERSION").to_string(),
        suite_id: suite.id.clone(),
        suite_hash: nmb_suite::suite_hash(suite)?,
        suite_version: Some(suite.version.clone()),
        suite_format: Some(suite.format.clone()),
        suite_source: settings.suite_source.clone(),
        limit: Recorded::Present(settings.plan.limit.map(|l| l as u64)),
        template_id: "per-family".into(),
        template_hash: settings.plan.templates_hash(structured),
        templates: Some(templates(&settings.plan, structured)),
        model: settings.model.to_string(),
        model_identity: Some(settings.model_identity.clone()),
        display_name: settings.display_name.clone(),
        study: settings.study.clone(),
        params: serde_json::to_value(&settings.params).unwrap_or(Value::Null),
        input_mode: recorded_inputs(settings.plan.input_mode),
        answer_language: Recorded::Present(settings.plan.answer_language.clone()),
        samples,
        dropped_inputs: dropped,
        n_unsupported: settings.no_n.then(|| FORCED.to_string()),
        params_adjusted: params_adjusted(&backend.adjustments()),
        constrained_output: constrained,
        eval_config: settings.eval_config.clone(),
        probe: settings
            .plan
            .probe
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok()),
        ..Manifest::default()
    })
}

fn recorded_inputs(mode: nmb_plan::InputMode) -> nmb_store::InputMode {
    match mode {
        nmb_plan::InputMode::Full => nmb_store::InputMode::Full,
        nmb_plan::InputMode::Text => nmb_store::InputMode::Text,
        nmb_plan::InputMode::Images => nmb_store::InputMode::Images,
    }
}

fn templates(plan: &PlanOptions, structured: bool) -> BTreeMap<String, TemplateRef> {
    nmb_plan::recorded_families(structured)
        .iter()
        .map(|f| {
            let t = plan.template_for(*f);
            let template = TemplateRef {
                hash: t.hash().to_string(),
                id: t.id().to_string(),
                version: t.version().to_string(),
            };
            (f.as_str().to_string(), template)
        })
        .collect()
}

/// The manifest field naming a run's perturbation (`nmb eval --perturb`); absent on unperturbed runs.
pub const PERTURBATION: &str = "perturbation";

/// The manifest field recording the version of the perturbation rules a perturbed run's images were made by
/// ([`nmb_imaging::perturb::PERTURB_VERSION`]): another version may make other bytes, so it is another
/// configuration.
pub const PERTURBATION_VERSION: &str = "perturbation_version";

/// The manifest field recording a run's few-shot examples drawn from a suite (`nmb eval --few-shot K`): K, the
/// seed, the pool suite as named and its hash, and each task's example ids and hashes; absent otherwise.
pub const FEW_SHOT: &str = "few_shot";

/// The fields that make two invocations "the same configuration". A perturbation enters only when there is
/// one, so unperturbed runs keep the hashes they always had.
fn identity(m: &Manifest) -> Value {
    let mut identity = json!({
        "suite_hash": m.suite_hash,
        "template_hash": m.template_hash,
        "model": m.model,
        "params": m.params,
        "input_mode": m.input_mode,
        "samples": m.samples,
        "limit": m.limit.get(),
        "answer_language": m.answer_language.get(),
        "model_identity": m.model_identity,
    });
    // Only a probed run has the key, so every other run keeps the hash earlier versions gave it.
    if let (Some(probe), Some(fields)) = (&m.probe, identity.as_object_mut()) {
        fields.insert("probe".into(), probe.clone());
    }
    if let (Some(p), Some(fields)) = (m.extra.get(PERTURBATION), identity.as_object_mut()) {
        fields.insert(PERTURBATION.into(), p.clone());
        // Runs recorded before the version was (version 2 rules) have no field and keep their hash.
        if let Some(v) = m.extra.get(PERTURBATION_VERSION) {
            fields.insert(PERTURBATION_VERSION.into(), v.clone());
        }
    }
    if let (Some(f), Some(fields)) = (m.extra.get(FEW_SHOT), identity.as_object_mut()) {
        fields.insert(FEW_SHOT.into(), f.clone());
    }
    identity
}

pub(crate) fn config_hash(m: &Manifest) -> String {
    let text = nmb_store::canonical_json(&identity(m));
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Names the identity fields that differ between two manifests.
pub(crate) fn describe_difference(old: &Manifest, new: &Manifest) -> String {
    let (a, b) = (identity(old), identity(new));
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return "unknown".into();
    };
    // Both ways round: a field only one side has (a perturbation) differs too.
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let differs: Vec<&str> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(String::as_str)
        .collect();
    if differs.is_empty() {
        "unknown".into()
    } else {
        differs.join(", ")
    }
}

/// The manifest's record of a backend's adjustments (`None` when it made none), reasons redacted.
pub(crate) fn params_adjusted(
    adjustments: &BTreeMap<Adjustment, String>,
) -> Option<BTreeMap<String, String>> {
    let secrets = Secrets::from_env();
    let recorded: BTreeMap<String, String> = adjustments
        .iter()
        .map(|(a, why)| (a.to_string(), secrets.redact(why)))
        .collect();
    (!recorded.is_empty()).then_some(recorded)
}

/// Decoding parameters as they enter cache keys and call records: everything besides the prompt that can change
/// an answer, including the output format the task asks for.
pub(crate) fn params_json(settings: &EvalSettings, output: &OutputFormat) -> String {
    let v = json!({
        "params": settings.params,
        "model_identity": settings.model_identity,
        "output": output,
    });
    nmb_store::canonical_json(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_requests::{BoxFuture, CallError, ChatRequest, Completion, ErrorClass, ModelSpec};

    /// A backend that only has a spec.
    struct Named(ModelSpec);

    impl Backend for Named {
        fn spec(&self) -> &ModelSpec {
            &self.0
        }
        fn supports_n(&self) -> bool {
            true
        }
        fn supports_images(&self) -> bool {
            true
        }
        fn complete<'a>(
            &'a self,
            _: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<Completion, CallError>> {
            Box::pin(async { Err(CallError::new(ErrorClass::Other, "never called")) })
        }
    }

    #[test]
    fn replicas_of_a_model_share_the_identity_of_its_first_url() {
        let suite = nmb_suite::sample::build();
        let manifest_of = |spec: &str| {
            let backend = Named(ModelSpec::parse(spec).unwrap());
            build_manifest(
                &suite,
                &EvalSettings::new(ModelIdentity::of_text(spec)),
                1,
                &backend,
            )
            .unwrap()
        };
        let single = manifest_of("openai:m@http://a:1/v1");
        let replicated = manifest_of("openai:m@http://a:1/v1,http://b:2/v1,http://c:3/v1");
        assert_eq!(replicated.model, "openai:m@http://a:1/v1");
        assert_eq!(config_hash(&replicated), config_hash(&single));
        assert_eq!(describe_difference(&single, &replicated), "unknown");
        // the first URL names the model: another one first is another model
        let other = manifest_of("openai:m@http://b:2/v1,http://a:1/v1");
        assert_ne!(config_hash(&other), config_hash(&single));
        assert_eq!(describe_difference(&single, &other), "model");
        // a spec with one URL enters exactly as written, as it always did
        let written = manifest_of("OpenAI:m@http://a:1/v1/");
        assert_eq!(written.model, "OpenAI:m@http://a:1/v1/");
    }

    #[test]
    fn a_perturbation_enters_the_configuration_hash_only_when_given() {
        let suite = nmb_suite::sample::build();
        let backend = Named(ModelSpec::parse("openai:m@http://a:1/v1").unwrap());
        let manifest_of = |p: Option<&str>| {
            let mut settings = EvalSettings::new(ModelIdentity::of_text("openai:m@http://a:1/v1"));
            settings.plan.perturbation = p.map(|p| p.parse().unwrap());
            build_manifest(&suite, &settings, 1, &backend).unwrap()
        };
        let plain = manifest_of(None);
        assert!(!identity(&plain)
            .as_object()
            .unwrap()
            .contains_key(PERTURBATION));
        let fields = identity(&plain);
        let keys: Vec<&String> = fields.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "answer_language",
                "input_mode",
                "limit",
                "model",
                "model_identity",
                "params",
                "samples",
                "suite_hash",
                "template_hash"
            ],
            "unperturbed runs keep the fields, so the hashes, they always had"
        );
        let blank = manifest_of(Some("blank"));
        assert_eq!(blank.extra[PERTURBATION], "blank");
        assert_eq!(
            identity(&blank)[PERTURBATION_VERSION],
            nmb_imaging::perturb::PERTURB_VERSION
        );
        assert_ne!(config_hash(&blank), config_hash(&plain));
        assert_ne!(
            config_hash(&blank),
            config_hash(&manifest_of(Some("noise:0.2")))
        );
        assert_eq!(
            describe_difference(&plain, &blank),
            format!("{PERTURBATION}, {PERTURBATION_VERSION}")
        );
    }

    #[test]
    fn few_shot_examples_enter_the_configuration_hash_only_when_given() {
        let suite = nmb_suite::sample::build();
        let backend = Named(ModelSpec::parse("openai:m@http://a:1/v1").unwrap());
        let manifest_of = |k: Option<usize>| {
            let mut settings = EvalSettings::new(ModelIdentity::of_text("openai:m@http://a:1/v1"));
            settings.plan.examples = k.map(|k| {
                let from = json!({"spec": "sample"});
                let pool = nmb_plan::ExamplePool::new(nmb_suite::sample::build(), k, 0, from);
                std::sync::Arc::new(pool.unwrap())
            });
            build_manifest(&suite, &settings, 1, &backend).unwrap()
        };
        let plain = manifest_of(None);
        assert!(!plain.extra.contains_key(FEW_SHOT));
        assert!(!identity(&plain).as_object().unwrap().contains_key(FEW_SHOT));
        let (one, two) = (manifest_of(Some(1)), manifest_of(Some(2)));
        let record = &one.extra[FEW_SHOT];
        assert_eq!(record["k"], 1);
        assert_eq!(
            record["examples"].as_object().unwrap().len(),
            suite.task_count()
        );
        assert_ne!(config_hash(&one), config_hash(&plain));
        assert_ne!(config_hash(&one), config_hash(&two));
        assert_eq!(config_hash(&one), config_hash(&manifest_of(Some(1))));
        assert_eq!(describe_difference(&one, &two), FEW_SHOT);
        assert_eq!(describe_difference(&plain, &one), FEW_SHOT);
    }

    /// nmb-store strips credentials from the URLs of manifests it reads (those an older nmb stored) by its own
    /// copy of nmb-chat's rule; both must give the same text.
    #[test]
    fn the_store_and_the_spec_strip_url_credentials_alike() {
        let urls = [
            "http://127.0.0.1:8000/v1",
            "http://user:pw@host:8000/v1",
            "https://h/v1?api_key=K1&region=eu",
            "https://u@h/v1?Token=T&sig=S&x=&y=1#frag",
            "http://h/v1?key=k",
            "http://h/a@b?signature=z",
            "HTTP://Host/v1/?b=1&a=2",
            "http://h:1/v1?API-KEY=a&apikey=b&access_token=c&password=d&keep=e",
        ];
        for url in urls {
            let spec = format!("openai:m@{url}");
            assert_eq!(
                nmb_store::scrub_url_credentials(&spec),
                format!("openai:m@{}", nmb_chat::public_url(url)),
                "{url}"
            );
        }
    }
}
