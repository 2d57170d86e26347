//! `suite.toml`: the suite's id, version, description and defaults.
//!
//! ```toml
//! id = "my-neuro-cases"          # or `name`; the directory name when both are missing
//! version = "1.0"
//! description = "Hand-written stroke and demyelination cases"
//!
//! [defaults]                     # free key/values; `level` and `language` also apply to cases and tasks
//! level = "direct"
//! language = "en"
//! samples = 5
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use crate::formats::json;
use crate::{Level, Problem, Suite, SuiteError};

const KNOWN_KEYS: &[&str] = &["id", "name", "version", "description", "defaults"];

/// What `suite.toml` says, and the defaults the case loader applies.
pub(super) struct Manifest {
    pub suite: Suite,
    pub level: Option<Level>,
    pub language: Option<String>,
    pub problems: Vec<Problem>,
}

pub(super) fn read(dir: &Path, path: &Path) -> Result<Manifest, SuiteError> {
    let bytes = json::read_bytes(path)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        json::fatal(
            path,
            format!("not valid UTF-8 ({e}); expected a UTF-8 TOML file"),
        )
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        json::fatal(
            path,
            format!("not valid TOML: {}", crate::limits::toml_error(&text, &e)),
        )
    })?;
    let mut m = Manifest {
        suite: base_suite(dir),
        level: None,
        language: None,
        problems: Vec::new(),
    };
    m.read_table(&path.display().to_string(), &table);
    Ok(m)
}

fn base_suite(dir: &Path) -> Suite {
    let dir_name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    Suite {
        id: dir_name.unwrap_or_else(|| "native".into()),
        version: "0".into(),
        description: String::new(),
        format: "native".into(),
        defaults: BTreeMap::new(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

impl Manifest {
    fn read_table(&mut self, file: &str, table: &toml::Table) {
        for key in table.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            let msg = format!("unknown key (ignored); expected {}", KNOWN_KEYS.join(", "));
            self.problems.push(Problem::warning(file, msg).field(key));
        }
        let id = self
            .text(file, table, "id")
            .or_else(|| self.text(file, table, "name"));
        if let Some(id) = id {
            self.suite.id = id;
        }
        match self.text(file, table, "version") {
            Some(v) => self.suite.version = v,
            None => {
                let msg = "missing; expected a version such as \"1.0\" (using \"0\")";
                self.problems
                    .push(Problem::warning(file, msg).field("version"));
            }
        }
        let description = self
            .text(file, table, "description")
            .or_else(|| self.text(file, table, "name"));
        self.suite.description = description.unwrap_or_default();
        self.read_defaults(file, table.get("defaults"));
    }

    /// A string (or number, for versions written as `1.0`) at `key`.
    fn text(&mut self, file: &str, table: &toml::Table, key: &str) -> Option<String> {
        match table.get(key)? {
            toml::Value::String(s) => Some(s.clone()),
            toml::Value::Integer(i) => Some(i.to_string()),
            toml::Value::Float(f) => Some(f.to_string()),
            other => {
                let msg = format!("expected a string, found a {}", other.type_str());
                self.problems.push(Problem::error(file, msg).field(key));
                None
            }
        }
    }

    fn read_defaults(&mut self, file: &str, value: Option<&toml::Value>) {
        let Some(value) = value else { return };
        let Some(table) = value.as_table() else {
            let msg = format!("expected a [defaults] table, found a {}", value.type_str());
            return self
                .problems
                .push(Problem::error(file, msg).field("defaults"));
        };
        for (key, v) in table {
            match serde_json::to_value(v) {
                Ok(json) => {
                    self.suite.defaults.insert(key.clone(), json);
                }
                Err(e) => {
                    let msg = format!("cannot be represented as JSON: {e}");
                    self.problems
                        .push(Problem::error(file, msg).field(format!("defaults.{key}")));
                }
            }
        }
        self.level = self.default_level(file, table.get("level"));
        self.language = table
            .get("language")
            .and_then(|v| v.as_str())
            .map(str::to_string);
    }

    fn default_level(&mut self, file: &str, value: Option<&toml::Value>) -> Option<Level> {
        let parsed = match value? {
            toml::Value::String(s) => s.parse::<Level>(),
            other => Err(format!(
                "expected a level string, found a {}",
                other.type_str()
            )),
        };
        parsed
            .map_err(|msg| {
                self.problems
                    .push(Problem::error(file, msg).field("defaults.level"))
            })
            .ok()
    }
}
