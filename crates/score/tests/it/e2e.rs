//! End to end: the bundled sample suite evaluated through `nmb_run::evaluate_loaded` against a scripted model on the
//! loopback fake server, then scored with scripted judges on another loopback server. Every expectation comes
//! from the design in `common` (what each scripted answer is meant to be), never from the scorer's output.

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use nmb_results::stored;
use nmb_results::{
    Aggregation, ErrorCategory, GroupAggregate, LabelSource, MatchMethod, SampleStatus, ScoreReport,
};
use nmb_score::semantic::Rescale;
use nmb_score::{score_loaded, BertScoreSetting, ScoreOptions};
use nmb_stats::BootstrapConfig;
use nmb_suite::{Family, Level};

use crate::common;

fn boot() -> BootstrapConfig {
    BootstrapConfig {
        resamples: 1000,
        level: 0.95,
        seed: 11,
    }
}

fn minilm() -> Option<PathBuf> {
    nmb_test_support::assets::minilm_dir()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn group(r: &ScoreReport, level: Level, family: Family) -> &GroupAggregate {
    r.by_level_family
        .iter()
        .find(|g| g.level == Some(level) && g.family == Some(family))
        .unwrap_or_else(|| panic!("no group {level} {family}"))
}

/// Checks each family's median answer length against the scripted answers: words counted here by scanning for
/// the starts of runs of non-space characters, the median taken from the sorted counts.
fn check_answer_words(report: &ScoreReport, planned: &[Planned]) {
    let words = |text: &str| {
        let mut count = 0;
        let mut in_word = false;
        for c in text.chars() {
            if !c.is_whitespace() && !in_word {
                count += 1;
            }
            in_word = !c.is_whitespace();
        }
        count as f64
    };
    let mut by_family: BTreeMap<Family, Vec<f64>> = BTreeMap::new();
    for p in planned.iter().filter(|p| !p.errored) {
        by_family
            .entry(p.family)
            .or_default()
            .push(words(&p.answer));
    }
    assert!(!by_family.is_empty());
    for (family, mut counts) in by_family {
        counts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = counts.len();
        let median = if n % 2 == 1 {
            counts[n / 2]
        } else {
            (counts[n / 2 - 1] + counts[n / 2]) / 2.0
        };
        let g = report
            .by_family
            .iter()
            .find(|g| g.family == Some(family))
            .unwrap_or_else(|| panic!("no group for {family}"));
        let got = g.answer_words.as_ref().expect("a median answer length");
        assert!(
            close(got.value, median),
            "{family}: median {} vs {median}",
            got.value
        );
        assert_eq!(got.n, n, "{family}: answers counted");
        assert!(
            got.ci_low <= got.value && got.value <= got.ci_high,
            "{family}: {got:?}"
        );
        assert!(
            counts[0] <= got.ci_low && got.ci_high <= counts[n - 1],
            "{family}: {got:?}"
        );
        assert_eq!((got.seed, got.resamples), (Some(11), Some(1000)));
    }
}

/// Checks counts, accuracy and both pass@k readings of every (level, family) group against the design.
fn check_pass_at_k(report: &ScoreReport, planned: &[Planned]) {
    let mut groups: BTreeMap<(Level, Family), Vec<&Planned>> = BTreeMap::new();
    for p in planned {
        groups.entry((p.level, p.family)).or_default().push(p);
    }
    for ((level, family), members) in &groups {
        let g = group(report, *level, *family);
        let answered: Vec<&&Planned> = members.iter().filter(|p| !p.errored).collect();
        assert_eq!(g.n, answered.len(), "{level} {family}: n");
        assert_eq!(
            g.errored,
            members.len() - answered.len(),
            "{level} {family}: errored"
        );
        assert_eq!(g.samples, members.len());
        let acc = mean(
            &answered
                .iter()
                .map(|p| f64::from(u8::from(p.correct)))
                .collect::<Vec<_>>(),
        );
        let got = g.accuracy.as_ref().unwrap();
        assert!(
            close(got.value, acc),
            "{level} {family}: accuracy {} vs {acc}",
            got.value
        );
        assert!(got.ci_low <= got.value && got.value <= got.ci_high);
        assert_eq!((got.seed, got.resamples), (Some(11), Some(1000)));

        // Reading (a): per task over its answered samples, tasks with fewer than k answers left out.
        let mut by_task: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for p in &answered {
            let e = by_task.entry(p.task_id.as_str()).or_default();
            e.0 += 1;
            e.1 += usize::from(p.correct);
        }
        for (k, pass) in [(1, &g.pass_at_1), (5, &g.pass_at_5)] {
            assert_eq!(pass.k, k);
            let values: Vec<f64> = by_task
                .values()
                .filter(|(n, _)| *n >= k)
                .map(|(n, c)| pass_at_k_enumerated(*n, *c, k))
                .collect();
            let a = pass.unbiased_estimator.as_ref().map(|e| e.value);
            if values.is_empty() {
                assert_eq!(a, None, "{level} {family} pass@{k} (a)");
            } else {
                assert!(
                    close(a.unwrap(), mean(&values)),
                    "{level} {family} pass@{k} (a): {a:?} vs {}",
                    mean(&values)
                );
            }
            assert_eq!(pass.unbiased_tasks, values.len());
            assert_eq!(
                pass.unbiased_note.is_some(),
                values.len() < by_task.len(),
                "{level} {family} note"
            );
            // Reading (b): the reference within the first k entries of each answer.
            if matches!(family, Family::Differential | Family::Rationale) {
                let hits: Vec<f64> = answered
                    .iter()
                    .map(|p| f64::from(u8::from(p.rank.is_some_and(|r| r as usize <= k))))
                    .collect();
                let b = pass.top_k_in_answer.as_ref().unwrap().value;
                assert!(
                    close(b, mean(&hits)),
                    "{level} {family} pass@{k} (b): {b} vs {}",
                    mean(&hits)
                );
                assert_eq!(pass.top_k_samples, hits.len());
            } else {
                assert!(pass.top_k_in_answer.is_none() && pass.top_k_note.is_some());
            }
        }
    }
}

fn labels_csv(
    dir: &std::path::Path,
    run_id: &str,
    planned: &[Planned],
) -> (PathBuf, Vec<(String, u32)>) {
    let wrong: Vec<&Planned> = planned
        .iter()
        .filter(|p| !p.correct && !p.errored && p.family == Family::Differential)
        .take(2)
        .collect();
    let right = planned.iter().find(|p| p.correct).unwrap();
    let mut csv = String::from("run_id,task_id,sample_index,category,justification,annotator\n");
    for p in &wrong {
        csv.push_str(&format!(
            "{run_id},{},{},Visual hallucination,\"described a lesion, not there\",dr_x\n",
            p.task_id, p.sample
        ));
    }
    // A label for a correct answer is not used; a row for another run is skipped.
    csv.push_str(&format!(
        "{run_id},{},{},knowledge_gap,,dr_x\n",
        right.task_id, right.sample
    ));
    csv.push_str(&format!(
        "other-run,{},{},knowledge_gap,,dr_x\n",
        wrong[0].task_id, wrong[0].sample
    ));
    let path = dir.join("labels.csv");
    std::fs::write(&path, csv).unwrap();
    (
        path,
        wrong
            .iter()
            .map(|p| (p.task_id.clone(), p.sample))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jury_scores_the_sample_run_and_rescoring_is_bit_identical() {
    let env = setup().await;
    let (labels, relabelled) = labels_csv(env.dir.path(), &env.run_id, &env.planned);
    let bert = minilm();
    let opts = ScoreOptions {
        judges: vec![env.judge("judge-a"), env.judge("judge-b")],
        aggregation: Aggregation::Mean,
        human_labels: Some(labels),
        bertscore: match &bert {
            Some(dir) => BertScoreSetting::model(dir.clone(), Some(6)),
            None => BertScoreSetting::Off,
        },
        bootstrap: boot(),
        ..ScoreOptions::default()
    };
    let first = score_loaded(&env.store, &env.scheduler, &env.run_id, &env.suite, &opts)
        .await
        .unwrap();
    stored::save(&env.store, &first).unwrap();
    let judge_calls = env.judge_server.request_count();
    assert!(judge_calls > 0);

    let second = score_loaded(&env.store, &env.scheduler, &env.run_id, &env.suite, &opts)
        .await
        .unwrap();
    stored::save(&env.store, &second).unwrap();
    let (a, b) = (
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&second).unwrap(),
    );
    assert!(a == b, "rescoring changed the report");
    assert_eq!(
        env.judge_server.request_count(),
        judge_calls,
        "rescoring sent judge requests again"
    );
    assert_eq!(
        stored::latest(&env.store, &env.run_id).unwrap().as_ref(),
        Some(&second)
    );

    let report = second;
    let planned = &env.planned;
    assert_eq!(report.samples.len(), planned.len());
    // Per sample: status, correctness and the matched rank are what the design says.
    let by_key: BTreeMap<(&str, u32), &Planned> = planned
        .iter()
        .map(|p| ((p.task_id.as_str(), p.sample), p))
        .collect();
    for s in &report.samples {
        let p = by_key[&(s.task_id.as_str(), s.sample_index)];
        let want = if p.errored {
            SampleStatus::Errored
        } else if p.parse_failed {
            SampleStatus::ParseFailed
        } else {
            SampleStatus::Ok
        };
        assert_eq!(s.status, want, "{} #{}", s.task_id, s.sample_index);
        if p.errored {
            assert_eq!(s.correct, None);
            assert!(s.error_class.is_some());
            continue;
        }
        assert_eq!(
            s.correct,
            Some(p.correct),
            "{} #{}: {:?}",
            s.task_id,
            s.sample_index,
            s.diagnosis
        );
        assert!(!s.unresolved, "{} #{}", s.task_id, s.sample_index);
        if matches!(p.family, Family::Differential | Family::Rationale) {
            assert_eq!(
                s.diagnosis.as_ref().unwrap().matched_rank,
                p.rank,
                "{} #{}",
                s.task_id,
                s.sample_index
            );
        }
    }
    check_pass_at_k(&report, planned);
    check_answer_words(&report, planned);

    // The judge-approved entry was decided by judge-a after one re-ask, and by judge-b at once.
    let sivd = report
        .samples
        .iter()
        .find(|s| {
            s.diagnosis
                .as_ref()
                .is_some_and(|d| d.reference == "SIVD" && d.matched_rank == Some(1))
        })
        .expect("an SIVD answer with the approved term first");
    let d = sivd.diagnosis.as_ref().unwrap();
    assert_eq!(d.method, Some(MatchMethod::Judge));
    let decision = d.candidates[0].judge.as_ref().unwrap();
    assert_eq!(decision.equivalent, Some(true));
    assert_eq!(
        decision.verdicts[0].attempts, 2,
        "judge-a answered prose first"
    );
    assert_eq!(decision.verdicts[1].attempts, 1);
    assert!(env
        .judge_server
        .requests()
        .iter()
        .any(|r| r.all_text().contains("could not be used")));
    // "Stroke" for "acute ischaemic stroke" is broader: the rules defer to the judges, who say no.
    let stroke = report
        .samples
        .iter()
        .filter_map(|s| s.diagnosis.as_ref())
        .find(|d| {
            d.candidates
                .first()
                .is_some_and(|c| c.diagnosis == "Stroke")
        })
        .unwrap();
    let c = &stroke.candidates[0];
    assert!(
        c.rule_note.as_deref().unwrap().contains("granularity"),
        "{c:?}"
    );
    assert_eq!(c.method, Some(MatchMethod::Judge));
    assert_eq!(c.judge.as_ref().unwrap().equivalent, Some(false));

    // Rubric: the mean of the two judges' scores, or judge-a's alone where judge-b never answered validly.
    let refused = rubric_refused_by_b(&env.suite);
    for ((level, family), g) in report
        .by_level_family
        .iter()
        .map(|g| ((g.level.unwrap(), g.family.unwrap()), g))
    {
        let fam = family.as_str();
        let (da, oa) = rubric_score("judge-a", fam);
        let (db, ob) = rubric_score("judge-b", fam);
        let graded: Vec<&Planned> = planned
            .iter()
            .filter(|p| p.level == level && p.family == family && !p.errored)
            .collect();
        let dim: Vec<f64> = graded
            .iter()
            .map(|p| {
                if rubric_refused(p, &refused) {
                    f64::from(da)
                } else {
                    f64::from(da + db) / 2.0
                }
            })
            .collect();
        let overall: Vec<f64> = graded
            .iter()
            .map(|p| {
                if rubric_refused(p, &refused) {
                    f64::from(oa)
                } else {
                    f64::from(oa + ob) / 2.0
                }
            })
            .collect();
        let r = g.rubric.as_ref().unwrap();
        assert_eq!(r.n, graded.len());
        for d in &r.dimensions {
            assert!(
                close(d.mean.as_ref().unwrap().value, mean(&dim)),
                "{level} {family} {}",
                d.dimension
            );
        }
        assert!(
            close(r.overall.as_ref().unwrap().value, mean(&overall)),
            "{level} {family} overall"
        );
    }
    let refused_sample = report
        .samples
        .iter()
        .find(|s| s.task_id == refused && s.correct == Some(true))
        .unwrap();
    let rb = &refused_sample.rubric.as_ref().unwrap().judges[1];
    assert_eq!((rb.attempts, rb.overall), (3, None));
    assert!(rb
        .failure
        .as_deref()
        .unwrap()
        .contains("no valid answer after 3 attempts"));
    let refused_count = planned
        .iter()
        .filter(|p| rubric_refused(p, &refused))
        .count() as u64;
    assert_eq!(report.config.judges[1].failed_items, refused_count);
    assert_eq!(report.config.judges[0].failed_items, 0);

    // Taxonomy: every wrong answer classified; the two human labels win over the judges.
    for s in report.samples.iter().filter(|s| s.correct == Some(false)) {
        let t = s.taxonomy.as_ref().unwrap();
        let human = relabelled.contains(&(s.task_id.clone(), s.sample_index));
        let want = if human {
            ErrorCategory::VisualHallucination
        } else {
            // On lesions the judges disagree and the tie goes to the first-listed judge.
            ErrorCategory::parse(taxonomy_class("judge-a", s.family.as_str())).unwrap()
        };
        assert_eq!(t.category, Some(want), "{} #{}", s.task_id, s.sample_index);
        assert_eq!(
            t.source,
            Some(if human {
                LabelSource::Human
            } else {
                LabelSource::Judge
            })
        );
        assert_eq!(t.judges.len(), 2);
    }
    assert!(report
        .samples
        .iter()
        .filter(|s| s.correct == Some(true))
        .all(|s| s.taxonomy.is_none()));
    let labels = report.config.taxonomy.human_labels.as_ref().unwrap();
    assert_eq!((labels.rows, labels.unused_rows), (3, 1));
    let dist = report
        .by_family
        .iter()
        .find(|g| g.family == Some(Family::Differential))
        .unwrap();
    let tax = dist.taxonomy.as_ref().unwrap();
    let wrong_dx = planned
        .iter()
        .filter(|p| p.family == Family::Differential && !p.errored && !p.correct)
        .count();
    assert_eq!(
        (tax.wrong, tax.labelled, tax.from_humans),
        (wrong_dx, wrong_dx, 2)
    );
    let count = |c: ErrorCategory| tax.classes.iter().find(|x| x.category == c).unwrap().count;
    assert_eq!(count(ErrorCategory::VisualHallucination), 2);
    assert_eq!(count(ErrorCategory::ReasoningFailure), wrong_dx - 2);

    // Two judges: agreement is reported; neither is self-grading.
    assert!(report
        .jury_agreement
        .iter()
        .any(|a| a.quantity == "rubric:overall"
            && a.measure == nmb_stats::Measure::AlphaInterval
            && a.estimate.is_some()));
    assert!(report
        .config
        .judges
        .iter()
        .all(|j| !j.self_grading && j.calls > 0));

    // BERTScore: a rationale identical to the reference scores F = 1; the others less.
    if bert.is_some() {
        assert!(report.config.bertscore.enabled);
        for s in report
            .samples
            .iter()
            .filter(|s| s.status == SampleStatus::Ok)
        {
            let p = by_key[&(s.task_id.as_str(), s.sample_index)];
            match (&s.bertscore, p.verbatim_rationale) {
                (Some(b), true) => assert!((b.f - 1.0).abs() < 1e-4, "{} {}", s.task_id, b.f),
                (Some(b), false) => assert!(b.f < 0.99, "{} {}", s.task_id, b.f),
                (None, verbatim) => assert!(!verbatim, "{} has no BERTScore", s.task_id),
            }
        }
        let g = group(&report, Level::Direct, Family::Rationale);
        assert!(g.bertscore.as_ref().unwrap().f.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_judge_inconclusive_matches_stay_unresolved_and_compare_finds_the_difference() {
    let env = setup().await;
    let base = ScoreOptions {
        bertscore: BertScoreSetting::model(env.dir.path().join("no-such-model"), None),
        bootstrap: boot(),
        ..ScoreOptions::default()
    };
    let plain = score_loaded(&env.store, &env.scheduler, &env.run_id, &env.suite, &base)
        .await
        .unwrap();
    assert_eq!(env.judge_server.request_count(), 0);
    let needing: Vec<&Planned> = env
        .planned
        .iter()
        .filter(|p| p.needs_judge_at_rank_1 && !p.errored)
        .collect();
    assert!(!needing.is_empty());
    assert_eq!(plain.overall.unresolved, needing.len());
    for p in &needing {
        let s = plain
            .samples
            .iter()
            .find(|s| s.task_id == p.task_id && s.sample_index == p.sample)
            .unwrap();
        assert!(
            s.unresolved && s.correct == Some(false),
            "{} #{}",
            p.task_id,
            p.sample
        );
    }
    assert!(plain
        .samples
        .iter()
        .all(|s| s.rubric.is_none() && s.taxonomy.is_none()));
    assert!(plain.notes.iter().any(|n| n.contains("--judge")));
    assert!(plain
        .notes
        .iter()
        .any(|n| n.contains("BERTScore not computed") && n.contains("no-such-model")));
    assert!(!plain.config.bertscore.enabled);

    let judged_opts = ScoreOptions {
        judges: vec![env.judge("judge-b")],
        ..base
    };
    let judged = score_loaded(
        &env.store,
        &env.scheduler,
        &env.run_id,
        &env.suite,
        &judged_opts,
    )
    .await
    .unwrap();
    assert_ne!(plain.config.config_hash, judged.config.config_hash);
    assert_eq!(judged.overall.unresolved, 0);

    // Paired comparison: the judge turns exactly the approved-term answers at rank 1 into correct ones.
    let cmp = nmb_results::compare::compare(&judged, &plain, &boot()).unwrap();
    let overall = &cmp.groups[0];
    let answered = env
        .planned
        .iter()
        .filter(|p| !p.errored && !p.parse_failed)
        .count()
        + env.planned.iter().filter(|p| p.parse_failed).count();
    assert_eq!(overall.items, answered);
    let gained = env
        .planned
        .iter()
        .filter(|p| !p.errored && p.correct && p.needs_judge_at_rank_1)
        .count() as u64;
    let m = overall.mcnemar.unwrap();
    assert_eq!((m.only_a, m.only_b), (gained, 0));
    // Several samples per task: McNemar must treat them as clustered (by case), not as independent pairs.
    // Durkalski's X² = (Σ_k g_k)² / Σ_k g_k² with g_k the gains in case k (all in one direction here).
    let mut by_case: BTreeMap<&str, f64> = BTreeMap::new();
    for p in env
        .planned
        .iter()
        .filter(|p| !p.errored && p.correct && p.needs_judge_at_rank_1)
    {
        *by_case.entry(p.case_id.as_str()).or_default() += 1.0;
    }
    let x2 = (gained as f64).powi(2) / by_case.values().map(|g| g * g).sum::<f64>();
    assert_eq!(m.test, nmb_stats::McNemarTest::ClusterAdjusted);
    assert!(close(m.statistic.unwrap(), x2), "{m:?} vs X² {x2}");
    let chi2 = statrs::distribution::ChiSquared::new(1.0).unwrap();
    let p_chi2 = statrs::distribution::ContinuousCDF::sf(&chi2, x2);
    assert!(
        (m.p_value - p_chi2).abs() < 1e-9,
        "{} vs {p_chi2}",
        m.p_value
    );
    assert!(
        cmp.notes.iter().any(|n| n.contains("cluster-adjusted")),
        "{:?}",
        cmp.notes
    );
    if by_case.len() < 10 {
        assert!(
            cmp.notes.iter().any(|n| n.contains("rough")),
            "{:?}",
            cmp.notes
        );
    }

    // With one sample per task the exact test is right, and is used.
    let first_only = |r: &ScoreReport| {
        let mut r = r.clone();
        r.samples.retain(|s| s.sample_index == 0);
        r
    };
    let one =
        nmb_results::compare::compare(&first_only(&judged), &first_only(&plain), &boot()).unwrap();
    let m1 = one.groups[0].mcnemar.unwrap();
    assert_eq!(m1.test, nmb_stats::McNemarTest::Exact);
    let gained_first = env
        .planned
        .iter()
        .filter(|p| p.sample == 0 && !p.errored && p.correct && p.needs_judge_at_rank_1)
        .count() as i32;
    assert!(close(
        m1.p_value,
        (2.0 * 0.5f64.powi(gained_first)).min(1.0)
    ));
    let paired = overall.paired.as_ref().unwrap();
    assert!(close(paired.diff.value, gained as f64 / answered as f64));
}

/// `--bertscore-idf` and `--bertscore-rescale`: each sample's BERTScore is what nmb-bertscore gives for the same
/// pair with those options (idf), or the raw score rescaled by the baseline row, `(x - b) / (1 - b)`; the config
/// records them; without them the report has no trace of either; a baseline that cannot apply is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bertscore_idf_and_rescaling_are_applied_and_recorded() {
    let Some(dir) = minilm() else { return };
    let env = setup().await;
    let with = |idf: bool, rescale: Option<Rescale>| ScoreOptions {
        bertscore: BertScoreSetting::Model {
            dir: dir.clone(),
            layer: Some(6),
            idf,
            rescale,
        },
        bootstrap: boot(),
        ..ScoreOptions::default()
    };
    let score = |opts: ScoreOptions| {
        let (store, scheduler, run_id, suite) = (
            env.store.clone(),
            env.scheduler.clone(),
            env.run_id.clone(),
            env.suite.clone(),
        );
        async move { score_loaded(&store, &scheduler, &run_id, &suite, &opts).await }
    };
    let raw = score(with(false, None)).await.unwrap();
    let raw_config = serde_json::to_value(&raw.config.bertscore).unwrap();
    assert_eq!(raw_config["idf"], false);
    assert_eq!(raw_config["rescaled"], false);
    assert!(raw_config.get("baseline").is_none(), "{raw_config}");
    let scored: Vec<&nmb_results::SampleScore> = raw
        .samples
        .iter()
        .filter(|s| s.bertscore.is_some())
        .collect();
    assert!(!scored.is_empty());

    // Rescaled with a file: every F is the raw F mapped through the file's layer-6 row.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("baseline.tsv");
    std::fs::write(&file, "LAYER,P,R,F\n5,0.1,0.1,0.1\n6,0.30,0.40,0.50\n").unwrap();
    let rescaled = score(with(false, Some(Rescale::File(file.clone()))))
        .await
        .unwrap();
    let cfg = &rescaled.config.bertscore;
    assert!(cfg.rescaled && !cfg.idf);
    let b = cfg.baseline.as_ref().unwrap();
    assert_eq!((b.layer, b.p, b.r, b.f), (6, 0.30, 0.40, 0.50));
    assert!(b.source.contains("baseline.tsv"));
    assert_ne!(rescaled.config.config_hash, raw.config.config_hash);
    for s in &scored {
        let after = rescaled
            .samples
            .iter()
            .find(|x| x.task_id == s.task_id && x.sample_index == s.sample_index)
            .unwrap();
        let (x, y) = (
            s.bertscore.as_ref().unwrap(),
            after.bertscore.as_ref().unwrap(),
        );
        assert!(close(y.f, (x.f - 0.5) / 0.5), "{} vs {}", y.f, x.f);
        assert!(close(y.p, (x.p - 0.3) / 0.7));
    }

    // The shipped baseline applies to MiniLM: its layer-6 row, read here from the file itself.
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/bertscore-baselines/all-MiniLM-L6-v2.tsv"
    ))
    .unwrap();
    let row6: Vec<f64> = shipped
        .lines()
        .find(|l| l.starts_with("6,"))
        .unwrap()
        .split(',')
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    let default = score(with(false, Some(Rescale::Default))).await.unwrap();
    let b = default.config.bertscore.baseline.as_ref().unwrap();
    assert_eq!(vec![b.p, b.r, b.f], row6);
    assert!(b.source.contains("all-MiniLM-L6-v2"));

    // idf: the same pairs through nmb-bertscore with idf on (its idf path is checked against bert-score).
    let idf = score(with(true, None)).await.unwrap();
    assert!(idf.config.bertscore.idf && !idf.config.bertscore.rescaled);
    let reference = |task_id: &str| {
        env.suite
            .tasks()
            .find(|(_, t)| t.id == task_id)
            .and_then(|(_, t)| t.reference.as_ref())
            .and_then(|r| r.rationale.clone())
            .unwrap()
    };
    let pairs: Vec<(String, String)> = scored
        .iter()
        .map(|s| {
            let cand = s.parsed.as_ref().unwrap().rationale.clone().unwrap();
            (cand, reference(&s.task_id))
        })
        .collect();
    let (cands, refs): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
    let expected = nmb_bertscore::BertScorer::load(&dir, 6)
        .unwrap()
        .score(
            &cands,
            &refs,
            &nmb_bertscore::ScoreOptions {
                idf: true,
                ..nmb_bertscore::ScoreOptions::default()
            },
        )
        .unwrap();
    for (s, want) in scored.iter().zip(&expected) {
        let got = idf
            .samples
            .iter()
            .find(|x| x.task_id == s.task_id && x.sample_index == s.sample_index)
            .unwrap()
            .bertscore
            .clone()
            .unwrap();
        assert!(close(got.f, want.f), "{} vs {}", got.f, want.f);
    }

    // A file without the layer, and the shipped baseline for another model, are errors naming what is missing.
    std::fs::write(&file, "LAYER,P,R,F\n5,0.1,0.1,0.1\n").unwrap();
    let err = score(with(false, Some(Rescale::File(file.clone()))))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("baseline.tsv") && err.contains("layer 6"),
        "{err}"
    );
    let other = tmp.path().join("other-model");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(dir.join("config.json"), other.join("config.json")).unwrap();
    std::fs::write(other.join("model.safetensors"), b"not these weights").unwrap();
    let opts = ScoreOptions {
        bertscore: BertScoreSetting::Model {
            dir: other.clone(),
            layer: Some(6),
            idf: false,
            rescale: Some(Rescale::Default),
        },
        ..with(false, None)
    };
    let err = score(opts).await.unwrap_err().to_string();
    assert!(
        err.contains("no built-in BERTScore baseline") && err.contains("other-model"),
        "{err}"
    );
}
