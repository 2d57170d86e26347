//! `nmb import`: a clinician's answers to a suite, from a JSONL file, recorded as the run of model `human:NAME`
//! (a human baseline), scored, reported and compared like any model's run; or, with `--format neurovlm-run`,
//! the answers NeuroVLM-Bench's runner already got from models, one run per model ([`neurovlm_run`]).
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

use nmb_run::import::human;
use nmb_score::ScoringConfig;
use nmb_study::HumanRun;

use super::eval::{self, Output};
use super::score::ProtocolArg;
use crate::progress::Terminal;
use crate::store_at::StoreAt;

mod neurovlm_run;

pub const EXAMPLES: &str = "\
Examples:
  nmb import lee.jsonl --suite sample --as human:lee
  nmb import panel/park.jsonl --suite site:direct-diagnosis.json --answer-key key.jsonl --as human:park \\
      --display-name \"Neurologist B\" --json
  nmb import results/subset_0_25_7_temp_0_20250901_120000.jsonl --format neurovlm-run \\
      --suite neurovlm:neurovlm-bench/subsets/subset_0_25_7.csv --images-root dataset \\
      --template neurovlm-bench/prompts/neurorad_prompt_trim_5classes_refined.txt --protocol neurovlm-paper

With --format human (the default), FILE.jsonl holds one JSON object per line:
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
changed answer starts a new run. The run is scored at the end unless --no-score.

--format neurovlm-run reads the JSONL that NeuroVLM-Bench's run_async.py writes (ChatMED/neurovlm-bench),
one object per line: input.image_path, input.model_requested, input.system_prompt_type, output.status
(success or error), output.parsed_response, output.error, api_response (tokens) and processing.parameters.
Each model the file names becomes the run of imported:MODEL on the suite, recorded with the parameters the
file records, the prompt file's SHA-256 with --template (else the prompt's name from the file) and the tokens
of each answer; the model is never asked. A line is matched to the case whose image path ends its
input.image_path; a line of an image the suite does not hold is listed and skipped. The answer is
parsed_response written as JSON (the model's own text where the runner could not parse it); an error line is
an errored sample (never counted wrong), and a case without a line errors no_answer. A line that is not JSON
or lacks a field is listed with FILE:LINE and the field, and nothing is imported. Importing the same file
again leaves its finished runs as they are; --protocol neurovlm-paper adds the authors' reading.";

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The answers: JSONL, one {"task_id", "answer" | "differential", "turn"} object per line (--format human),
    /// or the output of NeuroVLM-Bench's run_async.py (--format neurovlm-run)
    #[arg(value_name = "FILE.jsonl")]
    file: PathBuf,
    /// The suite answered: `sample`, a path, or FORMAT:PATH (as `nmb eval --suite`)
    #[arg(long, value_name = "SUITE")]
    suite: String,
    /// The suite's reference answers, joined by case_id (as `nmb eval --answers`)
    #[arg(long, value_name = "FILE")]
    answer_key: Option<PathBuf>,
    /// What the file holds: a clinician's answers (`human`, with --as), or the JSONL of NeuroVLM-Bench's
    /// run_async.py (`neurovlm-run`: one run per model it asked)
    #[arg(long, value_enum, default_value = "human")]
    format: ImportFormat,
    /// Who answered: human:NAME (NAME letters, digits, . _ -); --format human only
    #[arg(long = "as", value_name = "human:NAME")]
    human: Option<String>,
    /// --format neurovlm-run: the folder the neurovlm: manifest's image paths are relative to (as `nmb eval`)
    #[arg(long, value_name = "DIR")]
    images_root: Option<PathBuf>,
    /// --format neurovlm-run: read a manifest FIELD from COLUMN (as `nmb eval`); repeatable
    #[arg(long = "map", value_name = "FIELD=COLUMN", value_parser = nmb_suite::parse_map)]
    map: Vec<(String, String)>,
    /// --format neurovlm-run: the prompt file the runner sent (e.g. prompts/neurorad_prompt_trim.txt), recorded
    /// with its SHA-256 and shown as the system message
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// --format neurovlm-run: `neurovlm-paper` also reads the answers as the authors' evaluator does
    #[arg(long, value_enum, default_value = "nmb")]
    protocol: ProtocolArg,
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

/// What `nmb import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    /// A clinician's answers, one {"task_id", "answer" | "differential", "turn"} object per line
    Human,
    /// The JSONL of NeuroVLM-Bench's run_async.py
    NeurovlmRun,
}

pub fn run(args: ImportArgs, at: &StoreAt) -> Result<ExitCode> {
    if args.format == ImportFormat::NeurovlmRun {
        return neurovlm_run::run(args, at);
    }
    let given = [
        ("--images-root", args.images_root.is_some()),
        ("--map", !args.map.is_empty()),
        ("--template", args.template.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, on)| *on) {
        anyhow::bail!(
            "{flag} is for --format neurovlm-run; a person's answers take --suite and --answer-key"
        );
    }
    let Some(human) = &args.human else {
        anyhow::bail!("--as human:NAME is needed: who answered");
    };
    let spec = human::human_spec(human).context("--as")?;
    let suite = load_suite(&args.suite, args.answer_key.as_deref())?;
    let checked = human::read(&args.file, &suite, unreadable)?;
    for w in &checked.warnings {
        eprintln!("warning: {}", nmb_table::terminal::excerpt_of(w, 2000));
    }
    let answers = checked.answers()?;
    let store = Arc::new(at.open()?);
    let suite_hash = nmb_suite::suite_hash(&suite)?;
    let added = human::record_answers(&store, &spec, &suite_hash, answers, &checked.source)?;
    eprintln!(
        "{added} answer(s) stored from {} ({} already stored)",
        checked.file,
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
        mlflow: None,
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
