//! Task filters such as `image_organ=HEAD` or `family!=closed_vqa`.

use std::fmt;
use std::str::FromStr;

use crate::{Case, Suite, Task};

/// `KEY=VALUE` keeps tasks whose value matches; `KEY!=VALUE` keeps the others.
///
/// The value is looked up in the task's metadata, then the case's metadata, then the built-in keys `family`,
/// `level`, `case_id`, `task_id` and `language`. Comparison ignores ASCII case. A task without the key fails
/// `=` and passes `!=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub key: String,
    pub value: String,
    pub negate: bool,
}

impl FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (key, value, negate) = match s.split_once("!=") {
            Some((k, v)) => (k, v, true),
            None => match s.split_once('=') {
                Some((k, v)) => (k, v, false),
                None => return Err(format!("filter {s:?}: expected KEY=VALUE or KEY!=VALUE")),
            },
        };
        if key.trim().is_empty() {
            return Err(format!(
                "filter {s:?}: the key before '=' is empty; expected KEY=VALUE"
            ));
        }
        Ok(Filter {
            key: key.trim().to_string(),
            value: value.trim().to_string(),
            negate,
        })
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.negate { "!=" } else { "=" };
        write!(f, "{}{op}{}", self.key, self.value)
    }
}

impl Filter {
    pub fn matches(&self, case: &Case, task: &Task) -> bool {
        let hit =
            lookup(&self.key, case, task).is_some_and(|v| v.eq_ignore_ascii_case(&self.value));
        hit != self.negate
    }
}

fn lookup<'a>(key: &str, case: &'a Case, task: &'a Task) -> Option<&'a str> {
    if let Some(v) = task.metadata.get(key).or_else(|| case.metadata.get(key)) {
        return Some(v);
    }
    match key {
        "family" => Some(task.family.as_str()),
        "level" => Some(task.level.as_str()),
        "case_id" | "case" => Some(&case.id),
        "task_id" | "task" => Some(&task.id),
        "language" => case.language.as_deref(),
        _ => None,
    }
}

/// Drops tasks failing any filter, then cases left without tasks.
pub(super) fn apply(filters: &[Filter], suite: &mut Suite) {
    if filters.is_empty() {
        return;
    }
    for case in &mut suite.cases {
        let tasks = std::mem::take(&mut case.tasks);
        let kept = tasks
            .into_iter()
            .filter(|t| filters.iter().all(|f| f.matches(case, t)))
            .collect();
        case.tasks = kept;
    }
    suite.cases.retain(|c| !c.tasks.is_empty());
}
