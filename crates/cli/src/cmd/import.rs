//! `nmb import`: a clinician's answers to a suite, from a JSONL file, recorded as the run of model `human:NAME`
//! (a human baseline), scored, reported and compared like any model's run.
//!
//! The file is checked whole before anything is stored. Its answers are appended to the store's human answers
//! (an answer equal to the stored one is not appended again), and the run is built by the very evaluation
//! `nmb eval --model human:NAME --samples 1` runs, resuming the person's newest run on the suite when its
//! configuration still holds. `nmb review answer` builds its runs through the same [`HumanRun`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use nmb_requests::{BackendKind, ModelSpec};
use nmb_store::{now_ms, HumanAnswer, Store};
use nmb_suite::{Family, Suite, Task};
use serde_json::{Map, Value};

use nmb_run::{EvalConfig, Invocation, Resume};

use super::eval;
use crate::store_at::StoreAt;
use nmb_score::ScoringConfig;

pub const EXAMPLES: &str = "\
Examples:
  nmb import lee.jsonl --suite sample --as human:lee
  nmb import panel/park.jsonl --suite site:direct-diagnosis.json --answer-key key.jsonl --as human:park \\
      --display-name \"Neurologist B\" --json

ANSWERS.jsonl holds one JSON object per line:
  {\"task_id\": \"case_1/dx\", \"differential\": [\"Right MCA stroke\", \"Haemorrhage\"]}
  {\"task_id\": \"case_1/lesion\", \"answer\": \"Lesion type: acute infarct\\nLocation: right MCA territory\"}
  {\"task_id\": \"consult_1\", \"turn\": 1, \"answer\": \"Final diagnosis: multiple sclerosis\"}
`answer` is free text, scored as a model's answer would be; `differential` is a ranked list, most likely
first, written into the answer as the JSON the scorer reads (differential tasks only). `turn` (0 = the
opening question, the default) answers a later step of a multi-turn consult. Every line is checked first:
an unknown task id, an empty answer, both or neither of answer and differential, a turn the task does not
have, a task and turn given twice, or a line that is not JSON is listed with FILE:LINE and its field, and
nothing is stored. An answer the scorer could not read (no diagnosis in a differential task's answer, no
`Lesion type:` and `Location:` lines in a lesion task's) is a warning.

The answers are then appended to the store (an answer equal to the one stored is skipped; the newest answer
to a task and turn counts) and the run of human:NAME on the suite is built as `nmb eval --model human:NAME
--samples 1` would: a task without an answer is errored `no_answer` (never counted wrong) and answered when
a later import or `nmb review answer` supplies it. Importing the same file again resumes the same run; a
changed answer starts a new run. The run is scored at the end unless --no-score.";

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The answers: JSONL, one {"task_id", "answer" | "differential", "turn"} object per line
    #[arg(value_name = "ANSWERS.jsonl")]
    file: PathBuf,
    /// The suite answered: `sample`, a path, or FORMAT:PATH (as `nmb eval --suite`)
    #[arg(long, value_name = "SUITE")]
    suite: String,
    /// The suite's reference answers, joined by case_id (as `nmb eval --answers`)
    #[arg(long, value_name = "FILE")]
    answer_key: Option<PathBuf>,
    /// Who answered: human:NAME (NAME letters, digits, . _ -)
    #[arg(long = "as", value_name = "human:NAME")]
    human: String,
    /// The name reports show [default: "NAME (human)"]
    #[arg(long, value_name = "NAME")]
    display_name: Option<String>,
    /// Print one JSON object at the end (as `nmb eval --json`)
    #[arg(long)]
    json: bool,
    /// No progress output on stderr
    #[arg(long, short)]
    quiet: bool,
    /// Do not score the run (score it later with `nmb score RUN_ID`)
    #[arg(long)]
    no_score: bool,
    /// Score without BERTScore
    #[arg(long)]
    no_bertscore: bool,
}

pub fn run(args: ImportArgs, at: &StoreAt) -> Result<ExitCode> {
    let spec = human_spec(&args.human).context("--as")?;
    let suite = load_suite(&args.suite, args.answer_key.as_deref())?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let label = args.file.display().to_string();
    let checked = check_lines(&label, &text, &suite);
    for w in &checked.warnings {
        eprintln!("warning: {w}");
    }
    if !checked.problems.is_empty() {
        bail!(
            "{} problem(s) in {label}; nothing was stored:\n  {}",
            checked.problems.len(),
            checked.problems.join("\n  ")
        );
    }
    let source = args
        .file
        .file_name()
        .map_or_else(|| label.clone(), |n| n.to_string_lossy().into_owned());
    let store = at.open()?;
    let suite_hash = nmb_suite::suite_hash(&suite)?;
    let added = append(&store, &spec, &suite_hash, &checked.answers, &source)?;
    eprintln!(
        "{added} answer(s) stored from {label} ({} already stored)",
        checked.answers.len() - added
    );
    let human = HumanRun {
        suite: args.suite,
        answer_key: args.answer_key,
        spec,
        display_name: args.display_name,
        json: args.json,
        quiet: args.quiet,
        no_score: args.no_score,
        no_bertscore: args.no_bertscore,
    };
    human.build(at, &store, &suite_hash)?;
    Ok(ExitCode::SUCCESS)
}

/// `human:NAME`, refusing any other kind of model.
pub(super) fn human_spec(text: &str) -> Result<ModelSpec> {
    let spec = ModelSpec::parse(text)?;
    if spec.backend != BackendKind::Human {
        bail!("{text:?} is not a person: expected human:NAME");
    }
    Ok(spec)
}

/// Loads the suite (with its answer key), refusing one with errors, as `nmb eval` does.
pub(super) fn load_suite(suite: &str, answer_key: Option<&Path>) -> Result<Suite> {
    let source = nmb_suite::Source {
        answers: answer_key.map(Path::to_path_buf),
        ..nmb_suite::Source::new(suite)
    };
    Ok(source.load_checked(false)?.suite)
}

/// One answer of the file, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    line: usize,
    task_id: String,
    turn: u32,
    text: String,
}

/// What checking a file found.
#[derive(Debug, Default)]
struct Checked {
    answers: Vec<Line>,
    /// `FILE:LINE: FIELD: what is wrong`; any one means nothing is stored.
    problems: Vec<String>,
    warnings: Vec<String>,
}

/// Checks every line of `text` against the suite.
fn check_lines(file: &str, text: &str, suite: &Suite) -> Checked {
    let tasks: HashMap<&str, &Task> = suite.tasks().map(|(_, t)| (t.id.as_str(), t)).collect();
    let example = suite
        .tasks()
        .next()
        .map(|(_, t)| t.id.as_str())
        .unwrap_or("");
    let mut out = Checked::default();
    let mut seen: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{file}:{}", i + 1);
        if raw.trim().is_empty() {
            continue;
        }
        let line = match check_line(&at, raw, &tasks, &suite.id, example) {
            Ok(line) => line,
            Err(problems) => {
                out.problems.extend(problems);
                continue;
            }
        };
        let line = Line {
            line: i + 1,
            ..line
        };
        match seen.insert((line.task_id.clone(), line.turn), line.line) {
            Some(first) => out.problems.push(format!(
                "{at}: task_id: task {:?} turn {} is answered twice (first on line {first})",
                line.task_id, line.turn
            )),
            None => {
                let task = tasks[line.task_id.as_str()];
                out.warnings.extend(readability(&at, task, &line));
                out.answers.push(line);
            }
        }
    }
    if out.answers.is_empty() && out.problems.is_empty() {
        out.problems
            .push(format!("{file}: the file holds no answers"));
    }
    out
}

/// One line: its task, turn and answer text, or every problem it has.
fn check_line(
    at: &str,
    raw: &str,
    tasks: &HashMap<&str, &Task>,
    suite_id: &str,
    example: &str,
) -> Result<Line, Vec<String>> {
    let obj: Map<String, Value> = match serde_json::from_str(raw) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(vec![format!("{at}: expected a JSON object per line")]),
        Err(e) => return Err(vec![format!("{at}: not JSON: {e}")]),
    };
    let mut problems = Vec::new();
    let task = match obj.get("task_id") {
        Some(Value::String(id)) => match tasks.get(id.as_str()) {
            Some(t) => Some(*t),
            None => {
                problems.push(format!(
                    "{at}: task_id: no task {id:?} in suite {suite_id} (task ids look like {example:?})"
                ));
                None
            }
        },
        Some(_) => {
            problems.push(format!("{at}: task_id: expected a string"));
            None
        }
        None => {
            problems.push(format!("{at}: task_id: missing"));
            None
        }
    };
    let turn = turn_of(at, &obj, task).map_err(|p| problems.push(p)).ok();
    let text = text_of(at, &obj, task).map_err(|p| problems.push(p)).ok();
    for key in obj.keys() {
        if !matches!(key.as_str(), "task_id" | "answer" | "differential" | "turn") {
            problems.push(format!(
                "{at}: {key}: unknown field (expected task_id, answer or differential, and turn)"
            ));
        }
    }
    match (task, turn, text) {
        (Some(task), Some(turn), Some(text)) if problems.is_empty() => Ok(Line {
            line: 0,
            task_id: task.id.clone(),
            turn,
            text,
        }),
        _ => Err(problems),
    }
}

/// `turn`: absent (0), or a turn the task has.
fn turn_of(at: &str, obj: &Map<String, Value>, task: Option<&Task>) -> Result<u32, String> {
    let turn = match obj.get("turn") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| format!("{at}: turn: expected a whole number >= 0, got {v}"))?,
    };
    let turns = task.map_or(u32::MAX, |t| 1 + t.turns.len() as u32);
    if turn >= turns {
        return Err(format!(
            "{at}: turn: task {:?} has {turns} turn(s), numbered 0 to {}; there is no turn {turn}",
            task.map_or("", |t| t.id.as_str()),
            turns - 1
        ));
    }
    Ok(turn)
}

/// The answer text: `answer` as given, or `differential` written as the scorer reads it.
fn text_of(at: &str, obj: &Map<String, Value>, task: Option<&Task>) -> Result<String, String> {
    match (obj.get("answer"), obj.get("differential")) {
        (Some(_), Some(_)) => Err(format!(
            "{at}: answer: give either answer or differential, not both"
        )),
        (None, None) => Err(format!(
            "{at}: answer: missing (give answer, free text, or differential, a ranked list)"
        )),
        (Some(Value::String(s)), None) if s.trim().is_empty() => {
            Err(format!("{at}: answer: empty"))
        }
        (Some(Value::String(s)), None) => Ok(s.trim().to_string()),
        (Some(v), None) => Err(format!("{at}: answer: expected a string, got {v}")),
        (None, Some(v)) => differential_of(at, v, task),
    }
}

fn differential_of(at: &str, v: &Value, task: Option<&Task>) -> Result<String, String> {
    let list: Option<Vec<String>> = v.as_array().and_then(|items| {
        items
            .iter()
            .map(|d| d.as_str().map(str::trim).filter(|d| !d.is_empty()))
            .map(|d| d.map(str::to_string))
            .collect()
    });
    let list = match list {
        Some(l) if !l.is_empty() => l,
        _ => {
            return Err(format!(
                "{at}: differential: expected a non-empty list of diagnoses (non-empty strings), most likely \
                 first"
            ))
        }
    };
    if let Some(t) = task.filter(|t| t.family != Family::Differential) {
        return Err(format!(
            "{at}: differential: task {:?} is a {} task; a ranked differential answers differential tasks \
             only: give its answer as text",
            t.id,
            t.family.as_str()
        ));
    }
    Ok(nmb_serve::differential_answer(&list))
}

/// A warning when the scorer could not read the answer to a task's last turn into what its family needs.
fn readability(at: &str, task: &Task, line: &Line) -> Option<String> {
    let last = line.turn as usize == task.turns.len();
    if !last || !task.family.is_depth() {
        return None;
    }
    let parsed = nmb_score::parse::parse_answer(task.family, &line.text);
    parsed.error.map(|e| {
        format!(
            "{at}: answer: task {:?} ({}): {e}; it would be scored as parse_failed (wrong)",
            task.id,
            task.family.as_str()
        )
    })
}

/// Appends the answers that differ from the stored ones; returns how many.
fn append(
    store: &Store,
    spec: &ModelSpec,
    suite_hash: &str,
    lines: &[Line],
    source: &str,
) -> Result<usize> {
    let stored: HashMap<(String, u32), String> = store
        .human_answers(&spec.model, suite_hash)?
        .into_iter()
        .map(|a| ((a.task_id, a.turn_index), a.text))
        .collect();
    let mut added = 0;
    let now = now_ms();
    for line in lines {
        if stored.get(&(line.task_id.clone(), line.turn)) == Some(&line.text) {
            continue;
        }
        let answer = HumanAnswer {
            task_id: line.task_id.clone(),
            turn_index: line.turn,
            created_ms: now,
            source: source.to_string(),
            text: line.text.clone(),
        };
        store.append_human_answer(&spec.model, suite_hash, &answer)?;
        added += 1;
    }
    Ok(added)
}

/// The run of a person's stored answers on a suite, built by the evaluation `nmb eval` runs.
#[derive(Debug, Clone)]
pub(super) struct HumanRun {
    pub suite: String,
    pub answer_key: Option<PathBuf>,
    pub spec: ModelSpec,
    pub display_name: Option<String>,
    pub json: bool,
    pub quiet: bool,
    pub no_score: bool,
    pub no_bertscore: bool,
}

impl HumanRun {
    /// Builds the run, or resumes the person's newest run on the suite when its configuration is this one (it
    /// is unless an answer it recorded was changed since; see `nmb_run::human`). Returns the run id.
    pub(super) fn build(&self, at: &StoreAt, store: &Store, suite_hash: &str) -> Result<String> {
        let latest = nmb_run::human::latest_human_run(store, &self.spec, suite_hash)?;
        if let Some(run) = latest {
            match self.evaluate(Resume::Run(run.run_id.clone()), at) {
                // A changed answer (or another configuration): a new run.
                Err(e) if config_mismatch(&e) => {}
                other => return ran(other),
            }
        }
        ran(self.evaluate(Resume::Fresh, at))
    }

    /// The evaluation `nmb eval --model human:NAME --samples 1` runs, into the run `resume` names.
    fn evaluate(&self, resume: Resume, at: &StoreAt) -> Result<eval::Ran> {
        let suite = nmb_suite::Source {
            answers: self.answer_key.clone(),
            ..nmb_suite::Source::new(&self.suite)
        };
        let mut config = EvalConfig::new(suite, self.spec.clone());
        config.samples = Some(1);
        config.name = Some(
            self.display_name
                .clone()
                .unwrap_or_else(|| format!("{} (human)", self.spec.model)),
        );
        let mut scoring = ScoringConfig::default();
        if self.no_bertscore {
            scoring.bertscore = nmb_score::BertScoreSetting::Off;
        }
        let out = eval::Output {
            json: self.json,
            quiet: self.quiet,
            report: None,
            scoring: (!self.no_score).then_some(scoring),
        };
        let invocation = Invocation {
            resume,
            claiming: eval::claiming_on(at),
            ..Invocation::default()
        };
        eval::run_one(&config, &invocation, &out, at)
    }
}

fn ran(outcome: Result<eval::Ran>) -> Result<String> {
    Ok(outcome?.run_id)
}

fn config_mismatch(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<nmb_run::RunError>(),
            Some(nmb_run::RunError::ConfigMismatch { .. })
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Checked {
        check_lines("a.jsonl", text, &nmb_suite::sample::build())
    }

    #[test]
    fn every_bad_line_is_named_with_its_field() {
        let suite = nmb_suite::sample::build();
        let first = |family: Family| {
            let (_, t) = suite.tasks().find(|(_, t)| t.family == family).unwrap();
            t.id.clone()
        };
        let (dx, lesion) = (first(Family::Differential), first(Family::Lesion));
        let text = [
            format!(r#"{{"task_id": "{dx}", "differential": ["Stroke", "Bleed"]}}"#),
            r#"{"task_id": "nope", "answer": "x"}"#.to_string(),
            format!(r#"{{"task_id": "{dx}", "answer": "x"}}"#),
            format!(r#"{{"task_id": "{lesion}", "answer": "  "}}"#),
            format!(r#"{{"task_id": "{lesion}", "answer": "a", "differential": ["b"]}}"#),
            format!(r#"{{"task_id": "{lesion}"}}"#),
            "{not json".to_string(),
            String::new(),
            format!(r#"{{"task_id": "{lesion}", "differential": ["b"], "turn": 3}}"#),
        ]
        .join("\n");
        let c = check_lines("a.jsonl", &text, &suite);
        let p = c.problems.join("\n");
        for want in [
            "a.jsonl:2: task_id: no task \"nope\"",
            "a.jsonl:3: task_id: task",
            "(first on line 1)",
            "a.jsonl:4: answer: empty",
            "a.jsonl:5: answer: give either answer or differential, not both",
            "a.jsonl:6: answer: missing",
            "a.jsonl:7: not JSON",
            "a.jsonl:9: turn: task",
            "a.jsonl:9: differential: task",
        ] {
            assert!(p.contains(want), "{want:?} not in:\n{p}");
        }
        assert_eq!(c.problems.len(), 8, "{p}");
        assert_eq!(c.answers.len(), 1);
        assert!(c.answers[0].text.contains("\"diagnosis\": \"Stroke\""));
    }

    #[test]
    fn an_unreadable_answer_is_a_warning_and_an_empty_file_a_problem() {
        let suite = nmb_suite::sample::build();
        let lesion = suite
            .tasks()
            .find(|(_, t)| t.family == Family::Lesion && t.turns.is_empty())
            .unwrap()
            .1
            .id
            .clone();
        let c = check(&format!(
            r#"{{"task_id": "{lesion}", "answer": "a small spot"}}"#
        ));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("parse_failed"), "{:?}", c.warnings);
        let c = check("\n  \n");
        assert_eq!(c.problems, ["a.jsonl: the file holds no answers"]);
    }
}
