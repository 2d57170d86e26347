//! Problems found while loading a suite: each names the file, the case, the field, and what was expected.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// One problem in a suite's input. Loaders collect these instead of stopping at the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub severity: Severity,
    /// The file the problem is in.
    pub file: String,
    /// The case id, where one is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_id: Option<String>,
    /// The field (JSON path-like), where one applies, e.g. `images[2]` or `questions[0].question_text`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
    /// A short name of what went wrong (`image not found`), shared by the problems of one kind so that a summary
    /// can count them; `None` where a loader does not name it. (A boxed str: problems are returned as errors,
    /// which are kept small.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Box<str>>,
}

impl Problem {
    pub fn error(file: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            file: file.into(),
            case_id: None,
            field: None,
            message: message.into(),
            kind: None,
        }
    }

    pub fn warning(file: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(file, message)
        }
    }

    pub fn case(mut self, case_id: impl Into<String>) -> Self {
        self.case_id = Some(case_id.into());
        self
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into().into_boxed_str());
        self
    }

    /// What problems are counted together by: the kind where named, else the field, else the message.
    pub fn group(&self) -> String {
        let field = self.field.as_ref().map(|f| format!("field {f}"));
        self.kind
            .as_deref()
            .map(str::to_string)
            .or(field)
            .unwrap_or_else(|| self.message.clone())
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Problems of one group ([`Problem::group`]): how many, and the first few.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProblemGroup {
    pub group: String,
    pub count: usize,
    pub examples: Vec<Problem>,
}

/// `problems` counted by group, each with its first `examples`, in the order each group first appears; so that
/// thousands of one kind (unfound images) do not hide the few of another (a class misspelt).
pub fn group_problems(problems: &[Problem], examples: usize) -> Vec<ProblemGroup> {
    let mut groups: Vec<ProblemGroup> = Vec::new();
    for p in problems {
        let key = p.group();
        let at = match groups.iter().position(|g| g.group == key) {
            Some(i) => i,
            None => {
                groups.push(ProblemGroup {
                    group: key,
                    count: 0,
                    examples: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[at];
        g.count += 1;
        if g.examples.len() < examples {
            g.examples.push(p.clone());
        }
    }
    groups
}

/// The most characters of a problem's message printed: a message quoting a long value is cut, saying how much
/// was left out.
const MESSAGE_CHARS: usize = 1000;

/// One line, whatever the file held: every part is made inert for a terminal (control characters escaped) and
/// cut to a bounded excerpt, so that an id or a value from the file can neither act on the terminal nor flood it.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use nmb_table::terminal::{excerpt, excerpt_of};
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{sev}: {}", excerpt_of(&self.file, MESSAGE_CHARS))?;
        if let Some(c) = &self.case_id {
            write!(f, ": case {}", excerpt(c))?;
        }
        if let Some(fl) = &self.field {
            write!(f, ": field {}", excerpt(fl))?;
        }
        write!(f, ": {}", excerpt_of(&self.message, MESSAGE_CHARS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_prints_as_one_inert_bounded_line() {
        let p = Problem::error(
            "key.jsonl:3",
            format!("unknown case {:?}", "x".repeat(5000)),
        )
        .case("c\u{1b}[2J\u{1b}[Hfake\nerror: none")
        .field("case_id");
        let text = p.to_string();
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(
            text.contains("case c\\u{1b}[2J\\u{1b}[Hfake\\nerror: none: field case_id"),
            "{text}"
        );
        assert!(text.len() < 1200, "{}", text.len());
        assert!(text.ends_with("more bytes)"), "{text}");
    }
}
