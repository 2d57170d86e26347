//! A scorer for the report tests: builds a real [`ScoreReport`] from a stored run with nmb-score's own answer
//! parsing, diagnosis/lesion rule matching and breadth matching, and nmb-stats' pass@k and bootstrap. It has no
//! judges, rubric, BERTScore or taxonomy (those need the scoring engine's judge calls); `with_judged_extras`
//! adds deterministic ones for rendering tests that need every chart.

use std::collections::{BTreeMap, BTreeSet};

use nmb_score::breadth;
use nmb_score::lexicon;
use nmb_score::matching::{match_diagnosis, match_lesion_type, match_location};
use nmb_score::parse::{parse_answer, ranked_diagnoses};
use nmb_score::results::*;
use nmb_stats::{bootstrap_mean, pass_at_k, BootstrapConfig, Design, Estimate};
use nmb_store::{SampleRecord, Store};
use nmb_suite::{Case, Family, Level, Suite, Task};

pub fn score(store: &Store, run_id: &str, suite: &Suite, cfg: &BootstrapConfig) -> ScoreReport {
    let run = store.run(run_id).unwrap();
    let records = store.run_samples(run_id).unwrap();
    score_records(run_id, &run.manifest, &records, suite, cfg)
}

pub fn score_records(
    run_id: &str,
    manifest: &serde_json::Value,
    records: &[SampleRecord],
    suite: &Suite,
    cfg: &BootstrapConfig,
) -> ScoreReport {
    let tasks: BTreeMap<&str, (&Case, &Task)> = suite
        .tasks()
        .map(|(c, t)| (t.id.as_str(), (c, t)))
        .collect();
    let samples: Vec<SampleScore> = records
        .iter()
        .filter_map(|r| tasks.get(r.task_id.as_str()).map(|(c, t)| sample(r, c, t)))
        .collect();
    let task_scores = task_scores(&samples);
    let overall = aggregate(Breakdown::Overall, None, None, &samples, &task_scores, cfg);
    let cells: BTreeSet<(Level, Family)> = samples.iter().map(|s| (s.level, s.family)).collect();
    let by_level_family = cells
        .iter()
        .map(|&(l, f)| {
            let ss = filter(&samples, |s| s.level == l && s.family == f);
            let ts = filter(&task_scores, |t| t.level == l && t.family == f);
            aggregate(Breakdown::LevelFamily, Some(l), Some(f), &ss, &ts, cfg)
        })
        .collect();
    let families: BTreeSet<Family> = samples.iter().map(|s| s.family).collect();
    let by_family = families
        .iter()
        .map(|&f| {
            let ss = filter(&samples, |s| s.family == f);
            let ts = filter(&task_scores, |t| t.family == f);
            aggregate(Breakdown::Family, None, Some(f), &ss, &ts, cfg)
        })
        .collect();
    let levels: BTreeSet<Level> = samples.iter().map(|s| s.level).collect();
    let by_level = levels
        .iter()
        .map(|&l| {
            let ss = filter(&samples, |s| s.level == l);
            let ts = filter(&task_scores, |t| t.level == l);
            aggregate(Breakdown::Level, Some(l), None, &ss, &ts, cfg)
        })
        .collect();
    ScoreReport {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.to_string(),
        config: config(manifest, cfg),
        samples,
        tasks: task_scores,
        overall,
        by_level_family,
        by_family,
        by_level,
        by_disease_group: Vec::new(),
        by_modality: Vec::new(),
        jury_agreement: Vec::new(),
        notes: vec!["scored by the report tests' fixture scorer (rules only, no judge)".into()],
    }
}

fn filter<T: Clone>(v: &[T], f: impl Fn(&T) -> bool) -> Vec<T> {
    v.iter().filter(|x| f(x)).cloned().collect()
}

fn config(manifest: &serde_json::Value, cfg: &BootstrapConfig) -> ScoringConfig {
    ScoringConfig {
        nmb_version: env!("CARGO_PKG_VERSION").into(),
        config_hash: "fixture".into(),
        judges: Vec::new(),
        aggregation: Aggregation::Mean,
        judge_params: serde_json::Value::Null,
        max_reasks: 0,
        judge_prompts: BTreeMap::new(),
        matching: MatchingConfig {
            lexicon_version: "builtin".into(),
            max_rank: 5,
            judge_for_inconclusive: false,
        },
        rubric: None,
        bertscore: BertScoreConfig {
            enabled: false,
            model_dir: None,
            layer: None,
            idf: false,
            rescaled: false,
            skipped_reason: Some("fixture scorer".into()),
        },
        taxonomy: TaxonomyConfig {
            judged: false,
            human_labels: None,
        },
        bootstrap: *cfg,
        ks: KS.to_vec(),
        run_manifest: manifest.clone(),
        suite_hash_run: manifest["suite_hash"].as_str().unwrap_or_default().into(),
        suite_hash_scored: manifest["suite_hash"].as_str().unwrap_or_default().into(),
        suite_matches_run: true,
    }
}

fn sample(r: &SampleRecord, case: &Case, task: &Task) -> SampleScore {
    let mut s = SampleScore {
        task_id: r.task_id.clone(),
        sample_index: r.sample_index,
        case_id: case.id.clone(),
        family: task.family,
        level: task.level,
        disease_group: case.metadata.get("disease_group").cloned(),
        modality: "MRI".into(),
        case_metadata: case.metadata.clone(),
        status: SampleStatus::Ok,
        error_class: r.error_class.clone(),
        parsed: None,
        parse_error: None,
        correct: None,
        unresolved: false,
        diagnosis: None,
        lesion: None,
        rubric: None,
        bertscore: None,
        taxonomy: None,
        breadth: None,
    };
    match r.status {
        nmb_store::SampleStatus::Errored => {
            s.status = SampleStatus::Errored;
            return s;
        }
        nmb_store::SampleStatus::Pending => {
            s.status = SampleStatus::Pending;
            return s;
        }
        nmb_store::SampleStatus::Ok => {}
    }
    let Some(reference) = &task.reference else {
        s.status = SampleStatus::NoReference;
        return s;
    };
    let text = r.final_text.clone().unwrap_or_default();
    if !task.family.is_depth() {
        match breadth::score_answer(task, &text) {
            Ok(v) => {
                s.correct = Some(v.correct);
                s.breadth = Some(v);
            }
            Err(_) => s.status = SampleStatus::NoReference,
        }
        return s;
    }
    let parsed = parse_answer(task.family, &text);
    s.parsed = Some(parsed.answer.clone());
    if let Some(e) = parsed.error {
        s.status = SampleStatus::ParseFailed;
        s.parse_error = Some(e.to_string());
        s.correct = Some(false);
        return s;
    }
    let lex = lexicon::builtin();
    if task.family == Family::Lesion {
        let want_type = reference.lesion_type.clone().unwrap_or_default();
        let want_loc = reference.lesion_location.clone().unwrap_or_default();
        let got_type = parsed.answer.lesion_type.clone();
        let got_loc = parsed.answer.lesion_location.clone();
        let t = match_lesion_type(lex, got_type.as_deref().unwrap_or(""), &want_type);
        let l = match_location(lex, got_loc.as_deref().unwrap_or(""), &want_loc);
        s.correct = Some(t.outcome == MatchOutcome::Match && l.outcome == MatchOutcome::Match);
        s.lesion = Some(LesionScore {
            reference_type: reference.lesion_type.clone(),
            reference_location: reference.lesion_location.clone(),
            type_match: Some(field(got_type, t)),
            location_match: Some(field(got_loc, l)),
        });
        return s;
    }
    let want = reference.diagnosis.clone().unwrap_or_default();
    let mut candidates = Vec::new();
    let mut matched_rank = None;
    for d in ranked_diagnoses(&parsed.answer).iter().take(5) {
        let v = match_diagnosis(lex, &d.diagnosis, &want, &reference.synonyms);
        let hit = v.outcome == MatchOutcome::Match;
        candidates.push(CandidateMatch {
            rank: d.rank,
            diagnosis: d.diagnosis.clone(),
            normalised: lexicon::fold(&d.diagnosis),
            outcome: v.outcome,
            method: v.method,
            matched: v.matched,
            rule_note: v.note,
            judge: None,
        });
        if hit {
            matched_rank = Some(d.rank);
            break;
        }
    }
    s.correct = Some(matched_rank == Some(1));
    s.diagnosis = Some(DiagnosisScore {
        reference: want,
        matched_rank,
        method: candidates.last().and_then(|c| c.method),
        top_1: matched_rank == Some(1),
        top_5: matched_rank.is_some_and(|r| r <= 5),
        candidates,
    });
    s
}

fn field(candidate: Option<String>, v: nmb_score::matching::RuleVerdict) -> FieldMatch {
    FieldMatch {
        candidate,
        outcome: v.outcome,
        method: v.method,
        rule_note: v.note,
        judge: None,
    }
}

fn task_scores(samples: &[SampleScore]) -> Vec<TaskScore> {
    let mut by_task: BTreeMap<&str, Vec<&SampleScore>> = BTreeMap::new();
    for s in samples {
        by_task.entry(&s.task_id).or_default().push(s);
    }
    by_task
        .into_values()
        .map(|ss| {
            let first = ss[0];
            let scored: Vec<&&SampleScore> = ss.iter().filter(|s| s.status.is_scored()).collect();
            let n = scored.len();
            let c = scored.iter().filter(|s| s.correct == Some(true)).count();
            let ranked: Vec<&&&SampleScore> =
                scored.iter().filter(|s| s.diagnosis.is_some()).collect();
            let mut unbiased = BTreeMap::new();
            let mut top = BTreeMap::new();
            for k in KS {
                unbiased.insert(k.to_string(), (n >= k).then(|| pass_at_k(n, c, k).unwrap()));
                let hits = ranked
                    .iter()
                    .filter(|s| {
                        let d = s.diagnosis.as_ref().unwrap();
                        if k == 1 {
                            d.top_1
                        } else {
                            d.top_5
                        }
                    })
                    .count();
                top.insert(
                    k.to_string(),
                    (!ranked.is_empty()).then(|| hits as f64 / ranked.len() as f64),
                );
            }
            let count = |st: SampleStatus| ss.iter().filter(|s| s.status == st).count();
            TaskScore {
                task_id: first.task_id.clone(),
                case_id: first.case_id.clone(),
                family: first.family,
                level: first.level,
                disease_group: first.disease_group.clone(),
                modality: first.modality.clone(),
                samples: ss.len(),
                n,
                c,
                errored: count(SampleStatus::Errored),
                pending: count(SampleStatus::Pending),
                parse_failed: count(SampleStatus::ParseFailed),
                no_reference: count(SampleStatus::NoReference),
                unresolved: ss.iter().filter(|s| s.unresolved).count(),
                pass_at_k_unbiased: unbiased,
                pass_at_k_top_k: top,
            }
        })
        .collect()
}

fn mean_ci(values: &[f64], clusters: &[String], cfg: &BootstrapConfig) -> Option<Estimate> {
    if values.is_empty() {
        return None;
    }
    bootstrap_mean(values, &Design::clusters_by(clusters), cfg).ok()
}

fn aggregate(
    by: Breakdown,
    level: Option<Level>,
    family: Option<Family>,
    samples: &[SampleScore],
    tasks: &[TaskScore],
    cfg: &BootstrapConfig,
) -> GroupAggregate {
    let scored: Vec<&SampleScore> = samples.iter().filter(|s| s.status.is_scored()).collect();
    let flags: Vec<f64> = scored
        .iter()
        .map(|s| f64::from(u8::from(s.correct == Some(true))))
        .collect();
    let cases: Vec<String> = scored.iter().map(|s| s.case_id.clone()).collect();
    let pass = |k: usize| {
        let with: Vec<&TaskScore> = tasks
            .iter()
            .filter(|t| {
                t.pass_at_k_unbiased
                    .get(&k.to_string())
                    .copied()
                    .flatten()
                    .is_some()
            })
            .collect();
        let vals: Vec<f64> = with
            .iter()
            .map(|t| t.pass_at_k_unbiased[&k.to_string()].unwrap())
            .collect();
        let cl: Vec<String> = with.iter().map(|t| t.case_id.clone()).collect();
        let ranked: Vec<&&SampleScore> = scored.iter().filter(|s| s.diagnosis.is_some()).collect();
        let top: Vec<f64> = ranked
            .iter()
            .map(|s| {
                let d = s.diagnosis.as_ref().unwrap();
                f64::from(u8::from(if k == 1 { d.top_1 } else { d.top_5 }))
            })
            .collect();
        let tcl: Vec<String> = ranked.iter().map(|s| s.case_id.clone()).collect();
        PassAtK {
            k,
            unbiased_estimator: mean_ci(&vals, &cl, cfg),
            unbiased_tasks: vals.len(),
            unbiased_note: None,
            top_k_in_answer: mean_ci(&top, &tcl, cfg),
            top_k_samples: top.len(),
            top_k_note: None,
        }
    };
    let breadth = family.filter(|f| !f.is_depth()).or_else(|| {
        (!samples.is_empty() && samples.iter().all(|s| !s.family.is_depth()))
            .then_some(Family::MultipleChoice)
    });
    let breadth = breadth.map(|_| {
        let recall: Vec<f64> = scored
            .iter()
            .filter_map(|s| s.breadth.as_ref()?.token_recall)
            .collect();
        let rc: Vec<String> = scored
            .iter()
            .filter(|s| s.breadth.as_ref().is_some_and(|b| b.token_recall.is_some()))
            .map(|s| s.case_id.clone())
            .collect();
        BreadthAggregate {
            n: scored.len(),
            accuracy: mean_ci(&flags, &cases, cfg),
            token_recall: mean_ci(&recall, &rc, cfg),
            exact_match: None,
            extraction_failures: scored
                .iter()
                .filter(|s| s.breadth.as_ref().is_some_and(|b| b.extraction_failed))
                .count(),
        }
    });
    let count = |st: SampleStatus| samples.iter().filter(|s| s.status == st).count();
    GroupAggregate {
        by,
        level,
        family,
        disease_group: None,
        modality: None,
        tasks: tasks.len(),
        cases: samples
            .iter()
            .map(|s| &s.case_id)
            .collect::<BTreeSet<_>>()
            .len(),
        samples: samples.len(),
        n: scored.len(),
        correct: flags.iter().filter(|&&f| f > 0.0).count(),
        errored: count(SampleStatus::Errored),
        pending: count(SampleStatus::Pending),
        no_reference: count(SampleStatus::NoReference),
        parse_failed: count(SampleStatus::ParseFailed),
        unresolved: samples.iter().filter(|s| s.unresolved).count(),
        accuracy: mean_ci(&flags, &cases, cfg),
        pass_at_1: pass(1),
        pass_at_5: pass(5),
        lesion: None,
        rubric: None,
        bertscore: None,
        taxonomy: None,
        breadth,
    }
}

/// Deterministic rubric, BERTScore and taxonomy values for rendering tests (clearly not measurements): every
/// chart of the report then has data. Values depend only on the model name and the group.
pub fn with_judged_extras(mut report: ScoreReport, seed: u64) -> ScoreReport {
    let dims = [
        "diagnostic_correctness",
        "integration",
        "differential_reasoning",
        "lesion_localisation",
        "clinical_safety",
    ];
    let est = |v: f64, w: f64| Estimate {
        value: v,
        ci_low: (v - w).max(0.0),
        ci_high: v + w,
        level: 0.95,
        method: nmb_stats::CiMethod::ClusterPercentileBootstrap,
        seed: Some(1),
        resamples: Some(1000),
        undefined_resamples: 0,
        n: 10,
    };
    let f = |i: u64| ((seed * 7919 + i * 104_729) % 1000) as f64 / 1000.0;
    let groups = std::iter::once(&mut report.overall).chain(report.by_level.iter_mut());
    for (gi, g) in groups.enumerate() {
        let gi = gi as u64;
        g.rubric = Some(RubricAggregate {
            rubric_id: "neurology".into(),
            rubric_version: "1".into(),
            n: g.n,
            dimensions: dims
                .iter()
                .enumerate()
                .map(|(i, d)| DimensionMean {
                    dimension: d.to_string(),
                    mean: Some(est(1.0 + 3.5 * f(gi * 10 + i as u64), 0.4)),
                })
                .collect(),
            overall: Some(est(1.5 + 3.0 * f(gi * 10 + 9), 0.3)),
        });
        g.bertscore = Some(BertScoreAggregate {
            n: g.n,
            p: None,
            r: None,
            f: Some(est(0.6 + 0.2 * f(gi * 10 + 7), 0.02)),
        });
        let counts: Vec<usize> = (0..5)
            .map(|i| 1 + (f(gi * 10 + i) * 12.0) as usize)
            .collect();
        let wrong: usize = counts.iter().sum();
        g.taxonomy = Some(TaxonomyDistribution {
            wrong,
            labelled: wrong,
            from_judges: wrong,
            from_humans: 0,
            classes: ErrorCategory::ALL
                .iter()
                .zip(&counts)
                .map(|(c, &n)| CategoryShare {
                    category: *c,
                    count: n,
                    share: None,
                })
                .collect(),
        });
    }
    report
}
