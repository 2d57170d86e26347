//! Comparing two scored runs on the same items: paired bootstrap of the difference in accuracy and McNemar's
//! test.
//!
//! Items are (task id, sample index) pairs that both reports scored (errored, pending and no-reference samples
//! are left out, on either side). The bootstrap resamples whole cases, pairing the two runs' answers to the same
//! case. Groups: all items, then each (level, family) with items.
//!
//! The n samples of a task, and the tasks of a case, are not independent pairs: the exact McNemar test on items
//! would count them as such and give p-values that are too small. A group whose items are each the only answer
//! of their task gets the exact test; any other group gets the cluster-adjusted test of Durkalski et al. (2003)
//! with cases as clusters. Each McNemar result says which test produced it.
//!
//! Structured (NeuroVLM-Bench) answers are also compared field by field: an item is then "this field correct",
//! over the paired answers whose reference has the field, with the same two tests.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{
    mcnemar_clustered, mcnemar_paired, paired_bootstrap, BootstrapConfig, Design, McNemar,
    McNemarTest, PairedComparison,
};
use nmb_suite::{Family, Level};

use crate::error::ResultsError;
use crate::report::{
    Breakdown, Comparison, FieldComparison, GroupComparison, ScoreReport, SubgroupComparison,
    SubgroupFieldComparison,
};
use crate::sample::SampleScore;
use crate::structured::FieldOutcome;

/// Fewer cases than this make the cluster-adjusted test's χ² approximation rough.
const FEW_CLUSTERS: usize = 10;

struct Item<'a> {
    case_id: &'a str,
    task_id: &'a str,
    level: Level,
    family: Family,
    a: bool,
    b: bool,
}

pub fn compare(
    a: &ScoreReport,
    b: &ScoreReport,
    cfg: &BootstrapConfig,
) -> Result<Comparison, ResultsError> {
    let b_index: BTreeMap<(&str, u32), &SampleScore> = b
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
                    task_id: s.task_id.as_str(),
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
    let structured_fields = field_comparisons(a, &b_index, cfg)?;
    let subgroups = subgroup_comparisons(a, b, &items, cfg, &mut notes)?;
    notes.extend(mcnemar_notes(&groups));
    let (ma, mb) = (a.config.manifest(), b.config.manifest());
    Ok(Comparison {
        run_a: a.run_id.clone(),
        run_b: b.run_id.clone(),
        name_a: ma.display_name(),
        name_b: mb.display_name(),
        model_a: ma.model,
        model_b: mb.model,
        config_hash_a: a.config.config_hash.clone(),
        config_hash_b: b.config.config_hash.clone(),
        bootstrap: *cfg,
        groups,
        structured_fields,
        subgroups,
        notes,
    })
}

/// Per `--by` field both scorings have, the paired tests within each subgroup (tasks placed as run A's scoring
/// placed them), and the gap between the subgroups' differences. A field only one run was scored with is
/// named in a note.
fn subgroup_comparisons(
    a: &ScoreReport,
    b: &ScoreReport,
    items: &[Item],
    cfg: &BootstrapConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<SubgroupFieldComparison>, ResultsError> {
    let fields = |r: &ScoreReport| -> Vec<crate::subgroup::FieldSubgroups> {
        r.subgroups.iter().flat_map(|s| s.fields.clone()).collect()
    };
    let (fa, fb) = (fields(a), fields(b));
    let mut out = Vec::new();
    for (mine, theirs, name) in [(&fa, &fb, "A"), (&fb, &fa, "B")] {
        for f in mine
            .iter()
            .filter(|f| !theirs.iter().any(|t| t.spec == f.spec))
        {
            notes.push(format!(
                "only run {name} was scored with --by {}: score both with it to compare by subgroup",
                f.spec
            ));
        }
    }
    for f in &fa {
        let Some(other) = fb.iter().find(|t| t.spec == f.spec) else {
            continue;
        };
        if other.tasks != f.tasks {
            notes.push(format!(
                "the two scorings place some tasks in different subgroups under --by {}; run A's placement is used",
                f.spec
            ));
        }
        out.push(subgroup_field(f, items, cfg)?);
    }
    Ok(out)
}

fn subgroup_field(
    f: &crate::subgroup::FieldSubgroups,
    items: &[Item],
    cfg: &BootstrapConfig,
) -> Result<SubgroupFieldComparison, ResultsError> {
    let placed: Vec<(&Item, usize)> = items
        .iter()
        .filter_map(|i| {
            let label = f.tasks.get(i.task_id)?;
            Some((i, f.labels.iter().position(|l| l == label)?))
        })
        .collect();
    let mut subgroups = Vec::new();
    for (index, label) in f.labels.iter().enumerate() {
        let members: Vec<&Item> = placed
            .iter()
            .filter(|(_, g)| *g == index)
            .map(|(i, _)| *i)
            .collect();
        if members.is_empty() {
            continue;
        }
        let cases: BTreeSet<&str> = members.iter().map(|i| i.case_id).collect();
        let row = group(Breakdown::Overall, None, None, &members, cfg)?;
        subgroups.push(SubgroupComparison {
            subgroup: label.clone(),
            cases: cases.len(),
            few_cases: cases.len() < nmb_stats::MIN_SUBGROUP_CASES,
            items: row.items,
            paired: row.paired,
            mcnemar: row.mcnemar,
            p_adjusted: None,
        });
    }
    adjust_subgroups(&mut subgroups)?;
    let gap = if placed.is_empty() {
        None
    } else {
        let diff: Vec<f64> = placed
            .iter()
            .map(|(i, _)| f64::from(u8::from(i.a)) - f64::from(u8::from(i.b)))
            .collect();
        let cases: Vec<&str> = placed.iter().map(|(i, _)| i.case_id).collect();
        let groups: Vec<usize> = placed.iter().map(|(_, g)| *g).collect();
        nmb_stats::subgroups(&diff, &cases, &groups, nmb_stats::Average::Mean, cfg)?
            .gap
            .map(|g| nmb_stats::SubgroupGap {
                best: f.labels[g.best].clone(),
                worst: f.labels[g.worst].clone(),
                gap: g.gap,
                compared: g.compared,
            })
    };
    Ok(SubgroupFieldComparison {
        by: f.spec.clone(),
        subgroups,
        gap,
    })
}

/// Per NeuroVLM-Bench field, the paired answers of both runs that have it, compared on "this field correct".
fn field_comparisons(
    a: &ScoreReport,
    b_index: &BTreeMap<(&str, u32), &SampleScore>,
    cfg: &BootstrapConfig,
) -> Result<Vec<FieldComparison>, ResultsError> {
    let mut by_field: BTreeMap<&str, Vec<Item>> = BTreeMap::new();
    for s in a.samples.iter().filter(|s| s.status.is_scored()) {
        let Some(t) = b_index.get(&(s.task_id.as_str(), s.sample_index)) else {
            continue;
        };
        let (Some(va), Some(vb)) = (&s.structured, &t.structured) else {
            continue;
        };
        for (field, oa) in &va.fields {
            let Some(ob) = vb.fields.get(field) else {
                continue;
            };
            by_field.entry(field.as_str()).or_default().push(Item {
                case_id: s.case_id.as_str(),
                task_id: s.task_id.as_str(),
                level: s.level,
                family: s.family,
                a: *oa == FieldOutcome::Correct,
                b: *ob == FieldOutcome::Correct,
            });
        }
    }
    let order = crate::structured::FIELDS;
    let mut fields: Vec<(&str, Vec<Item>)> = by_field.into_iter().collect();
    fields.sort_by_key(|(f, _)| order.iter().position(|o| o == f).unwrap_or(order.len()));
    fields
        .into_iter()
        .map(|(field, items)| {
            let refs: Vec<&Item> = items.iter().collect();
            let (paired, mcnemar) = tests(&refs, cfg)?;
            Ok(FieldComparison {
                field: field.to_string(),
                items: refs.len(),
                paired,
                mcnemar,
            })
        })
        .collect()
}

fn group(
    by: Breakdown,
    level: Option<Level>,
    family: Option<Family>,
    items: &[&Item],
    cfg: &BootstrapConfig,
) -> Result<GroupComparison, ResultsError> {
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
    let (paired, mcnemar) = tests(items, cfg)?;
    Ok(GroupComparison {
        by,
        level,
        family,
        items: items.len(),
        paired: Some(paired),
        mcnemar: Some(mcnemar),
    })
}

/// The paired bootstrap and McNemar's test on some items (at least one).
fn tests(
    items: &[&Item],
    cfg: &BootstrapConfig,
) -> Result<(PairedComparison, McNemar), ResultsError> {
    let a: Vec<bool> = items.iter().map(|i| i.a).collect();
    let b: Vec<bool> = items.iter().map(|i| i.b).collect();
    let as_f = |v: &[bool]| {
        v.iter()
            .map(|&x| f64::from(u8::from(x)))
            .collect::<Vec<_>>()
    };
    let cases: Vec<&str> = items.iter().map(|i| i.case_id).collect();
    let paired = paired_bootstrap(&as_f(&a), &as_f(&b), &Design::clusters_by(&cases), cfg)?;
    Ok((paired, mcnemar(items, &a, &b, &cases)?))
}

/// The exact test where every item is its task's only answer, else the cluster-adjusted test by case.
fn mcnemar(
    items: &[&Item],
    a: &[bool],
    b: &[bool],
    cases: &[&str],
) -> Result<McNemar, ResultsError> {
    let mut per_task: BTreeMap<&str, usize> = BTreeMap::new();
    for i in items {
        *per_task.entry(i.task_id).or_default() += 1;
    }
    if per_task.values().all(|&n| n == 1) {
        Ok(mcnemar_paired(a, b)?)
    } else {
        Ok(mcnemar_clustered(a, b, cases)?)
    }
}

/// Which McNemar tests the groups used, and a warning when the cluster-adjusted one saw few cases.
fn mcnemar_notes(groups: &[GroupComparison]) -> Vec<String> {
    let clustered = groups.iter().any(|g| {
        g.mcnemar
            .is_some_and(|m| m.test == McNemarTest::ClusterAdjusted)
    });
    let mut notes = Vec::new();
    if clustered {
        notes.push(
            "McNemar p-values: groups with several answers per task use the cluster-adjusted test (Durkalski \
             2003; cases as clusters), groups with one answer per task the exact test"
                .to_string(),
        );
    }
    let few = groups.iter().find_map(|g| {
        let m = g.mcnemar?;
        (m.test == McNemarTest::ClusterAdjusted && m.clusters? < FEW_CLUSTERS)
            .then_some(m.clusters?)
    });
    if let Some(k) = few {
        notes.push(format!(
            "the cluster-adjusted McNemar test saw only {k} case(s) in some groups: its χ² approximation is \
             rough there; prefer the paired bootstrap"
        ));
    }
    notes
}

/// Holm and BH adjusted values of the subgroups' bootstrap p-values: one field's subgroups are one family (the
/// reader scans them together for the subgroup where the runs differ).
fn adjust_subgroups(subgroups: &mut [SubgroupComparison]) -> Result<(), ResultsError> {
    let p: Vec<f64> = subgroups
        .iter()
        .filter_map(|s| s.paired.as_ref().map(|p| p.p_value))
        .collect();
    let mut adjusted = nmb_stats::adjust_family(&p)?.into_iter();
    for s in subgroups.iter_mut().filter(|s| s.paired.is_some()) {
        s.p_adjusted = adjusted.next();
    }
    Ok(())
}
