//! The scoring configuration, its hash, and the aggregated report.

use std::collections::BTreeSet;

use nmb_judges::prompts;
use nmb_results::criteria::CriterionRubric;
use nmb_results::rubric::Rubric;
use nmb_results::{
    BertScoreConfig, Breakdown, GroupAggregate, JudgeImages, JudgeInfo, JuryAgreement,
    MatchingConfig, SampleScore, ScoreReport, ScoringConfig, TaskScore, TaxonomyConfig, KS,
    SCHEMA_VERSION,
};
use nmb_stats::BootstrapConfig;
use nmb_store::{canonical_json, RunInfo};
use nmb_suite::{Family, Level, Suite};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::ScoreOptions;
use super::MAX_RANK;
use crate::aggregate::{aggregate, task_scores, GroupKey};
use crate::lexicon::Lexicon;
use crate::ScoreError;

#[allow(clippy::too_many_arguments)]
pub(super) fn scoring_config(
    run: &RunInfo,
    suite: &Suite,
    opts: &ScoreOptions,
    judges: Vec<JudgeInfo>,
    rubric: Option<&Rubric>,
    criteria: Option<&CriterionRubric>,
    bertscore: BertScoreConfig,
    taxonomy: TaxonomyConfig,
    lex: &Lexicon,
) -> Result<ScoringConfig, ScoreError> {
    let suite_hash_run = run.manifest.suite_hash.clone();
    let images = opts.judge_images == JudgeImages::Same && !opts.judges.is_empty();
    let suite_hash_scored = nmb_suite::suite_hash(suite)?;
    let mut config = ScoringConfig {
        nmb_version: env!("CARGO_PKG_VERSION").to_string(),
        config_hash: String::new(),
        judges,
        aggregation: opts.aggregation,
        judge_params: serde_json::to_value(&opts.judge_params).unwrap_or(Value::Null),
        max_reasks: opts.max_reasks,
        judge_prompts: prompts::template_versions(rubric, images),
        matching: MatchingConfig {
            lexicon_version: lex.version.clone(),
            max_rank: MAX_RANK,
            judge_for_inconclusive: !opts.judges.is_empty(),
        },
        rubric: rubric.map(Rubric::info),
        bertscore,
        taxonomy,
        bootstrap: opts.bootstrap,
        ks: KS.to_vec(),
        run_manifest: serde_json::to_value(&run.manifest).unwrap_or(Value::Null),
        suite_matches_run: suite_hash_run == suite_hash_scored,
        suite_hash_run,
        suite_hash_scored,
        price: opts.price,
        paper: opts.paper,
        judge_sees_thinking: opts.judge_sees_thinking,
        judge_repeats: if opts.judges.is_empty() {
            1
        } else {
            opts.judge_repeats.max(1)
        },
        criteria: criteria.map(CriterionRubric::info),
        by: opts.by.clone(),
        judge_images: match images {
            true => JudgeImages::Same,
            false => JudgeImages::None,
        },
    };
    if criteria.is_some() {
        let (id, hash) = nmb_judges::criteria::template_version(images);
        config.judge_prompts.insert(id, hash);
    }
    config.config_hash = config_hash(&config);
    Ok(config)
}

/// Hash of what determines the scores: everything in the config except outcomes (judge call totals, judge run
/// ids, whether BERTScore ended up computed).
pub(crate) fn config_hash(c: &ScoringConfig) -> String {
    let mut identity = json!({
        "nmb_version": c.nmb_version,
        "judges": c.judges.iter().map(|j| &j.spec).collect::<Vec<_>>(),
        "aggregation": c.aggregation,
        "judge_params": c.judge_params,
        "max_reasks": c.max_reasks,
        "judge_prompts": c.judge_prompts,
        "matching": c.matching,
        "rubric": c.rubric,
        "bertscore": bertscore_identity(&c.bertscore),
        "taxonomy": {"judged": c.taxonomy.judged, "labels": c.taxonomy.human_labels.as_ref().map(|h| &h.sha256)},
        "bootstrap": c.bootstrap,
        "ks": c.ks,
        "run_manifest": c.run_manifest,
        "suite_hash_scored": c.suite_hash_scored,
    });
    // Enters only when given, so that scoring without a price keeps the hash of versions that had none.
    if let Some(price) = &c.price {
        identity["price"] = json!(price);
    }
    // Likewise the paper's reading, which adds numbers to the report.
    if let Some(paper) = &c.paper {
        identity["paper"] = json!(paper);
    }
    // And what judges were shown besides the answers.
    if c.judge_sees_thinking {
        identity["judge_sees_thinking"] = json!(true);
    }
    // And the repeats, which change the verdicts (their medians) and add the stability figures.
    if c.judge_repeats > 1 {
        identity["judge_repeats"] = json!(c.judge_repeats);
    }
    // And the criterion rubric, which adds its own numbers.
    if let Some(criteria) = &c.criteria {
        identity["criteria"] =
            json!({"id": criteria.id, "version": criteria.version, "hash": criteria.hash});
    }
    // And the subgroup fields, which add the breakdown by subgroup.
    if !c.by.is_empty() {
        identity["by"] = json!(c.by);
    }
    // And the images judges were shown, which change their questions.
    if !c.judge_images.is_none() {
        identity["judge_images"] = json!(c.judge_images);
    }
    hex::encode(Sha256::digest(canonical_json(&identity).as_bytes()))
}

/// BERTScore's part of the configuration hash. idf and the baseline enter only when used, so that scoring with
/// neither keeps the hash (and the stored report) of versions that had neither.
fn bertscore_identity(b: &BertScoreConfig) -> Value {
    let mut id = json!({"model_dir": b.model_dir, "layer": b.layer, "off": b.model_dir.is_none()});
    if b.idf {
        id["idf"] = json!(true);
    }
    if let Some(base) = &b.baseline {
        id["baseline"] = json!([base.source, base.p, base.r, base.f]);
    }
    id
}

pub(super) fn build_report(
    run_id: &str,
    config: ScoringConfig,
    samples: Vec<SampleScore>,
    jury_agreement: Vec<JuryAgreement>,
    notes: Vec<String>,
    cfg: &BootstrapConfig,
) -> Result<ScoreReport, ScoreError> {
    let tasks = task_scores(&samples)?;
    let groups = Groups {
        tasks: &tasks,
        samples: &samples,
        cfg,
    };
    let overall = groups.overall()?;
    let by_level_family = groups.by_level_family()?;
    let by_family = groups.by_family()?;
    let by_level = groups.by_level()?;
    let by_disease_group = groups.by_disease_group()?;
    let by_modality = groups.by_modality()?;
    Ok(ScoreReport {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.to_string(),
        config,
        samples,
        tasks,
        overall,
        by_level_family,
        by_family,
        by_level,
        by_disease_group,
        by_modality,
        jury_agreement,
        notes,
        structured: None,
        label_set: None,
        criteria: None,
        revision: None,
        stability: None,
        subgroups: None,
    })
}

/// A run's task scores and samples, aggregated group by group.
struct Groups<'a> {
    tasks: &'a [TaskScore],
    samples: &'a [SampleScore],
    cfg: &'a BootstrapConfig,
}

impl Groups<'_> {
    /// The aggregate of the tasks `keep` accepts (and their samples) under `key`; `None` without such a task.
    fn group(
        &self,
        by: Breakdown,
        key: GroupKey,
        keep: &dyn Fn(&TaskScore) -> bool,
    ) -> Result<Option<GroupAggregate>, ScoreError> {
        let ts: Vec<&TaskScore> = self.tasks.iter().filter(|t| keep(t)).collect();
        if ts.is_empty() {
            return Ok(None);
        }
        let ids: BTreeSet<&str> = ts.iter().map(|t| t.task_id.as_str()).collect();
        let ss: Vec<&SampleScore> = self
            .samples
            .iter()
            .filter(|s| ids.contains(s.task_id.as_str()))
            .collect();
        let key = GroupKey {
            by: Some(by),
            ..key
        };
        Ok(Some(aggregate(key, &ts, &ss, self.cfg)?))
    }

    /// Every task and sample; a run without samples still has one.
    fn overall(&self) -> Result<GroupAggregate, ScoreError> {
        let all = self.group(Breakdown::Overall, GroupKey::default(), &|_| true)?;
        Ok(all.unwrap_or_else(empty_group))
    }

    fn by_level_family(&self) -> Result<Vec<GroupAggregate>, ScoreError> {
        let key = |&(l, f): &(Level, Family)| GroupKey {
            level: Some(l),
            family: Some(f),
            ..GroupKey::default()
        };
        self.each(Breakdown::LevelFamily, |t| (t.level, t.family), key)
    }

    fn by_family(&self) -> Result<Vec<GroupAggregate>, ScoreError> {
        let key = |&f: &Family| GroupKey {
            family: Some(f),
            ..GroupKey::default()
        };
        self.each(Breakdown::Family, |t| t.family, key)
    }

    fn by_level(&self) -> Result<Vec<GroupAggregate>, ScoreError> {
        let key = |&l: &Level| GroupKey {
            level: Some(l),
            ..GroupKey::default()
        };
        self.each(Breakdown::Level, |t| t.level, key)
    }

    fn by_disease_group(&self) -> Result<Vec<GroupAggregate>, ScoreError> {
        let key = |d: &String| GroupKey {
            disease_group: Some(d.clone()),
            ..GroupKey::default()
        };
        self.each(Breakdown::DiseaseGroup, disease, key)
    }

    fn by_modality(&self) -> Result<Vec<GroupAggregate>, ScoreError> {
        let key = |m: &String| GroupKey {
            modality: Some(m.clone()),
            ..GroupKey::default()
        };
        self.each(Breakdown::Modality, |t| t.modality.clone(), key)
    }

    /// One aggregate per value of `of` among the tasks, in the values' order, each under `key` of its value.
    fn each<T: Ord>(
        &self,
        by: Breakdown,
        of: impl Fn(&TaskScore) -> T,
        key: impl Fn(&T) -> GroupKey,
    ) -> Result<Vec<GroupAggregate>, ScoreError> {
        let values: BTreeSet<T> = self.tasks.iter().map(&of).collect();
        let mut out = Vec::new();
        for v in &values {
            out.extend(self.group(by, key(v), &|t| of(t) == *v)?);
        }
        Ok(out)
    }
}

fn disease(t: &TaskScore) -> String {
    t.disease_group.clone().unwrap_or_else(|| "unknown".into())
}

fn empty_group() -> GroupAggregate {
    let none = |k| nmb_results::PassAtK {
        k,
        unbiased_estimator: None,
        unbiased_tasks: 0,
        unbiased_note: Some("the run has no samples".into()),
        top_k_in_answer: None,
        top_k_samples: 0,
        top_k_note: Some("the run has no samples".into()),
    };
    // The rest is zero or absent, so that a number added to `GroupAggregate` needs no line here.
    GroupAggregate {
        pass_at_1: none(1),
        pass_at_5: none(5),
        ..GroupAggregate::default()
    }
}
