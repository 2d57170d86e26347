//! Subgroups: each run's headline numbers per subgroup of a field of the cases (`--by`), as its score report
//! holds them (or as `nmb report --by` computed them): per subgroup its cases, answers (or tasks, for pass@k) and
//! estimate with its case-clustered interval, subgroups under 10 cases marked; then the gap between the best
//! and the worst subgroup of those with 10 cases or more, with its own interval. Shown when a run has them.

use nmb_results::subgroup::NumberSubgroups;
use nmb_stats::{Estimate, MIN_SUBGROUP_CASES};
use serde::Serialize;

use super::analysis::Analysis;
use super::TableSection;
use crate::input::RunData;
use crate::table::{number, percent, Cell, Table};

/// One row: a subgroup's estimate, or the gap of one number.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SubgroupRow {
    pub run_id: String,
    pub model: String,
    /// The `--by` spec.
    pub by: String,
    /// `accuracy` or `pass@K`.
    pub number: String,
    /// The family the number is over; `None`: every family.
    pub family: Option<String>,
    /// The subgroup; `None` on a gap row.
    pub subgroup: Option<String>,
    /// Cases in the subgroup (both subgroups' on a gap row).
    pub cases: usize,
    /// Answers (accuracy) or tasks (pass@k) behind the estimate.
    pub units: usize,
    pub estimate: Estimate,
    /// Fewer than 10 cases: shown, and left out of the gap.
    pub few_cases: bool,
    /// On a gap row: the best and the worst subgroup, and how many subgroups they were chosen from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapOf>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct GapOf {
    pub best: String,
    pub worst: String,
    pub compared: usize,
}

/// The rows of every scored run that has a breakdown, in the order of its fields and numbers.
pub(crate) fn rows(runs: &[RunData]) -> Vec<SubgroupRow> {
    let mut out = Vec::new();
    for r in runs {
        let Some(sub) = r.scores.as_ref().and_then(|s| s.subgroups.as_ref()) else {
            continue;
        };
        for field in &sub.fields {
            for n in &field.numbers {
                push_number(&mut out, r, &field.spec, n);
            }
        }
    }
    out
}

fn push_number(out: &mut Vec<SubgroupRow>, r: &RunData, by: &str, n: &NumberSubgroups) {
    let row = |subgroup, cases, units, estimate: &Estimate, few_cases, gap| SubgroupRow {
        run_id: r.info.run_id.clone(),
        model: r.name(),
        by: by.to_string(),
        number: n.number.clone(),
        family: n.family.map(|f| f.as_str().to_string()),
        subgroup,
        cases,
        units,
        estimate: estimate.clone(),
        few_cases,
        gap,
    };
    for g in &n.subgroups.groups {
        out.push(row(
            Some(g.group.clone()),
            g.cases,
            g.units,
            &g.estimate,
            g.few_cases,
            None,
        ));
    }
    if let Some(gap) = &n.subgroups.gap {
        let of = |name: &str| n.subgroups.groups.iter().find(|g| g.group == name);
        let (cases, units) = [&gap.best, &gap.worst]
            .iter()
            .filter_map(|name| of(name))
            .fold((0, 0), |(c, u), g| (c + g.cases, u + g.units));
        out.push(row(
            None,
            cases,
            units,
            &gap.gap,
            false,
            Some(GapOf {
                best: gap.best.clone(),
                worst: gap.worst.clone(),
                compared: gap.compared,
            }),
        ));
    }
}

/// The section, or `None` when no run has a breakdown by subgroup.
pub(crate) fn section(runs: &[RunData], _analysis: &Analysis) -> Option<TableSection> {
    let rows = rows(runs);
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(
        "",
        &[
            ("model", false),
            ("by", false),
            ("number", false),
            ("subgroup", false),
            ("cases", true),
            ("answers or tasks", true),
            ("estimate [95% CI]", true),
            ("", false),
        ],
    );
    table.footnote = format!(
        "Each interval resamples the subgroup's own cases. A subgroup under {MIN_SUBGROUP_CASES} cases is marked \
         *: its interval is wide and less reliable, and it is left out of the gap. The gap is between the best \
         and the worst of the other subgroups, in points, with its own interval; picked as the extremes, it \
         leans high, the more so the more subgroups. Each row is one comparison among many: an interval that \
         misses another by chance is expected now and then."
    );
    for r in &rows {
        let what = match &r.family {
            Some(f) => format!("{} ({f})", r.number),
            None => r.number.clone(),
        };
        let (subgroup, estimate) = match &r.gap {
            Some(g) => (
                Cell::new(format!("gap: {} − {}", g.best, g.worst)),
                number(Some(&r.estimate), 100.0, 1, " pts"),
            ),
            None => (
                Cell::new(r.subgroup.clone().unwrap_or_default()),
                percent(Some(&r.estimate)),
            ),
        };
        table.push(vec![
            Cell::new(&r.model),
            Cell::new(&r.by),
            Cell::new(what),
            subgroup,
            Cell::new(r.cases.to_string()),
            Cell::new(r.units.to_string()),
            estimate,
            if r.few_cases {
                Cell::new(format!("* under {MIN_SUBGROUP_CASES} cases"))
            } else {
                Cell::new("")
            },
        ]);
    }
    Some(TableSection {
        id: "subgroups",
        title: "Subgroups",
        table,
        json: serde_json::to_value(&rows).unwrap_or_default(),
    })
}
