//! `nmb review answer`: a clinician answers a suite's cases in the browser, for a human baseline.
//!
//! This side takes each task's opening turn as the models got it, planned as a human run plans it and its
//! images stored (`nmb_run::stored::questions`), hands it to the pages (`nmb_serve`'s answer module) with a way
//! to finish: building or resuming the run of `human:NAME` through the same [`HumanRun`] `nmb import`
//! uses. The command ends on Ctrl-C, and builds the run from whatever is stored then.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args;
use nmb_run::import::human::human_spec;
use nmb_run::stored::questions;
use nmb_serve::{AnswerSession, AnswerTask, Finish, PromptPart};
use nmb_store::Store;
use nmb_suite::Suite;

use super::eval::Output;
use super::import::{build, human_scoring, load_suite};
use crate::store_at::StoreAt;
use nmb_study::HumanRun;

/// The port the answer pages listen on unless told otherwise (next to `nmb serve`'s).
pub const DEFAULT_PORT: u16 = nmb_serve::DEFAULT_PORT + 1;

pub const EXAMPLES: &str = "\
Examples:
  nmb review answer sample --reviewer lee                 # http://127.0.0.1:8687/
  nmb review answer site:direct-diagnosis.json --answer-key key.jsonl --reviewer park --port 0
  nmb review answer sample --reviewer lee --host 0.0.0.0 --token-file ~/.nmb-answer-token

The clinician sees each question exactly as the models got it (the opening turn: text and images), never the
reference; answers in free text or as a ranked differential; sees their progress and can go back. Each save
appends to the store's human answers. \"Finish\" (and the end of the command, Ctrl-C) builds or resumes the run
of human:NAME from the stored answers, as `nmb import` does, and the page shows its id. It listens on
loopback unless --host says otherwise; any other address needs a token (--token-file FILE or NMB_SERVE_TOKEN),
carried as `Authorization: Bearer TOKEN` or by opening http://HOST:PORT/?token=TOKEN once.";

#[derive(Args, Debug)]
pub struct AnswerArgs {
    /// The suite to answer: `sample`, a path, or FORMAT:PATH (as `nmb eval --suite`)
    #[arg(value_name = "SUITE")]
    suite: String,
    /// The suite's reference answers, joined by case_id (as `nmb eval --answers`); never shown
    #[arg(long, value_name = "FILE")]
    answer_key: Option<PathBuf>,
    /// Who answers: their answers become the run of model human:NAME (letters, digits, . _ -)
    #[arg(long, value_name = "NAME")]
    reviewer: String,
    /// The name reports show [default: "NAME (human)"]
    #[arg(long, value_name = "NAME")]
    display_name: Option<String>,
    /// Port to listen on (0: any free port)
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Address to listen on; anything but loopback needs a token
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// A file holding the token every request must carry (else NMB_SERVE_TOKEN)
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Another name requests may give as their Host (a reverse proxy's, this machine's); repeatable. Any
    /// name but the bound address and localhost is refused otherwise (DNS rebinding)
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// A TLS proxy is in front (give its name with --allowed-host): cookies are marked Secure, the token's
    /// named __Host-nmb_token
    #[arg(long)]
    behind_tls: bool,
    /// Do not score the run when it is built
    #[arg(long)]
    no_score: bool,
    /// Score without BERTScore
    #[arg(long)]
    no_bertscore: bool,
    #[command(flatten)]
    connections: super::serve::ConnectionArgs,
}

pub fn run(args: AnswerArgs, at: &StoreAt) -> Result<ExitCode> {
    let spec = human_spec(&format!("human:{}", args.reviewer)).context("--reviewer")?;
    let suite = load_suite(&args.suite, args.answer_key.as_deref())?;
    let suite_hash = nmb_suite::suite_hash(&suite)?;
    let store = Arc::new(at.open()?);
    let tasks = questions(&store, &suite)?;
    let human = HumanRun {
        suite: args.suite.clone(),
        answer_key: args.answer_key.clone(),
        spec: spec.clone(),
        display_name: args.display_name.clone(),
        scoring: human_scoring(args.no_score, args.no_bertscore),
    };
    let build = builder(human, at.clone(), store.clone(), suite_hash.clone());
    let session = AnswerSession {
        human: spec.model.clone(),
        suite_id: suite.id.clone(),
        suite_hash: suite_hash.clone(),
        tasks,
        form_key: nmb_review::new_token(),
        finish: build.clone(),
    };
    let options = nmb_serve::ServeOptions {
        host: args.host,
        port: args.port,
        token: nmb_serve::token_from(args.token_file.as_deref())?,
        allowed_hosts: args.allowed_hosts.clone(),
        behind_tls: args.behind_tls,
        connections: args.connections.limits(),
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let bound = nmb_serve::bind(&options).await?;
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "nmb review answer: {}", bound.url());
            let _ = out.flush();
        }
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        bound.run_answers(store.clone(), session, stop).await
    })?;
    drop(runtime);
    // The end of the command: the run from whatever is stored now, if anything is.
    if store.human_answers(&spec.model, &suite_hash)?.is_empty() {
        eprintln!("no answers stored; no run built");
        return Ok(ExitCode::SUCCESS);
    }
    // The evaluation prints the run's summary, its id last.
    build().map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// The finish the pages call: one build at a time, each on a thread of its own (the evaluation runs its own
/// async runtime, which may not start inside the server's).
fn builder(human: HumanRun, at: StoreAt, store: Arc<Store>, suite_hash: String) -> Finish {
    let one_at_a_time = Mutex::new(());
    Arc::new(move || {
        let _turn = one_at_a_time.lock().unwrap_or_else(|p| p.into_inner());
        let out = Output {
            json: false,
            quiet: true,
            report: None,
            scoring: human.scoring.clone(),
            mlflow: None,
        };
        std::thread::scope(|s| {
            s.spawn(|| build(&human, &at, &store, &suite_hash, &out))
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("building the run stopped unexpectedly")))
        })
        .map_err(|e| format!("{e:#}"))
    })
}

/// Each task's opening turn as the models get it (`nmb_run::stored::questions`), as the pages take it.
fn questions(store: &Arc<Store>, suite: &Suite) -> Result<Vec<AnswerTask>> {
    let questions = questions::questions(store, suite)?;
    for e in &questions.left_out {
        eprintln!("warning: {e}; that question is left out");
    }
    let task = |q: questions::Question| AnswerTask {
        task_id: q.task_id,
        family: q.family.as_str().to_string(),
        turns: q.turns,
        instructions: q.instructions,
        parts: (q.parts.into_iter())
            .map(|p| match p {
                questions::QuestionPart::Text(t) => PromptPart::Text(t),
                questions::QuestionPart::Image { sha256 } => PromptPart::Image { sha256 },
            })
            .collect(),
    };
    Ok(questions.questions.into_iter().map(task).collect())
}
