//! Running evaluations to their end: one ([`job`]), a study's matrix of them ([`run_cells`]), a prompt sweep
//! ([`sweep`]), a person's answers ([`HumanRun`]) and a model's answers imported from another program's output
//! ([`ImportedRun`]). The CLI only parses, follows ([`job::Watch`]) and prints.
//!
//! [`job::run`] carries one [`EvalConfig`] through asking ([`nmb_run::evaluate`]), scoring
//! ([`nmb_score::score_suite`], judges connected by [`job::connect_judge`]) and its report. Every way of running
//! an evaluation goes through it, so each resumes, reuses stored answers and scores exactly as `nmb eval` does.
//!
//! A study is one run file (TOML) that names the models, suites, prompt templates, judges and report of a whole
//! comparison. This crate owns the run file's shape ([`StudyFile`]), reading it with errors that name the key and
//! line ([`read`]), and the matrix ([`Study::cells`]): one [`Cell`] per suite × model × template, each with the
//! [`EvalConfig`] of the `nmb eval` it stands for. It also owns what a study decides around its cells: the
//! budget under a cap ([`check_cap`], [`spent`], [`Budget`]), the dry run's estimates ([`CellEstimate`],
//! [`Totals`], [`dry_run_text`]), the scoring the run file asks for ([`scoring_config`]), the study's state file
//! ([`record`]) and its one report over every run ([`report`], with the models' [`prices`]). [`RUN_FILE_HELP`]
//! is the run file's format as `nmb eval --help` shows it.
//!
//! ```toml
//! [study]
//! name = "two-axis"
//! report = "reports/two-axis"   # default: nmb-report/<name>
//! formats = ["html", "md"]      # default: html, md, csv, json; leaderboard = true adds the site export
//! max_cost = 20.0               # dollars, estimated from tokens and the models' prices
//!
//! [[models]]
//! spec = "openai:gpt-4o"
//! name = "GPT-4o"
//! price = [2.5, 10.0]           # dollars per million input and output tokens; then optionally cached input
//!                               # and cache writes: price = [3.0, 15.0, 0.3, 3.75]
//! concurrency = 8
//! temperature = 0.7
//!
//! [[suites]]
//! spec = "vqa-rad:data/vqa-rad/testset.json"
//! filters = ["image_organ=HEAD"]
//! samples = 1
//!
//! [scoring]
//! judges = ["openai:gpt-4o-mini"]
//! bertscore = false
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nmb_plan::InputMode;
use nmb_requests::ModelSpec;
use nmb_results::cost::Price;
use nmb_run::{EvalConfig, TemplateChoice};
use serde::Deserialize;
use toml::Spanned;

mod budget;
mod human;
mod imported;
pub mod job;
mod outcome;
pub mod probe;
mod running;
pub mod sweep;

pub use budget::{check_cap, most_dollars, spent, Budget, BudgetError, CellEstimate, Totals};
pub use human::{HumanRun, HumanRunError};
pub use imported::{Imported, ImportedRun, ImportedRunError};
pub use outcome::{prices, record, report, OutcomeError, Stopped};
pub use running::{dry_run_text, run_cells, scoring_config, Ran, RunCellsError, Running};

/// The run file's format, as `nmb eval --help` shows it.
pub const RUN_FILE_HELP: &str = "\
A whole study from a run file: nmb eval --config study.toml [--dry-run] [-q] [--no-score]

  templates = [\"a.jinja\", \"b.jinja\"]   # optional, before any table: every suite x model runs with each
  probes = [\"anchoring\"]         # optional: every cell runs again with each context probe (as --probe),
  probe_seed = 1                  # its wrong diagnoses drawn with this seed (as --probe-seed)
  perturb = [\"mismatch\", \"blank\"]   # optional, before any table: every cell also runs once per
                                  # perturbation, named NAME [perturbation] (see --perturb)

  [study]
  name = \"two-axis\"              # runs are tagged with it; `nmb runs list` groups them
  report = \"reports/two-axis\"    # default nmb-report/<name>, relative to the run file
  formats = [\"html\", \"md\"]        # default all four; leaderboard = true adds the site export
  max_cost = 20.0                 # $: stop before the estimated spending could pass it

  [[models]]                      # repeat per model
  spec = \"openai:gpt-4o\"
  name = \"GPT-4o\"
  price = [2.5, 10.0]             # $ per million input, output tokens; optionally then
                                  # cached input, cache writes: [3.0, 15.0, 0.3, 3.75]
  concurrency = 8                 # also temperature, top_p, max_tokens, seed,
                                  # reasoning_effort = \"high\", reasoning_model = true,
                                  # thinking_budget = 4096, batch = true, no_grammar = true,
                                  # mmproj = \"mmproj.gguf\" (a local: model's projector),
                                  # max_response_mib = 64,
                                  # extra_body = { top_k = 20 }, temperature = \"none\"

  [[suites]]                      # repeat per suite; paths are relative to the run file
  spec = \"vqa-rad:data/testset.json\"
  filters = [\"image_organ=HEAD\"]  # also answers, level, samples, inputs, limit, map = {field = \"column\"}

  [scoring]
  judges = [\"openai:gpt-4o-mini\"]
  bertscore = false               # also rubric = false
  by = [\"sex\", \"age:0-40,40-65,65-\"]   # headline numbers per subgroup, as --by
  judge_images = \"same\"          # judges see the images the model saw, as --judge-images

Every suite runs with every model (and template), each exactly as the `nmb eval` it stands for, the
models at once through one scheduler (--concurrency caps the study, each model keeps its own limit);
running the same command again finishes what is missing and asks nothing twice. Then one report covers every run. --dry-run prints the matrix with its requests, tokens and
the most it can cost. A bad run file is refused with the key and line.";

/// Why a run file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("cannot read the run file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax or shape: toml's message names the line, the column and the key.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A probed cell whose suite cannot be read to choose its suggestions.
    #[error("{path}: probes: {name}: {source}")]
    Probe {
        path: PathBuf,
        name: String,
        #[source]
        source: nmb_suite::SourceError,
    },
    /// A value the shape allows but nmb does not.
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
}

/// The run file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    pub study: StudyMeta,
    #[serde(default)]
    pub models: Vec<Spanned<ModelEntry>>,
    #[serde(default)]
    pub suites: Vec<Spanned<SuiteEntry>>,
    /// Template files, relative to the run file, or bundled variants (`bundled:paraphrase-1`); each one is a
    /// variant every (suite, model) pair runs with.
    #[serde(default)]
    pub templates: Vec<Spanned<String>>,
    /// Context probes (`anchoring`, `sycophancy`): every cell runs once more with each, as `nmb eval --probe`.
    #[serde(default)]
    pub probes: Vec<Spanned<String>>,
    /// The seed that draws each probed task's wrong diagnosis [default: 1, as `--probe-seed`].
    #[serde(default)]
    pub probe_seed: Option<u64>,
    /// Image perturbations (`mismatch`, `noise:0.2`, ...): every cell runs unperturbed and once with each.
    #[serde(default)]
    pub perturb: Vec<Spanned<String>>,
    #[serde(default)]
    pub scoring: ScoringEntry,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyMeta {
    pub name: Spanned<String>,
    /// The study report's folder, relative to the run file.
    pub report: Option<String>,
    /// Report formats: html, md, csv, json (default all).
    pub formats: Option<Spanned<Vec<String>>>,
    /// Also write the leaderboard export (`leaderboard.json`, `data.js`).
    #[serde(default)]
    pub leaderboard: bool,
    /// Dollars: the study stops before an evaluation whose estimated cost would pass it.
    pub max_cost: Option<Spanned<f64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// `BACKEND:MODEL[@BASE_URL]`.
    pub spec: String,
    pub name: Option<String>,
    /// Dollars per million input and output tokens, then optionally cached input and cache writes (as
    /// `--price MODEL=IN,OUT[,CACHED[,WRITE]]`).
    pub price: Option<Vec<f64>>,
    pub concurrency: Option<u32>,
    /// A number, or `"none"` to send none (as `--temperature none`).
    pub temperature: Option<Sampled>,
    /// A number, or `"none"` (as `--top-p none`).
    pub top_p: Option<Sampled>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
    /// As `--reasoning-effort`: `none`, `minimal`, `low`, `medium` or `high`.
    pub reasoning_effort: Option<nmb_plan::ReasoningEffort>,
    /// As `--thinking-budget`.
    pub thinking_budget: Option<u32>,
    /// As `--reasoning-model`.
    #[serde(default)]
    pub reasoning_model: bool,
    /// As `--no-grammar`: a `local:` model decodes JSON tasks without their schema's grammar.
    #[serde(default)]
    pub no_grammar: bool,
    /// As `--mmproj`: a vision projector for a `local:` model; a relative path is relative to the run file.
    pub mmproj: Option<String>,
    /// As `--batch`: through the provider's batch API.
    #[serde(default)]
    pub batch: bool,
    /// As `--extra-body`: fields added to the top level of every request body (a table).
    pub extra_body: Option<BTreeMap<String, serde_json::Value>>,
    /// As `--max-response-mib`: the most MiB one response of this model may take.
    pub max_response_mib: Option<u64>,
}

/// A sampling parameter in a run file: a number, or `"none"` to send none.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Sampled {
    Value(f64),
    Unsent(NoneWord),
}

/// The word `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoneWord {
    None,
}

impl Sampled {
    /// The number, when one was given.
    pub fn value(self) -> Option<f64> {
        match self {
            Sampled::Value(v) => Some(v),
            Sampled::Unsent(_) => None,
        }
    }
}

impl ModelEntry {
    /// The price the run file gives, checked as `--price` checks one; `None` without `price`.
    pub fn price(&self) -> Option<Result<Price, String>> {
        self.price.as_deref().map(Price::from_rates)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteEntry {
    /// As `nmb eval --suite` takes it; a relative path is relative to the run file.
    pub spec: String,
    pub answers: Option<String>,
    #[serde(default)]
    pub filters: Vec<String>,
    pub level: Option<String>,
    pub samples: Option<u32>,
    pub inputs: Option<String>,
    pub limit: Option<u64>,
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// As `nmb eval --images-root`; a relative path is relative to the run file.
    pub images_root: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoringEntry {
    #[serde(default)]
    pub judges: Vec<String>,
    /// BERTScore of rationales (on by default, as for `nmb eval`).
    pub bertscore: Option<bool>,
    /// Rubric grading by the judges (on by default when there are judges).
    pub rubric: Option<bool>,
    /// Subgroup fields, as `nmb eval --by` takes them (`["sex", "age:0-40,40-65,65-"]`).
    #[serde(default)]
    pub by: Vec<String>,
    /// What judges see of the images the models were shown, as `nmb eval --judge-images` (`"none"`, `"same"`).
    pub judge_images: Option<nmb_score::JudgeImages>,
}

/// A checked run file and where it lives.
#[derive(Debug, Clone)]
pub struct Study {
    pub path: PathBuf,
    pub file: StudyFile,
}

/// One evaluation of the matrix.
#[derive(Debug, Clone)]
pub struct Cell {
    /// 1-based position in the matrix.
    pub index: usize,
    pub model: String,
    /// The name reports show: the model's name, with the template's stem when the study has templates.
    pub name: String,
    pub suite: String,
    pub template: Option<PathBuf>,
    /// The model's price, when it has one.
    pub price: Option<Price>,
    /// The evaluation this cell runs.
    pub config: EvalConfig,
}

const LEVELS: [&str; 3] = ["direct", "complex", "multi_turn"];
const INPUTS: [&str; 3] = ["full", "text", "images"];

/// Reads and checks a run file.
pub fn read(path: &Path) -> Result<Study, StudyError> {
    let text = nmb_suite::limits::read_to_string_io(path).map_err(|source| StudyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses and checks run-file text; `path` is where relative paths start and what errors name.
pub fn parse(path: &Path, text: &str) -> Result<Study, StudyError> {
    let file: StudyFile = toml::from_str(text).map_err(|e| StudyError::Parse {
        path: path.to_path_buf(),
        message: nmb_suite::limits::toml_error(text, &e),
    })?;
    let study = Study {
        path: path.to_path_buf(),
        file,
    };
    study.check(text)?;
    Ok(study)
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line where `key` (the last part of a dotted key path) is set inside the table spanning `span`, else the
/// table's first line.
fn key_line(text: &str, span: std::ops::Range<usize>, key: &str) -> usize {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    // A table's span may cover only its header: look on to the next header.
    let start = span.start.min(text.len());
    let end = text[start..]
        .char_indices()
        .skip(1)
        .find(|&(i, _)| text[start + i..].starts_with("\n["))
        .map_or(text.len(), |(i, _)| start + i)
        .max(span.end.min(text.len()));
    let table = &text[start..end];
    let at = table.lines().scan(0, |offset, line| {
        let here = *offset;
        *offset += line.len() + 1;
        Some((here, line))
    });
    let found = at
        .filter(|(_, line)| {
            let l = line.trim_start();
            l.strip_prefix(leaf)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(offset, _)| start + offset)
        .next();
    line_of(text, found.unwrap_or(start))
}

impl Study {
    pub fn name(&self) -> &str {
        self.file.study.name.get_ref()
    }

    /// The folder the run file is in: relative paths start there.
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// The study report's folder.
    pub fn report_dir(&self) -> PathBuf {
        match &self.file.study.report {
            Some(r) => self.dir().join(r),
            None => PathBuf::from("nmb-report").join(self.name()),
        }
    }

    /// The report formats asked for, or `None` for all.
    pub fn formats(&self) -> Option<&[String]> {
        self.file
            .study
            .formats
            .as_ref()
            .map(|f| f.get_ref().as_slice())
    }

    pub fn max_cost(&self) -> Option<f64> {
        self.file.study.max_cost.as_ref().map(|c| *c.get_ref())
    }

    fn check(&self, text: &str) -> Result<(), StudyError> {
        let invalid =
            |span: std::ops::Range<usize>, key: String, message: String| StudyError::Invalid {
                path: self.path.clone(),
                line: key_line(text, span, &key),
                key,
                message,
            };
        let f = &self.file;
        let name = &f.study.name;
        if name.get_ref().trim().is_empty() || name.get_ref().contains(['/', '\\']) {
            let msg =
                "expected a non-empty name without slashes (it names the report's folder)".into();
            return Err(invalid(name.span(), "study.name".into(), msg));
        }
        if let Some(formats) = &f.study.formats {
            if let Some(bad) = formats
                .get_ref()
                .iter()
                .find(|x| !["html", "md", "markdown", "csv", "json"].contains(&x.as_str()))
            {
                let msg = format!("{bad:?}: expected html, md, csv or json");
                return Err(invalid(formats.span(), "study.formats".into(), msg));
            }
        }
        if let Some(c) = &f.study.max_cost {
            if !(c.get_ref().is_finite() && *c.get_ref() >= 0.0) {
                let msg = format!("{} is not a number of dollars >= 0", c.get_ref());
                return Err(invalid(c.span(), "study.max_cost".into(), msg));
            }
        }
        if f.models.is_empty() || f.suites.is_empty() {
            let key = if f.models.is_empty() {
                "models"
            } else {
                "suites"
            };
            let msg = format!("expected at least one [[{key}]] table");
            return Err(invalid(0..0, key.into(), msg));
        }
        let mut names = BTreeMap::new();
        for (i, m) in f.models.iter().enumerate() {
            let key = |k: &str| format!("models[{i}].{k}");
            let model = m.get_ref();
            if let Some(Err(e)) = model.price() {
                let msg = format!(
                    "{:?}: {e}; expected [input, output, cached, write] dollars per million tokens, the last \
                     two optional",
                    model.price.as_deref().unwrap_or_default()
                );
                return Err(invalid(m.span(), key("price"), msg));
            }
            if let Err(e) = ModelSpec::parse(&model.spec) {
                return Err(invalid(m.span(), key("spec"), e.to_string()));
            }
            if let Some(t) = model
                .temperature
                .and_then(Sampled::value)
                .filter(|t| !(t.is_finite() && *t >= 0.0))
            {
                let msg = format!("{t}: expected a number >= 0");
                return Err(invalid(m.span(), key("temperature"), msg));
            }
            if let Some(p) = model
                .top_p
                .and_then(Sampled::value)
                .filter(|p| !(p.is_finite() && *p > 0.0 && *p <= 1.0))
            {
                let msg = format!("{p}: expected a number in (0, 1]");
                return Err(invalid(m.span(), key("top_p"), msg));
            }
            if model.max_tokens == Some(0) {
                let msg = "expected at least 1".into();
                return Err(invalid(m.span(), key("max_tokens"), msg));
            }
            if model.concurrency == Some(0) {
                return Err(invalid(
                    m.span(),
                    key("concurrency"),
                    "expected at least 1".into(),
                ));
            }
            if model.max_response_mib == Some(0) {
                let msg = "expected at least 1".into();
                return Err(invalid(m.span(), key("max_response_mib"), msg));
            }
            let shown = self.model_name(model);
            if let Some(first) = names.insert(shown.clone(), i) {
                let msg = format!(
                    "{shown:?} is also the name of models[{first}]; give each model its own `name`"
                );
                return Err(invalid(m.span(), key("name"), msg));
            }
        }
        for (i, s) in f.suites.iter().enumerate() {
            let key = |k: &str| format!("suites[{i}].{k}");
            let suite = s.get_ref();
            if let Some(l) = suite.level.as_deref().filter(|l| !LEVELS.contains(l)) {
                let msg = format!("{l:?}: expected one of {}", LEVELS.join(", "));
                return Err(invalid(s.span(), key("level"), msg));
            }
            if let Some(m) = suite.inputs.as_deref().filter(|m| !INPUTS.contains(m)) {
                let msg = format!("{m:?}: expected one of {}", INPUTS.join(", "));
                return Err(invalid(s.span(), key("inputs"), msg));
            }
            if let Some(bad) = suite
                .filters
                .iter()
                .find(|f| f.parse::<nmb_suite::Filter>().is_err())
            {
                let msg = format!("{bad:?}: expected KEY=VALUE or KEY!=VALUE");
                return Err(invalid(s.span(), key("filters"), msg));
            }
            if suite.samples.is_some_and(|n| !(1..=100).contains(&n)) || suite.limit == Some(0) {
                let k = if suite.limit == Some(0) {
                    "limit"
                } else {
                    "samples"
                };
                let msg = "expected samples from 1 to 100 and a limit of at least 1".into();
                return Err(invalid(s.span(), key(k), msg));
            }
        }
        for p in &f.probes {
            if let Err(msg) = p.get_ref().parse::<nmb_plan::ProbeKind>() {
                return Err(invalid(p.span(), "probes".into(), msg));
            }
        }
        for p in &f.perturb {
            if let Err(e) = p.get_ref().parse::<nmb_imaging::Perturbation>() {
                return Err(invalid(p.span(), "perturb".into(), e.to_string()));
            }
        }
        for t in f
            .templates
            .iter()
            .filter(|t| !t.get_ref().starts_with("bundled:"))
        {
            let file = self.dir().join(t.get_ref());
            if !file.is_file() {
                let msg = format!(
                    "{} is not a file (template paths are relative to the run file)",
                    file.display()
                );
                return Err(invalid(t.span(), "templates".into(), msg));
            }
        }
        Ok(())
    }

    fn model_name(&self, m: &ModelEntry) -> String {
        m.name
            .clone()
            .unwrap_or_else(|| m.spec.split('@').next().unwrap_or(&m.spec).to_string())
    }

    /// A suite spec with its path made relative to the run file (`sample` and other names stay as they are).
    fn suite_spec(&self, spec: &str) -> String {
        let (prefix, rest) = match spec.split_once(':') {
            Some((p, r))
                if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') =>
            {
                (format!("{p}:"), r)
            }
            _ => (String::new(), spec),
        };
        let relative = self.dir().join(rest);
        if Path::new(rest).is_relative() && (relative.exists() || !prefix.is_empty()) {
            format!("{prefix}{}", relative.display())
        } else {
            spec.to_string()
        }
    }

    /// A template file relative to the run file, or a bundled variant (`bundled:NAME`) as it is.
    fn template(&self, t: &str) -> PathBuf {
        if t.starts_with("bundled:") {
            PathBuf::from(t)
        } else {
            self.dir().join(t)
        }
    }

    /// The matrix: every suite with every model, with every template when the study names templates, and
    /// unperturbed and with each perturbation when it names perturbations.
    pub fn cells(&self) -> Vec<Cell> {
        let f = &self.file;
        let templates: Vec<Option<PathBuf>> = if f.templates.is_empty() {
            vec![None]
        } else {
            f.templates
                .iter()
                .map(|t| Some(self.template(t.get_ref())))
                .collect()
        };
        let perturbs: Vec<Option<nmb_imaging::Perturbation>> = std::iter::once(None)
            .chain(
                f.perturb
                    .iter()
                    .filter_map(|p| p.get_ref().parse().ok())
                    .map(Some),
            )
            .collect();
        let mut cells = Vec::new();
        for suite in f.suites.iter().map(Spanned::get_ref) {
            for model in f.models.iter().map(Spanned::get_ref) {
                for (template, perturb) in templates
                    .iter()
                    .flat_map(|t| perturbs.iter().map(move |p| (t, p)))
                {
                    let name = match template {
                        Some(t) => format!(
                            "{} [{}]",
                            self.model_name(model),
                            t.file_stem()
                                .map(|s| s.to_string_lossy())
                                .unwrap_or_default()
                        ),
                        None => self.model_name(model),
                    };
                    let name = match perturb {
                        Some(p) => format!("{name} [{p}]"),
                        None => name,
                    };
                    let suite_spec = self.suite_spec(&suite.spec);
                    let mut config =
                        self.config(&suite_spec, suite, model, &name, template.as_deref());
                    config.perturb = perturb.clone();
                    cells.push(Cell {
                        index: cells.len() + 1,
                        model: model.spec.clone(),
                        config,
                        name,
                        suite: suite_spec,
                        template: template.clone(),
                        price: model.price().and_then(Result::ok),
                    });
                }
            }
        }
        cells
    }

    /// The matrix with its probed cells: after every cell of [`Study::cells`], each cell again with each of the
    /// run file's `probes`, named `NAME [probe]`, its suggestions drawn from its suite (read here).
    pub fn probed_cells(&self) -> Result<Vec<Cell>, StudyError> {
        let plain = self.cells();
        let kinds: Vec<nmb_plan::ProbeKind> = (self.file.probes.iter())
            .filter_map(|p| p.get_ref().parse().ok())
            .collect();
        let seed = self.file.probe_seed.unwrap_or(1);
        let mut cells = plain.clone();
        for kind in kinds {
            for cell in &plain {
                let config = probe::probed(&cell.config, kind, seed, Some(&cell.name)).map_err(
                    |source| StudyError::Probe {
                        path: self.path.clone(),
                        name: cell.name.clone(),
                        source,
                    },
                )?;
                cells.push(Cell {
                    index: cells.len() + 1,
                    name: config.name.clone().unwrap_or_default(),
                    config,
                    ..cell.clone()
                });
            }
        }
        Ok(cells)
    }

    /// The evaluation of one cell. Every value was checked by [`Study::check`]; one that still does not parse
    /// falls back to its default rather than stopping the study halfway.
    fn config(
        &self,
        suite_spec: &str,
        suite: &SuiteEntry,
        model: &ModelEntry,
        name: &str,
        template: Option<&Path>,
    ) -> EvalConfig {
        let source = nmb_suite::Source {
            spec: suite_spec.to_string(),
            answers: suite.answers.as_ref().map(|a| self.dir().join(a)),
            filters: suite
                .filters
                .iter()
                .filter_map(|f| f.parse().ok())
                .collect(),
            level: suite.level.as_deref().and_then(|l| l.parse().ok()),
            map: suite
                .map
                .iter()
                .map(|(f, c)| (f.clone(), c.clone()))
                .collect(),
            images_root: suite.images_root.as_ref().map(|r| self.dir().join(r)),
            split: None,
        };
        let spec = ModelSpec::parse(&model.spec).unwrap_or_else(|_| ModelSpec {
            backend: nmb_requests::BackendKind::OpenAi,
            model: model.spec.clone(),
            base_urls: Vec::new(),
        });
        let mut c = EvalConfig::new(source, spec);
        c.name = Some(name.to_string());
        c.study = Some(self.name().to_string());
        c.samples = suite.samples;
        c.limit = suite.limit;
        c.inputs = match suite.inputs.as_deref() {
            Some("text") => InputMode::Text,
            Some("images") => InputMode::Images,
            _ => InputMode::Full,
        };
        if let Some(n) = model.concurrency {
            c.limits.concurrency = n;
        }
        let p = &mut c.params;
        for (given, value, param) in [
            (
                model.temperature,
                &mut p.temperature,
                nmb_plan::SamplingParam::Temperature,
            ),
            (model.top_p, &mut p.top_p, nmb_plan::SamplingParam::TopP),
        ] {
            match given {
                Some(Sampled::Value(v)) => *value = v,
                Some(Sampled::Unsent(_)) => {
                    p.unsent.insert(param);
                }
                None => {}
            }
        }
        p.extra_body = model.extra_body.clone();
        p.max_tokens = model.max_tokens.unwrap_or(p.max_tokens);
        p.seed = model.seed;
        p.reasoning_effort = model.reasoning_effort;
        p.thinking_budget = model.thinking_budget;
        c.reasoning_model = model.reasoning_model;
        c.no_grammar = model.no_grammar;
        c.mmproj = model.mmproj.as_ref().map(|p| self.dir().join(p));
        c.limits.batch = model.batch;
        c.limits.max_response_mib = model.max_response_mib;
        c.template = template.map(|t| TemplateChoice::parse(&t.to_string_lossy()));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[study]
name = "two-axis"

[[models]]
spec = "openai:a@http://127.0.0.1:1/v1"
name = "A"
price = [1.0, 2.0]

[[models]]
spec = "openai:b@http://127.0.0.1:1/v1"

[[suites]]
spec = "sample"
samples = 1

[[suites]]
spec = "mcq:medqa/test.jsonl"
filters = ["meta_info=step1"]
limit = 5

[scoring]
bertscore = false
"#;

    #[test]
    fn the_matrix_is_every_suite_with_every_model() {
        let s = parse(Path::new("/studies/s.toml"), GOOD).unwrap();
        let cells = s.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[0].name, "A");
        assert_eq!(
            cells[1].name, "openai:b",
            "a spec without a name shows without its URL"
        );
        assert_eq!(
            cells[2].suite, "mcq:/studies/medqa/test.jsonl",
            "paths are relative to the run file"
        );
        let c = &cells[2].config;
        assert_eq!(c.suite.filters, vec!["meta_info=step1".parse().unwrap()]);
        assert_eq!(c.limit, Some(5));
        assert_eq!(c.model.to_string(), "openai:a@http://127.0.0.1:1/v1");
        assert_eq!(c.study.as_deref(), Some("two-axis"));
        assert_eq!(cells[2].price, Price::from_rates(&[1.0, 2.0]).ok());
        assert_eq!(s.report_dir(), PathBuf::from("nmb-report/two-axis"));
    }

    #[test]
    fn errors_name_the_key_and_the_line() {
        let typo = GOOD.replace("samples = 1", "sampels = 1");
        let e = parse(Path::new("s.toml"), &typo).unwrap_err().to_string();
        assert!(e.contains("sampels") && e.contains("line 15"), "{e}");
        let level = GOOD.replace("samples = 1", "level = \"deep\"");
        let e = parse(Path::new("s.toml"), &level).unwrap_err().to_string();
        assert!(
            e.contains("s.toml:15: suites[0].level") && e.contains("multi_turn"),
            "{e}"
        );
        let price = GOOD.replace("[1.0, 2.0]", "[1.0, -2.0]");
        let e = parse(Path::new("s.toml"), &price).unwrap_err().to_string();
        assert!(e.contains("s.toml:8: models[0].price"), "{e}");
        let twice = GOOD.replace(
            "spec = \"openai:b@http://127.0.0.1:1/v1\"",
            "spec = \"openai:b\"\nname = \"A\"",
        );
        let e = parse(Path::new("s.toml"), &twice).unwrap_err().to_string();
        assert!(e.contains("models[1].name"), "{e}");
        let format = GOOD.replace(
            "name = \"two-axis\"",
            "name = \"two-axis\"\nformats = [\"pdf\"]",
        );
        let e = parse(Path::new("s.toml"), &format).unwrap_err().to_string();
        assert!(e.contains("s.toml:4: study.formats"), "{e}");
        let none = "[study]\nname = \"x\"\n";
        let e = parse(Path::new("s.toml"), none).unwrap_err().to_string();
        assert!(e.contains("[[models]]"), "{e}");
        let effort = GOOD.replace("price = [1.0, 2.0]", "reasoning_effort = \"max\"");
        let e = parse(Path::new("s.toml"), &effort).unwrap_err().to_string();
        assert!(e.contains("line 8") && e.contains("`high`"), "{e}");
    }

    #[test]
    fn a_price_takes_cached_and_cache_write_rates_as_price_does() {
        let text = GOOD
            .replace("[1.0, 2.0]", "[3.0, 15.0, 0.3, 3.75]")
            .replace(
                "spec = \"openai:b@http://127.0.0.1:1/v1\"",
                "spec = \"openai:b@http://127.0.0.1:1/v1\"\nprice = [1, 4, 0.1]",
            );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let cells = s.cells();
        let flag =
            nmb_results::cost::Prices::from_specs(&["a=3,15,0.3,3.75", "b=1,4,0.1"]).unwrap();
        assert_eq!(cells[0].price, flag.for_model("a"), "as --price makes it");
        assert_eq!(cells[1].price, flag.for_model("b"));
        assert_eq!(cells[1].price.unwrap().cache_write_per_mtok, None);
        let prices = prices(&cells);
        assert_eq!(prices.for_model(&cells[0].model), flag.for_model("a"));
        let scoring = scoring_config(&s, &cells).unwrap();
        assert_eq!(
            scoring.prices.for_model(&cells[1].model),
            flag.for_model("b")
        );
    }

    #[test]
    fn scoring_by_is_the_scoring_configs_by_as_the_flag_gives_it() {
        let text = GOOD.replace(
            "bertscore = false",
            "bertscore = false\nby = [\"sex\", \" age:0-40,40- \"]",
        );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let scoring = scoring_config(&s, &s.cells()).unwrap();
        assert_eq!(scoring.by, vec!["sex", "age:0-40,40-"]);
        scoring.check().unwrap();
        let bad = text.replace("40-", "50-");
        let s = parse(Path::new("/studies/s.toml"), &bad).unwrap();
        let err = scoring_config(&s, &s.cells()).unwrap().check().unwrap_err();
        assert!(err.to_string().contains("`50-`"), "{err}");
        let default = scoring_config(&parse(Path::new("/s.toml"), GOOD).unwrap(), &[]).unwrap();
        assert!(default.by.is_empty());
    }

    #[test]
    fn scoring_judge_images_is_the_flags_value_and_a_local_judge_is_refused() {
        let text = GOOD.replace(
            "bertscore = false",
            "bertscore = false\njudge_images = \"same\"",
        );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let scoring = scoring_config(&s, &s.cells()).unwrap();
        assert_eq!(scoring.judge_images, nmb_score::JudgeImages::Same);
        let default = scoring_config(&parse(Path::new("/s.toml"), GOOD).unwrap(), &[]).unwrap();
        assert_eq!(default.judge_images, nmb_score::JudgeImages::None);
        let bad = text.replace("\"same\"", "\"all\"");
        let err = parse(Path::new("/studies/s.toml"), &bad).unwrap_err();
        assert!(err.to_string().contains("judge_images"), "{err}");
        let mut local = scoring;
        local.judges = vec![ModelSpec::parse("local:judge.gguf").unwrap()];
        let err = local.check().unwrap_err().to_string();
        assert!(
            err.contains("local:judge.gguf") && err.contains("images"),
            "{err}"
        );
    }

    #[test]
    fn a_model_can_leave_sampling_parameters_unsent_and_add_body_fields() {
        let text = GOOD.replace(
            "spec = \"openai:b@http://127.0.0.1:1/v1\"",
            "spec = \"openai:b@http://127.0.0.1:1/v1\"\ntemperature = \"none\"\ntop_p = 0.5\nextra_body = { top_k = 20, chat_template_kwargs = { enable_thinking = false } }",
        );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let cells = s.cells();
        let p = &cells[1].config.params;
        assert!(!p.sends_temperature() && p.sends_top_p());
        assert_eq!(p.top_p, 0.5);
        let extra = p.extra_body.as_ref().expect("extra body");
        assert_eq!(extra["top_k"], 20);
        assert_eq!(extra["chat_template_kwargs"]["enable_thinking"], false);
        assert!(
            cells[0].config.params.sends_temperature()
                && cells[0].config.params.extra_body.is_none()
        );
        let bad = GOOD.replace(
            "spec = \"openai:b@http://127.0.0.1:1/v1\"",
            "spec = \"openai:b@http://127.0.0.1:1/v1\"\ntemperature = \"off\"",
        );
        assert!(parse(Path::new("s.toml"), &bad).is_err());
    }

    /// `mmproj` gives a `local:` model its projector, relative to the run file; a model without one has none.
    #[test]
    fn a_models_projector_is_relative_to_the_run_file() {
        let text = GOOD.replace(
            "spec = \"openai:b@http://127.0.0.1:1/v1\"",
            "spec = \"local:models/m.gguf\"\nmmproj = \"models/mmproj.gguf\"",
        );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let cells = s.cells();
        assert_eq!(cells[0].config.mmproj, None);
        assert_eq!(
            cells[1].config.mmproj.as_deref(),
            Some(Path::new("/studies/models/mmproj.gguf"))
        );
    }

    #[test]
    fn a_bad_price_is_refused_with_its_key_and_line() {
        for (price, why) in [
            ("[1.0]", "at least the input and output rates"),
            ("[1.0, 2.0, 0.5, 2.5, 9.0]", "at most four rates"),
            ("[1.0, 2.0, -0.5]", "the cached input rate -0.5"),
            ("[1.0, 2.0, 0.5, inf]", "the cache write rate inf"),
            ("[nan, 2.0]", "the input rate NaN"),
        ] {
            let text = GOOD.replace("[1.0, 2.0]", price);
            let e = parse(Path::new("s.toml"), &text).unwrap_err().to_string();
            assert!(
                e.contains("s.toml:8: models[0].price") && e.contains(why),
                "{price}: {e}"
            );
        }
        let text = GOOD.replace("[1.0, 2.0]", "\"cheap\"");
        let e = parse(Path::new("s.toml"), &text).unwrap_err().to_string();
        assert!(e.contains("line 8") && e.contains("price"), "{e}");
    }

    #[test]
    fn a_model_takes_a_reasoning_effort_and_the_reasoning_model_switch() {
        let text = GOOD.replace(
            "price = [1.0, 2.0]",
            "reasoning_effort = \"high\"\nreasoning_model = true",
        );
        let s = parse(Path::new("/studies/s.toml"), &text).unwrap();
        let cells = s.cells();
        let (a, b) = (&cells[0].config, &cells[1].config);
        assert_eq!(
            a.params.reasoning_effort,
            Some(nmb_plan::ReasoningEffort::High)
        );
        assert!(a.reasoning_model);
        assert_eq!(b.params.reasoning_effort, None, "only the model that asks");
        assert!(!b.reasoning_model);
    }
}
