//! Comparing two scored runs on the same items: paired bootstrap of the difference in accuracy and the exact
//! McNemar test.
//!
//! Items are (task id, sample index) pairs that both reports scored (errored, pending and no-reference samples
//! are left out, on either side). The bootstrap resamples whole cases, pairing the two runs' answers to the same
//! case. Groups: all items, then each (level, family) with items.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{mcnemar_paired, paired_bootstrap, BootstrapConfig, Design};
use nmb_suite::{Family, Level};

use crate::results::{Breakdown, Comparison, GroupComparison, ScoreReport};
use crate::ScoreError;

struct Item<'a> {
    case_id: &'a str,
    level: Level,
    family: Family,
    a: bool,
    b: bool,
}

pub fn compare(
    a: &ScoreReport,
    b: &ScoreReport,
    cfg: &BootstrapConfig,
) -> Result<Comparison, ScoreError> {
    let b_index: BTreeMap<(&str, u32), &crate::results::SampleScore> = b
        .samples
        .iter()
        .filter(|s| s.status.is_scored())
        .map(|s| ((s.task_id.as_str(), s.sample_index), s))
        .collect();
    let items: Vec<Item> = a
        .samples
        .iter()
        .filter(|s| s.status.is_scored())
        .filter_map(|s| {
            b_index
                .get(&(s.task_id.as_str(), s.sample_index))
                .map(|t| Item {
                    case_id: s.case_id.as_str(),
                    level: s.level,
                    family: s.family,
                    a: s.correct == Some(true),
                    b: t.correct == Some(true),
                })
        })
        .collect();
    let mut groups = vec![group(
        Breakdown::Overall,
        None,
        None,
        &items.iter().collect::<Vec<_>>(),
        cfg,
    )?];
    let keys: BTreeSet<(Level, Family)> = items.iter().map(|i| (i.level, i.family)).collect();
    for (l, f) in keys {
        let members: Vec<&Item> = items
            .iter()
            .filter(|i| i.level == l && i.family == f)
            .collect();
        groups.push(group(
            Breakdown::LevelFamily,
            Some(l),
            Some(f),
            &members,
            cfg,
        )?);
    }
    let mut notes = Vec::new();
    let only_a = a.samples.iter().filter(|s| s.status.is_scored()).count() - items.len();
    let only_b = b_index.len() - items.len();
    if only_a + only_b > 0 {
        notes.push(format!(
            "{only_a} scored answers only in {} and {only_b} only in {} are left out (no pair)",
            a.run_id, b.run_id
        ));
    }
    if a.config.suite_hash_scored != b.config.suite_hash_scored {
        notes.push("the two runs were scored against different suites or answer keys".into());
    }
    for (r, name) in [(a, "A"), (b, "B")] {
        if r.overall.unresolved > 0 {
            notes.push(format!(
                "run {name} has {} unresolved matches (scored without a judge); they count as wrong",
                r.overall.unresolved
            ));
        }
    }
    let model = |r: &ScoreReport| r.config.manifest().model;
    Ok(Comparison {
        run_a: a.run_id.clone(),
        run_b: b.run_id.clone(),
        model_a: model(a),
        model_b: model(b),
        config_hash_a: a.config.config_hash.clone(),
        config_hash_b: b.config.config_hash.clone(),
        bootstrap: *cfg,
        groups,
        notes,
    })
}

fn group(
    by: Breakdown,
    level: Option<Level>,
    family: Option<Family>,
    items: &[&Item],
    cfg: &BootstrapConfig,
) -> Result<GroupComparison, ScoreError> {
    if items.is_empty() {
        return Ok(GroupComparison {
            by,
            level,
            family,
            items: 0,
            paired: None,
            mcnemar: None,
        });
    }
    let a: Vec<bool> = items.iter().map(|i| i.a).collect();
    let b: Vec<bool> = items.iter().map(|i| i.b).collect();
    let as_f = |v: &[bool]| {
        v.iter()
            .map(|&x| f64::from(u8::from(x)))
            .collect::<Vec<_>>()
    };
    let cases: Vec<&str> = items.iter().map(|i| i.case_id).collect();
    Ok(GroupComparison {
        by,
        level,
        family,
        items: items.len(),
        paired: Some(paired_bootstrap(
            &as_f(&a),
            &as_f(&b),
            &Design::clusters_by(&cases),
            cfg,
        )?),
        mcnemar: Some(mcnemar_paired(&a, &b)?),
    })
}
