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
}

impl Problem {
    pub fn error(file: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            file: file.into(),
            case_id: None,
            field: None,
            message: message.into(),
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

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{sev}: {}", self.file)?;
        if let Some(c) = &self.case_id {
            write!(f, ": case {c}")?;
        }
        if let Some(fl) = &self.field {
            write!(f, ": field {fl}")?;
        }
        write!(f, ": {}", self.message)
    }
}
