//! Each headline number of a score report per subgroup of its `--by` fields: the computation over a scored run
//! (the types and the assignment of tasks to subgroups are in [`crate::subgroup`], which the score report's own
//! type refers to, so this part lives apart from it).

use std::collections::BTreeSet;

use nmb_stats::{Average, BootstrapConfig, Subgroups};
use nmb_suite::Family;

use crate::report::{ScoreReport, KS};
use crate::subgroup::{Assignment, FieldSubgroups, NumberSubgroups, SubgroupsReport};

/// Each headline number of `report` per subgroup of every assignment: accuracy overall and per family (when the
/// run has more than one), and pass@k's unbiased estimator for each k > 1 some task has enough samples for.
pub fn breakdown(
    report: &ScoreReport,
    assignments: &[Assignment],
    cfg: &BootstrapConfig,
) -> Result<SubgroupsReport, nmb_stats::StatsError> {
    let mut fields = Vec::new();
    for a in assignments {
        fields.push(field_breakdown(report, a, cfg)?);
    }
    Ok(SubgroupsReport { fields })
}

fn field_breakdown(
    report: &ScoreReport,
    a: &Assignment,
    cfg: &BootstrapConfig,
) -> Result<FieldSubgroups, nmb_stats::StatsError> {
    let families: BTreeSet<Family> = report.tasks.iter().map(|t| t.family).collect();
    let mut scopes = vec![None];
    if families.len() > 1 {
        scopes.extend(families.iter().copied().map(Some));
    }
    let mut numbers = Vec::new();
    for family in scopes {
        let units = accuracy_units(report, a, family);
        numbers.extend(number("accuracy", family, &units, a, cfg)?);
    }
    for k in KS.iter().filter(|&&k| k > 1) {
        let units = pass_units(report, a, *k);
        numbers.extend(number(&format!("pass@{k}"), None, &units, a, cfg)?);
    }
    Ok(FieldSubgroups {
        spec: a.spec.clone(),
        field: a.field.clone(),
        labels: a.labels.clone(),
        tasks: a
            .tasks
            .iter()
            .map(|(t, &i)| (t.clone(), a.labels[i].clone()))
            .collect(),
        numbers,
    })
}

/// One unit of a number: its value, its case and its subgroup (an index into the labels).
type Unit<'a> = (f64, &'a str, usize);

/// Every scored answer (of `family`, when given) of a task the assignment places: 1 when correct, else 0.
fn accuracy_units<'a>(
    report: &'a ScoreReport,
    a: &Assignment,
    family: Option<Family>,
) -> Vec<Unit<'a>> {
    report
        .samples
        .iter()
        .filter(|s| s.status.is_scored() && family.is_none_or(|f| s.family == f))
        .filter_map(|s| {
            let g = *a.tasks.get(&s.task_id)?;
            Some((
                f64::from(u8::from(s.correct == Some(true))),
                s.case_id.as_str(),
                g,
            ))
        })
        .collect()
}

/// Every task's unbiased pass@k (tasks with fewer than k scored answers left out).
fn pass_units<'a>(report: &'a ScoreReport, a: &Assignment, k: usize) -> Vec<Unit<'a>> {
    report
        .tasks
        .iter()
        .filter_map(|t| {
            let v = (*t.pass_at_k_unbiased.get(&format!("pass_at_{k}"))?)?;
            let g = *a.tasks.get(&t.task_id)?;
            Some((v, t.case_id.as_str(), g))
        })
        .collect()
}

/// The number per subgroup; `None` without a unit.
fn number(
    name: &str,
    family: Option<Family>,
    units: &[Unit],
    a: &Assignment,
    cfg: &BootstrapConfig,
) -> Result<Option<NumberSubgroups>, nmb_stats::StatsError> {
    if units.is_empty() {
        return Ok(None);
    }
    let values: Vec<f64> = units.iter().map(|u| u.0).collect();
    let cases: Vec<&str> = units.iter().map(|u| u.1).collect();
    let groups: Vec<usize> = units.iter().map(|u| u.2).collect();
    let by_index = nmb_stats::subgroups(&values, &cases, &groups, Average::Mean, cfg)?;
    Ok(Some(NumberSubgroups {
        number: name.to_string(),
        family,
        subgroups: labelled(by_index, &a.labels),
    }))
}

/// Subgroups by label index → by label.
fn labelled(s: Subgroups<usize>, labels: &[String]) -> Subgroups<String> {
    let label = |i: usize| labels.get(i).cloned().unwrap_or_default();
    Subgroups {
        groups: s
            .groups
            .into_iter()
            .map(|g| nmb_stats::SubgroupEstimate {
                group: label(g.group),
                cases: g.cases,
                units: g.units,
                estimate: g.estimate,
                few_cases: g.few_cases,
            })
            .collect(),
        gap: s.gap.map(|g| nmb_stats::SubgroupGap {
            best: label(g.best),
            worst: label(g.worst),
            gap: g.gap,
            compared: g.compared,
        }),
    }
}
