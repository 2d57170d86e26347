//! Scores broken down by a field of the cases (`--by sex`, `--by age:0-40,40-65,65-`): which subgroup each
//! task falls in ([`assign`], read from the suite), and the types of each headline number per subgroup with its
//! case-clustered interval and the gap between the best and the worst subgroup (computed by the module
//! `subgroup_breakdown` with [`nmb_stats::subgroups`]).
//!
//! A field is looked up, with its name compared without regard to case, in the task's metadata, then the case's
//! metadata, then the case's EHR fields; the first that has it gives the value. Every case must have the field:
//! one that lacks it is an error naming it (with how many others lack it), never an "unknown" subgroup, because
//! cases whose record lacks a field are seldom a random share of the suite (a missing age is more often a
//! transfer, an emergency or another source), so a subgroup of them would mix the missingness with the field.
//! Leave such cases out of the run (`--filter`) or fill the field in to break the rest down.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{Bands, GroupBy, Subgroups};
use nmb_suite::{Case, Family, Suite, Task};
use serde::{Deserialize, Serialize};

/// Cases named in an error about cases that lack a field; the rest are counted.
const NAMED: usize = 5;

/// Why a subgroup field cannot break a suite down.
#[derive(Debug, thiserror::Error)]
pub enum SubgroupError {
    #[error("--by {spec}: {source}")]
    Spec {
        spec: Box<str>,
        #[source]
        source: nmb_stats::StatsError,
    },
    #[error(
        "--by {spec}: {missing} of {cases} cases of suite `{suite}` lack the field `{field}` ({named}); expected \
         every case to have it as a task metadata key, a case metadata key or an EHR field{known}"
    )]
    Missing {
        spec: Box<str>,
        field: Box<str>,
        suite: Box<str>,
        missing: usize,
        cases: usize,
        /// The first few cases that lack it.
        named: Box<str>,
        /// The fields the first such case does have, as a hint.
        known: Box<str>,
    },
    #[error(
        "--by {spec}: case `{case}` of suite `{suite}` has {field} = `{value}`; expected a number for the bands \
         {bands}"
    )]
    NotNumber {
        spec: Box<str>,
        field: Box<str>,
        suite: Box<str>,
        case: Box<str>,
        value: Box<str>,
        bands: Box<str>,
    },
    #[error(
        "--by {spec}: case `{case}` of suite `{suite}` has {field} = {value}, which falls in none of the bands \
         {bands}; expected bands that cover every case's value (an open last band such as `65-` has no upper \
         limit)"
    )]
    OutOfBands {
        spec: Box<str>,
        field: Box<str>,
        suite: Box<str>,
        case: Box<str>,
        value: Box<str>,
        bands: Box<str>,
    },
}

/// Parses a `--by` spec, naming it in the error.
pub fn parse(spec: &str) -> Result<GroupBy, SubgroupError> {
    GroupBy::parse(spec).map_err(|source| SubgroupError::Spec {
        spec: spec.into(),
        source,
    })
}

/// Which subgroup each task of a suite falls in, for one `--by` spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The spec as given (`age:0-40,40-65,65-`).
    pub spec: String,
    pub field: String,
    /// The subgroups: the bands in their order, or the field's values in text order.
    pub labels: Vec<String>,
    /// Task id → index into `labels`.
    pub tasks: BTreeMap<String, usize>,
}

/// Assigns every task of `suite` to its subgroup under `spec`; errors (before anything is scored) when the spec
/// does not parse, a case lacks the field, or a value is not a number or falls in no band.
pub fn assign(suite: &Suite, spec: &str) -> Result<Assignment, SubgroupError> {
    let by = parse(spec)?;
    let missing: Vec<&Case> = suite
        .cases
        .iter()
        .filter(|c| c.tasks.iter().any(|t| value(c, t, &by.field).is_none()))
        .collect();
    if let Some(first) = missing.first() {
        return Err(missing_error(suite, spec, &by.field, &missing, first));
    }
    let mut raw: Vec<(&Case, &Task, &str)> = Vec::new();
    for (c, t) in suite.tasks() {
        raw.push((c, t, value(c, t, &by.field).unwrap_or_default()));
    }
    let mut assignment = Assignment {
        spec: spec.to_string(),
        field: by.field.clone(),
        labels: Vec::new(),
        tasks: BTreeMap::new(),
    };
    match &by.bands {
        Some(bands) => {
            assignment.labels = bands.bands.iter().map(|b| b.label.clone()).collect();
            for (c, t, v) in raw {
                let index = band_of(suite, spec, &by.field, bands, c, v)?;
                assignment.tasks.insert(t.id.clone(), index);
            }
        }
        None => {
            let values: BTreeSet<&str> = raw.iter().map(|(_, _, v)| *v).collect();
            assignment.labels = values.iter().map(|v| v.to_string()).collect();
            for (_, t, v) in raw {
                let index = assignment.labels.iter().position(|l| l == v).unwrap_or(0);
                assignment.tasks.insert(t.id.clone(), index);
            }
        }
    }
    Ok(assignment)
}

/// The field's value for a task: its own metadata, its case's, then its case's EHR (names without regard to
/// case, values trimmed); `None` when none has it or it is blank.
fn value<'a>(case: &'a Case, task: &'a Task, field: &str) -> Option<&'a str> {
    let named = |k: &str| k.trim().eq_ignore_ascii_case(field);
    task.metadata
        .iter()
        .chain(&case.metadata)
        .find(|(k, _)| named(k))
        .map(|(_, v)| v.as_str())
        .or_else(|| {
            case.ehr
                .iter()
                .find(|(k, _)| named(k))
                .map(|(_, v)| v.as_str())
        })
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn missing_error(
    suite: &Suite,
    spec: &str,
    field: &str,
    missing: &[&Case],
    first: &Case,
) -> SubgroupError {
    let mut named: Vec<String> = missing
        .iter()
        .take(NAMED)
        .map(|c| format!("`{}`", c.id))
        .collect();
    if missing.len() > NAMED {
        named.push(format!("and {} more", missing.len() - NAMED));
    }
    let fields: BTreeSet<&str> = first
        .ehr
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(first.metadata.keys().map(String::as_str))
        .chain(
            first
                .tasks
                .iter()
                .flat_map(|t| t.metadata.keys().map(String::as_str)),
        )
        .collect();
    let known = if fields.is_empty() {
        format!("; case `{}` has no field at all", first.id)
    } else {
        let list: Vec<&str> = fields.into_iter().collect();
        format!("; case `{}` has {}", first.id, list.join(", "))
    };
    SubgroupError::Missing {
        spec: spec.into(),
        field: field.into(),
        suite: suite.id.as_str().into(),
        missing: missing.len(),
        cases: suite.cases.len(),
        named: named.join(", ").into(),
        known: known.into(),
    }
}

fn band_of(
    suite: &Suite,
    spec: &str,
    field: &str,
    bands: &Bands,
    case: &Case,
    value: &str,
) -> Result<usize, SubgroupError> {
    let list = || {
        bands
            .bands
            .iter()
            .map(|b| b.label.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let Some(x) = leading_number(value) else {
        return Err(SubgroupError::NotNumber {
            spec: spec.into(),
            field: field.into(),
            suite: suite.id.as_str().into(),
            case: case.id.as_str().into(),
            value: value.into(),
            bands: list().into(),
        });
    };
    bands.index_of(x).ok_or_else(|| SubgroupError::OutOfBands {
        spec: spec.into(),
        field: field.into(),
        suite: suite.id.as_str().into(),
        case: case.id.as_str().into(),
        value: value.into(),
        bands: list().into(),
    })
}

/// The number a value starts with (`64`, `64 years`, `7.5y`); `None` when it starts with anything else.
fn leading_number(value: &str) -> Option<f64> {
    let end = value
        .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
        .unwrap_or(value.len());
    value[..end].parse::<f64>().ok().filter(|x| x.is_finite())
}

/// Every `--by` field's breakdown of one scoring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubgroupsReport {
    pub fields: Vec<FieldSubgroups>,
}

/// One field's breakdown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSubgroups {
    /// The spec as given (`age:0-40,40-65,65-`).
    pub spec: String,
    pub field: String,
    /// Every subgroup in order (bands in their order, values in text order), including ones the run has no
    /// scored answer in.
    pub labels: Vec<String>,
    /// Task id → its subgroup: what `nmb compare` pairs the runs' answers by.
    pub tasks: BTreeMap<String, String>,
    /// One breakdown per headline number.
    pub numbers: Vec<NumberSubgroups>,
}

/// One headline number per subgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumberSubgroups {
    /// `accuracy` (share of correct answers) or `pass@K` (the unbiased estimator, per task).
    pub number: String,
    /// `None`: every family together; else the family's tasks only.
    pub family: Option<Family>,
    /// Per subgroup (with answers) and the gap between the best and the worst of those with at least
    /// [`nmb_stats::MIN_SUBGROUP_CASES`] cases.
    pub subgroups: Subgroups<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> Suite {
        nmb_suite::sample::build()
    }

    #[test]
    fn the_sample_suite_breaks_down_by_sex_and_age_bands() {
        let s = suite();
        let sex = assign(&s, "sex").unwrap();
        assert_eq!(sex.labels, vec!["female", "male"]);
        assert_eq!(sex.tasks.len(), s.tasks().count());
        for (c, t) in s.tasks() {
            let want = c.ehr.iter().find(|(k, _)| k == "Sex").unwrap().1.clone();
            assert_eq!(sex.labels[sex.tasks[&t.id]], want);
        }
        let age = assign(&s, "age:0-40,40-65,65-").unwrap();
        assert_eq!(age.labels, vec!["0-40", "40-65", "65-"]);
        for (c, t) in s.tasks() {
            let years: f64 = c
                .ehr
                .iter()
                .find(|(k, _)| k == "Age")
                .unwrap()
                .1
                .parse()
                .unwrap();
            let want = if years < 40.0 {
                0
            } else if years < 65.0 {
                1
            } else {
                2
            };
            assert_eq!(age.tasks[&t.id], want, "{}", c.id);
        }
        // Case metadata and task metadata are fields too.
        let group = assign(&s, "disease_group").unwrap();
        assert!(group.labels.len() > 1);
    }

    #[test]
    fn a_field_cases_lack_and_bad_bands_are_errors_naming_what_is_wrong() {
        let mut s = suite();
        let e = assign(&s, "scanner").unwrap_err().to_string();
        assert!(
            e.contains("`scanner`") && e.contains(&format!("{0} of {0} cases", s.cases.len())),
            "{e}"
        );
        assert!(
            e.contains(&format!("`{}`", s.cases[0].id)) && e.contains("Age"),
            "{e}"
        );
        s.cases[1].ehr.retain(|(k, _)| k != "Sex");
        let e = assign(&s, "sex").unwrap_err().to_string();
        assert!(e.contains(&format!("1 of {} cases", s.cases.len())), "{e}");
        assert!(e.contains(&format!("`{}`", s.cases[1].id)), "{e}");
        let e = assign(&s, "age:0-40,30-65,65-").unwrap_err().to_string();
        assert!(e.contains("overlap") && e.contains("`30-65`"), "{e}");
        let e = assign(&s, "age:0-40,45-").unwrap_err().to_string();
        assert!(e.contains("from 40 to 45"), "{e}");
        let e = assign(&s, "age:18-").unwrap_err().to_string();
        assert!(
            e.contains("none of the bands 18-") && e.contains("age = 7"),
            "{e}"
        );
        let e = assign(&suite(), "sex:0-1,1-").unwrap_err().to_string();
        assert!(e.contains("expected a number") && e.contains("male"), "{e}");
    }

    #[test]
    fn leading_numbers() {
        assert_eq!(leading_number("64"), Some(64.0));
        assert_eq!(leading_number("64 years"), Some(64.0));
        assert_eq!(leading_number("7.5y"), Some(7.5));
        assert_eq!(leading_number("about 30"), None);
        assert_eq!(leading_number(""), None);
    }
}
