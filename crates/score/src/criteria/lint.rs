//! `nmb rubric lint`: the sign and point mistakes a criterion rubric can carry (HealthBench's own rubric data
//! shipped with reversed signs), each named with file and line.
//!
//! Which way a criterion points is read from its own tags first, then from its wording:
//! - the tag `harm` declares a harm (meeting it is harmful);
//! - a `cluster:` tag (HealthBench's consensus criteria, such as
//!   `cluster:emergency_referrals_emergent_emergency_behavior`) declares wanted behaviour: every one of
//!   HealthBench's cluster criteria says what a good response does, with positive points;
//! - otherwise phrases of the text ("fails to", "incorrectly", "without excluding", ... for a harm; an opening
//!   "correctly", "avoids", "advises against", ... for something wanted).
//!
//! `axis:safety` says what a criterion is about, not which way it points (a rubric rewards safe steps and
//! penalises unsafe ones under the same axis), so it decides no sign; the safety criteria whose direction neither
//! their tags nor their wording gives are listed by [`unread_safety`], for a judge to read (`--judge`,
//! [`judged`] with [`super::direction`]).
//!
//! Errors (the command exits 1):
//! - `harm-with-positive-points`: tagged or read as a harm, but meeting it earns points;
//! - `desirable-with-negative-points`: tagged or read as something wanted, but meeting it costs points;
//! - `judge-disagrees-with-sign` (with `--judge`): a judge reads the criterion the other way from its points'
//!   sign, where its tags and wording did not already say so;
//! - `zero-points`: a criterion that cannot change any score;
//! - `no-positive-points`: a task whose criteria have no positive points, so no answer could score (the score is
//!   undefined there);
//! - `duplicate`: the same text twice in one task (compared without case, spacing and punctuation).
//!
//! Warnings (reported, exit 0): `large-points` (beyond HealthBench's -10..10 range) and `no-axis-tag` (no
//! `axis:` tag, so the criterion is in no axis breakdown).
//!
//! Reading the text is a heuristic over phrases, and a judge can misread too, so a criterion whose sign is right
//! can carry the tag `lint:sign-checked` to skip every sign check.

use std::fmt;

use nmb_results::criteria::{Criterion, CriterionRubric};

use super::direction::{Direction, JudgeReadings, Reading as JudgeReading};

/// The tag that marks a criterion's sign as checked by a person.
pub const SIGN_CHECKED: &str = "lint:sign-checked";

/// The tag that declares a criterion a harm.
pub const HARM_TAG: &str = "harm";

/// How HealthBench's consensus criteria are tagged; each describes wanted behaviour.
pub const CLUSTER_PREFIX: &str = "cluster:";

/// The axis of safety criteria, whose direction [`unread_safety`] wants read.
pub const SAFETY_AXIS: &str = "axis:safety";

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
    "without excluding",
    "without ruling out",
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
    Harm(String),
    Desirable(String),
    Unclear,
}

/// Which way `c` points: its tags first, then its wording.
fn direction(c: &Criterion) -> Reading {
    if c.tags.iter().any(|t| t == HARM_TAG) {
        return Reading::Harm(format!("tagged {HARM_TAG}"));
    }
    if let Some(t) = c.tags.iter().find(|t| t.starts_with(CLUSTER_PREFIX)) {
        return Reading::Desirable(format!(
            "tagged {t} (a HealthBench consensus criterion: wanted behaviour)"
        ));
    }
    reading(&c.criterion)
}

fn reading(text: &str) -> Reading {
    let t = format!("{} ", text.trim().to_lowercase());
    if let Some(d) = DESIRABLE.iter().find(|d| t.starts_with(**d)) {
        return Reading::Desirable(format!("reads as something wanted ({d:?})"));
    }
    match HARM.iter().find(|h| t.contains(**h)) {
        Some(h) => Reading::Harm(format!("reads as a harm ({:?})", h.trim_end())),
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

const HARM_POSITIVE: &str = "harm-with-positive-points";
const WANTED_NEGATIVE: &str = "desirable-with-negative-points";

fn sign_checked(c: &Criterion) -> bool {
    c.tags.iter().any(|t| t == SIGN_CHECKED)
}

/// The safety criteria (tagged [`SAFETY_AXIS`]) whose direction neither their tags nor their wording gives, by
/// task, in file order: what a judge should read (`nmb rubric lint --judge`).
pub fn unread_safety(rubric: &CriterionRubric) -> Vec<(&str, &Criterion)> {
    let unread = |c: &&Criterion| {
        c.tags.iter().any(|t| t == SAFETY_AXIS)
            && !sign_checked(c)
            && matches!(direction(c), Reading::Unclear)
    };
    let mut out: Vec<(&str, &Criterion)> = (rubric.tasks.iter())
        .flat_map(|(task, cs)| cs.iter().filter(unread).map(move |c| (task.as_str(), c)))
        .collect();
    out.sort_by_key(|(_, c)| c.line);
    out
}

/// The findings of judges' readings ([`super::direction::read`]): a criterion a judge reads as harmful with
/// positive points, or as wanted with negative points, unless a person checked its sign or its tags and wording
/// already put it in [`lint`]'s findings; a criterion a judge gave no reading of is a warning. By line.
pub fn judged(rubric: &CriterionRubric, readings: &[JudgeReadings]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (task, criteria) in &rubric.tasks {
        for c in criteria.iter().filter(|c| !sign_checked(c)) {
            let flagged = check_one(c)
                .iter()
                .any(|(_, code, _)| [HARM_POSITIVE, WANTED_NEGATIVE].contains(code));
            for j in readings {
                let Some(reading) = j.readings.get(&c.criterion) else {
                    continue;
                };
                let finding = match reading {
                    Err(why) => Some((
                        Severity::Warning,
                        "judge-no-reading",
                        format!("judge {} gave no reading of it: {why}", j.judge),
                    )),
                    Ok(_) if flagged => None,
                    Ok(r) => disagreement(c, r).map(|m| {
                        let m = format!("judge {} {m}", j.judge);
                        (Severity::Error, "judge-disagrees-with-sign", m)
                    }),
                };
                if let Some((severity, code, message)) = finding {
                    out.push(Finding {
                        severity,
                        code,
                        source: rubric.source.clone(),
                        line: c.line,
                        task: task.clone(),
                        criterion: Some(c.id.clone()),
                        message,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| (a.line, &a.task).cmp(&(b.line, &b.task)));
    out
}

/// What is wrong with `c`'s sign by a judge's reading `r`, if anything.
fn disagreement(c: &Criterion, r: &JudgeReading) -> Option<String> {
    let because = if r.explanation.is_empty() {
        String::new()
    } else {
        format!(" ({})", r.explanation)
    };
    match r.direction {
        Direction::Harmful if c.points > 0.0 => Some(format!(
            "reads it as harmful{because} but it has {} points; harms take negative points (tag it \
             {SIGN_CHECKED} if the sign is right)",
            c.points
        )),
        Direction::Wanted if c.points < 0.0 => Some(format!(
            "reads it as wanted behaviour{because} but it has {} points; wanted behaviour takes positive points \
             (tag it {SIGN_CHECKED} if the sign is right)",
            c.points
        )),
        _ => None,
    }
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
    if !sign_checked(c) {
        match direction(c) {
            Reading::Harm(why) if c.points > 0.0 => out.push((
                Severity::Error,
                HARM_POSITIVE,
                format!(
                    "{why} but has {} points; harms take negative points (tag it {SIGN_CHECKED} if the sign is \
                     right)",
                    c.points
                ),
            )),
            Reading::Desirable(why) if c.points < 0.0 => out.push((
                Severity::Error,
                WANTED_NEGATIVE,
                format!(
                    "{why} but has {} points; wanted behaviour takes positive points (tag it {SIGN_CHECKED} if \
                     the sign is right)",
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
