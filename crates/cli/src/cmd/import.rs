//! `nmb import`: a clinician's answers to a suite, from a JSONL file, recorded as the run of model `human:NAME`
//! (a human baseline), scored, reported and compared like any model's run.
//!
//! The file is checked whole before anything is stored. Its answers are appended to the store's human answers
//! (an answer equal to the stored one is not appended again), and the run is built by the very evaluation
//! `nmb eval --model human:NAME --samples 1` runs, resuming the person's newest run on the suite when its
//! configuration still holds. `nmb review answer` builds its runs through the same [`HumanRun`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use nmb_store::Store;
use nmb_suite::{Family, Suite};

use nmb_run::human;
use nmb_score::ScoringConfig;
use nmb_study::HumanRun;

use super::eval::{self, Output};
use crate::progress::Terminal;
use crate::store_at::StoreAt;

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
    let spec = human::human_spec(&args.human).context("--as")?;
    let suite = load_suite(&args.suite, args.answer_key.as_deref())?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let label = args.file.display().to_string();
    let checked = human::check_answers(&label, &text, &suite, unreadable);
    for w in &checked.warnings {
        eprintln!("warning: {w}");
    }
    let answers = checked.answers()?;
    let source = args
        .file
        .file_name()
        .map_or_else(|| label.clone(), |n| n.to_string_lossy().into_owned());
    let store = Arc::new(at.open()?);
    let suite_hash = nmb_suite::suite_hash(&suite)?;
    let added = human::record_answers(&store, &spec, &suite_hash, answers, &source)?;
    eprintln!(
        "{added} answer(s) stored from {label} ({} already stored)",
        answers.len() - added
    );
    let human = HumanRun {
        suite: args.suite,
        answer_key: args.answer_key,
        spec,
        display_name: args.display_name,
        scoring: human_scoring(args.no_score, args.no_bertscore),
    };
    let out = Output {
        json: args.json,
        quiet: args.quiet,
        report: None,
        scoring: human.scoring.clone(),
    };
    build(&human, at, &store, &suite_hash, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// Loads the suite (with its answer key), refusing one with errors, as `nmb eval` does.
pub(super) fn load_suite(suite: &str, answer_key: Option<&Path>) -> Result<Suite> {
    let source = nmb_suite::Source {
        answers: answer_key.map(Path::to_path_buf),
        ..nmb_suite::Source::new(suite)
    };
    Ok(source.load_checked(false)?.suite)
}

/// Why the scorer could not read an answer of a family, if it could not: the warnings of the check.
fn unreadable(family: Family, text: &str) -> Option<String> {
    nmb_score::parse::parse_answer(family, text)
        .error
        .map(|e| e.to_string())
}

/// How a person's run is scored: not at all with `no_score`, else without BERTScore with `no_bertscore`.
pub(super) fn human_scoring(no_score: bool, no_bertscore: bool) -> Option<ScoringConfig> {
    let mut scoring = ScoringConfig::default();
    if no_bertscore {
        scoring.bertscore = nmb_score::BertScoreSetting::Off;
    }
    (!no_score).then_some(scoring)
}

/// Builds (or resumes) the person's run and prints its summary as `nmb eval` does; returns its id.
pub(super) fn build(
    human: &HumanRun,
    at: &StoreAt,
    store: &Arc<Store>,
    suite_hash: &str,
    out: &Output,
) -> Result<String> {
    let watch = Terminal { quiet: out.quiet };
    let done = human.build(store, suite_hash, eval::claiming_on(at), &watch)?;
    eval::print_done(&human.spec, &done, out, None)?;
    Ok(done.outcome.run_id)
}
