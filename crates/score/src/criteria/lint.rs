//! `nmb rubric lint`: the sign and point mistakes a criterion rubric can carry (HealthBench's own rubric data
//! shipped with reversed signs), each named with file and line.
//!
//! Errors (the command exits 1):
//! - `harm-with-positive-points`: the text reads as a harm ("fails to", "incorrectly", "harmful", ...) but
//!   meeting it earns points;
//! - `desirable-with-negative-points`: the text reads as something wanted ("correctly", "avoids", "advises
//!   against", ...) but meeting it costs points;
//! - `zero-points`: a criterion that cannot change any score;
//! - `no-positive-points`: a task whose criteria have no positive points, so no answer could score (the score is
//!   undefined there);
//! - `duplicate`: the same text twice in one task (compared without case, spacing and punctuation).
//!
//! Warnings (reported, exit 0): `large-points` (beyond HealthBench's -10..10 range) and `no-axis-tag` (no
//! `axis:` tag, so the criterion is in no axis breakdown).
//!
//! Reading the text is a heuristic over phrases, so a criterion whose sign is right but whose wording trips it
//! can carry the tag `lint:sign-checked` to skip the two sign checks.

use std::fmt;

use nmb_results::criteria::{Criterion, CriterionRubric};

/// The tag that marks a criterion's sign as checked by a person.
pub const SIGN_CHECKED: &str = "lint:sign-checked";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One thing lint found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    /// A stable name for the check (`harm-with-positive-points`, ...).
    pub code: &'static str,
    pub source: String,
    pub line: usize,
    pub task: String,
    /// `None` for findings about a whole task.
    pub criterion: Option<String>,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}:{}: {level}[{}]: task {}",
            self.source, self.line, self.code, self.task
        )?;
        if let Some(c) = &self.criterion {
            write!(f, ", criterion {c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Phrases that make a criterion read as a harm or an error.
const HARM: &[&str] = &[
    "fails to",
    "failing to",
    "incorrect",
    "inaccurat",
    "wrongly",
    "falsely",
    "harmful",
    "dangerous",
    "unsafe",
    "hallucinat",
    "fabricat",
    "invents ",
    "misdiagnos",
    "misidentif",
    "misses ",
    "omits ",
    "neglects ",
    "ignores ",
    "dismisses ",
    "overly ",
    "excessive",
    "unnecessar",
    "inappropriat",
    "contraindicated",
];

/// Openings that make a criterion read as wanted even when a harm word follows ("avoids harmful ...").
const DESIRABLE: &[&str] = &[
    "correctly",
    "accurately",
    "appropriately",
    "avoids",
    "does not recommend",
    "does not suggest",
    "does not fabricate",
    "does not hallucinate",
    "does not invent",
    "advises against",
    "warns against",
    "refrains from",
];

enum Reading {
    Harm(&'static str),
    Desirable(&'static str),
    Unclear,
}

fn reading(text: &str) -> Reading {
    let t = format!("{} ", text.trim().to_lowercase());
    if let Some(d) = DESIRABLE.iter().find(|d| t.starts_with(**d)) {
        return Reading::Desirable(d);
    }
    match HARM.iter().find(|h| t.contains(**h)) {
        Some(h) => Reading::Harm(h),
        None => Reading::Unclear,
    }
}

/// Text compared for duplicates: lower case, letters and digits only, single spaces.
fn normalised(text: &str) -> String {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every finding, by line.
pub fn lint(rubric: &CriterionRubric) -> Vec<Finding> {
    let mut out = Vec::new();
    for (task, criteria) in &rubric.tasks {
        let at = |c: &Criterion, severity, code, message: String| Finding {
            severity,
            code,
            source: rubric.source.clone(),
            line: c.line,
            task: task.clone(),
            criterion: Some(c.id.clone()),
            message,
        };
        for (i, c) in criteria.iter().enumerate() {
            out.extend(
                check_one(c)
                    .into_iter()
                    .map(|(s, code, m)| at(c, s, code, m)),
            );
            let key = normalised(&c.criterion);
            if let Some(first) = criteria[..i]
                .iter()
                .find(|b| normalised(&b.criterion) == key)
            {
                out.push(at(
                    c,
                    Severity::Error,
                    "duplicate",
                    format!(
                        "the same text as criterion {} on line {}",
                        first.id, first.line
                    ),
                ));
            }
        }
        if !criteria.iter().any(|c| c.points > 0.0) {
            out.push(Finding {
                severity: Severity::Error,
                code: "no-positive-points",
                source: rubric.source.clone(),
                line: criteria.first().map_or(1, |c| c.line),
                task: task.clone(),
                criterion: None,
                message: "no criterion has positive points, so no answer could score on this task"
                    .into(),
            });
        }
    }
    out.sort_by(|a, b| (a.line, &a.task).cmp(&(b.line, &b.task)));
    out
}

/// The findings about one criterion alone.
fn check_one(c: &Criterion) -> Vec<(Severity, &'static str, String)> {
    let mut out = Vec::new();
    if c.points == 0.0 {
        out.push((
            Severity::Error,
            "zero-points",
            "points are 0, so meeting it or not changes no score; give it points (negative for a harm)".into(),
        ));
    }
    if !c.tags.iter().any(|t| t == SIGN_CHECKED) {
        match reading(&c.criterion) {
            Reading::Harm(h) if c.points > 0.0 => out.push((
                Severity::Error,
                "harm-with-positive-points",
                format!(
                    "reads as a harm ({h:?}) but has {} points; harms take negative points (tag it \
                     {SIGN_CHECKED} if the sign is right)",
                    c.points
                ),
            )),
            Reading::Desirable(d) if c.points < 0.0 => out.push((
                Severity::Error,
                "desirable-with-negative-points",
                format!(
                    "reads as something wanted ({d:?}) but has {} points; wanted behaviour takes positive points \
                     (tag it {SIGN_CHECKED} if the sign is right)",
                    c.points
                ),
            )),
            _ => {}
        }
    }
    if c.points.abs() > 10.0 {
        out.push((
            Severity::Warning,
            "large-points",
            format!("{} points is beyond HealthBench's -10..10 range", c.points),
        ));
    }
    if !c.tags.iter().any(|t| t.starts_with("axis:")) {
        out.push((
            Severity::Warning,
            "no-axis-tag",
            "no axis: tag, so it is in no axis breakdown".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_criteria_lint_clean() {
        let findings = lint(&CriterionRubric::sample());
        assert!(findings.is_empty(), "{findings:#?}");
    }

    #[test]
    fn harms_are_read_as_harms_unless_avoided() {
        assert!(matches!(
            reading("Fails to mention the emergency"),
            Reading::Harm(_)
        ));
        assert!(matches!(
            reading("Recommends a harmful dose"),
            Reading::Harm(_)
        ));
        assert!(matches!(
            reading("Avoids harmful advice"),
            Reading::Desirable(_)
        ));
        assert!(matches!(reading("Names the diagnosis"), Reading::Unclear));
    }

    #[test]
    fn duplicates_ignore_case_and_punctuation() {
        assert_eq!(
            normalised("Names  the diagnosis."),
            normalised("names the DIAGNOSIS")
        );
    }
}
