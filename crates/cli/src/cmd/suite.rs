//! `nmb suite validate|stats|show`: look at a benchmark suite without running any model.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nmb_suite::{check_images, Filter, Level, Loaded};

const SUITE_HELP: &str =
    "The suite: `sample` or `sample-structured` (bundled), a path whose format is detected, or FORMAT:PATH \
with FORMAT one of site, native, vqa-rad, slake, mcq, pubmedqa, table, pmc-vqa, omnimedvqa, pathvqa, neurovlm";

pub const EXAMPLES: &str = "\
Examples:
  nmb suite validate ../shared/formats/neural-medbench-site.example.json
  nmb suite stats ../shared/data/vqa-rad/trainset.json --filter image_organ=HEAD --json
  nmb suite show sample <CASE_ID>

A SUITE is `sample` or `sample-structured` (bundled), a path whose format is detected, or FORMAT:PATH
with FORMAT one of site, native, vqa-rad, mcq, neurovlm, pubmedqa, slake, table, pmc-vqa, omnimedvqa, pathvqa.
See `nmb suite <COMMAND> --help` for each command.";

const VALIDATE_EXAMPLES: &str = "\
Examples:
  nmb suite validate sample
  nmb suite validate ../shared/formats/neural-medbench-site.example.json
  nmb suite validate site:direct-diagnosis.json --answers answers.jsonl
  nmb suite validate ./my-suite --json
  nmb suite validate ../shared/data/vqa-rad/trainset.json --filter image_organ=HEAD

Each problem is printed as `SEVERITY: FILE: case ID: field FIELD: what is wrong and what was expected`.
Exit status: 0 when there are no errors (warnings alone are fine), 1 when there is at least one error
(including a file that cannot be read or parsed), 2 on bad usage.";

const STATS_EXAMPLES: &str = "\
Examples:
  nmb suite stats sample
  nmb suite stats ../shared/formats/neural-medbench-site.example.json --json
  nmb suite stats ../shared/data/vqa-rad/trainset.json --filter image_organ=HEAD --json
  nmb suite stats mcq:../shared/data/medqa/medagentsbench/test.jsonl

With --json, prints one object with: id, version, format, hash, cases, empty_cases, tasks, images,
image_formats (format -> count), by_family, by_level, with_reference, turns, languages, errors, warnings.
Problems are not listed here (use `nmb suite validate`); their counts are. Exit status: 0 when the suite
loads, 1 when it cannot be loaded, 2 on bad usage.";

const SHOW_EXAMPLES: &str = "\
Examples:
  nmb suite show ../shared/formats/neural-medbench-site.example.json case_1
  nmb suite show ../shared/formats/neural-medbench-site.example.json case_1 --answers answers.jsonl
  nmb suite show ../shared/data/vqa-rad/trainset.json synpic54610.jpg

Images are described (format, size, dimensions, hash), never printed. Volumes (DICOM, NIfTI) are rendered
and their views listed; --views DIR writes those PNGs. Exit status: 0 when the case is
shown, 1 when the suite cannot be loaded or has no such case, 2 on bad usage.";

#[derive(Args)]
pub struct SuiteCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// List every problem in a suite (file, case, field, what was expected); exit 1 if any is an error
    #[command(after_help = VALIDATE_EXAMPLES)]
    Validate(ValidateArgs),
    /// Count cases, tasks, images and their formats, families and levels
    #[command(after_help = STATS_EXAMPLES)]
    Stats(StatsArgs),
    /// Print one case readably: images (format, size, dimensions), EHR, notes, tasks and references
    #[command(after_help = SHOW_EXAMPLES)]
    Show(ShowArgs),
}

/// How a suite is named and loaded. Other subcommands can `#[command(flatten)]` this.
#[derive(Args, Debug, Clone)]
pub struct SuiteSource {
    #[arg(value_name = "SUITE", help = SUITE_HELP)]
    pub suite: String,
    /// Answer-key JSONL joined by case_id (format: docs/formats.md, "Answer keys")
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Keep only tasks whose task or case metadata has KEY=VALUE (or not, with KEY!=VALUE); repeatable,
    /// all must hold. Built-in keys: family, level, case_id, task_id, language
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    pub filters: Vec<Filter>,
    /// Level of site-format tasks: direct, complex or multi_turn [default: from the file name]
    #[arg(long, value_name = "LEVEL")]
    pub level: Option<Level>,
    /// For tables (table:, pmc-vqa:, omnimedvqa:, pathvqa:) and NeuroVLM manifests (neurovlm:): read FIELD
    /// from COLUMN; repeatable
    #[arg(long = "map", value_name = "FIELD=COLUMN", value_parser = parse_map)]
    pub map: Vec<(String, String)>,
    /// For NeuroVLM manifests (neurovlm:): the folder the image paths are relative to [default: the manifest's
    /// folder]; the authors' image_mapping.csv names images under their dataset folder
    #[arg(long, value_name = "DIR")]
    pub images_root: Option<PathBuf>,
    /// For Hugging Face datasets (hf-disk:, hf-cache:): the split to read, where the folder has several
    #[arg(long, value_name = "SPLIT")]
    pub split: Option<String>,
    /// Set by `nmb eval --inputs text`: questions whose image is missing are kept (SLAKE).
    #[arg(skip)]
    pub text_only: bool,
}

pub use nmb_suite::parse_map;

impl SuiteSource {
    pub fn source(&self) -> nmb_suite::Source {
        nmb_suite::Source {
            spec: self.suite.clone(),
            answers: self.answers.clone(),
            filters: self.filters.clone(),
            level: self.level,
            map: self.map.clone(),
            images_root: self.images_root.clone(),
            split: self.split.clone(),
        }
    }

    /// Loads the suite; only a fatal problem (unreadable or unparseable file) is an error here.
    pub fn load(&self) -> Result<Loaded> {
        Ok(self.source().load(self.text_only)?)
    }
}

#[derive(Args)]
struct ValidateArgs {
    #[command(flatten)]
    source: SuiteSource,
    /// Print one JSON object {suite, ok, errors, warnings, cases, empty_cases, tasks, images, problems: [...]}
    /// instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct StatsArgs {
    #[command(flatten)]
    source: SuiteSource,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ShowArgs {
    #[command(flatten)]
    source: SuiteSource,
    /// The case to show, e.g. case_1
    #[arg(value_name = "CASE_ID")]
    case_id: String,
    /// Also write the views rendered from the case's volumes (DICOM, NIfTI) into this directory, as PNG
    #[arg(long, value_name = "DIR")]
    views: Option<PathBuf>,
}

pub fn run(command: SuiteCommand) -> Result<ExitCode> {
    match command.action {
        Action::Validate(args) => validate(args),
        Action::Stats(args) => stats(args),
        Action::Show(args) => show(args),
    }
}

fn validate(args: ValidateArgs) -> Result<ExitCode> {
    let source = &args.source;
    let checked =
        nmb_suite::describe::validate(&source.suite, &source.source().options(source.text_only));
    if args.json {
        println!("{}", checked.json(&source.suite));
    } else {
        for problem in &checked.problems {
            println!("{problem}");
        }
        println!("{}", checked.summary(&source.suite));
        for kind in checked.by_kind() {
            println!("  {kind}");
        }
    }
    Ok(if checked.errors() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn stats(args: StatsArgs) -> Result<ExitCode> {
    let loaded = args.source.load()?;
    let images = check_images(&loaded.suite);
    let stats = nmb_suite::stats(&loaded, &images);
    if stats.errors + stats.warnings > 0 {
        tracing::warn!(
            "{} error(s) and {} warning(s) in {}; run `nmb suite validate` to list them",
            stats.errors,
            stats.warnings,
            args.source.suite
        );
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&stats).context("serialising stats")?
        );
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", nmb_suite::describe::stats_text(&stats));
    Ok(ExitCode::SUCCESS)
}

fn show(args: ShowArgs) -> Result<ExitCode> {
    let loaded = args.source.load()?;
    let suite = &loaded.suite;
    let Some(case) = suite.case(&args.case_id) else {
        bail!(
            "{}",
            nmb_suite::describe::missing_case(suite, &args.case_id)
        );
    };
    print!("{}", nmb_suite::describe::case_text(&suite.id, case));
    if let Some(dir) = &args.views {
        nmb_suite::describe::write_views(case, dir, |file| println!("view: {}", file.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
