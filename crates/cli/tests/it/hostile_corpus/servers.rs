//! Hostile model servers that misbehave: bodies too large or compressed too far, deadlines, retry hints, batch files.
//!
//! Each case points `nmb eval` at the fake server's hostile mode (`nmb_fake_server::hostile`): 3 GB bodies on
//! every wire, with and without a length; gzip and deflate bombs; a body that drips past `--timeout`; two
//! 200 MB answers; a lying length, a wrong encoding, deep nesting and fractional token counts; and batches
//! whose output file is 3 GB, whose one line is too long, whose lines are broken, or that say they are done
//! with nothing to read. Every one must end as a classified error (or a correct answer) within the limits.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use nmb_fake_server::batch::BatchConfig;
use nmb_fake_server::{Config, FakeServer, Fault, HostileBatch, Wire};

use super::{check_all, Case};
use crate::common::{model_spec, nmb_command, server};

/// A server that answers every call with the hostile mode `fault`.
fn hostile(fault: &str) -> Arc<FakeServer> {
    let fault: Fault = fault.parse().expect("a hostile mode");
    Arc::new(server(Config {
        fault_every: Some((1, fault)),
        ..Config::default()
    }))
}

/// A server whose batch API misbehaves as `mode` says.
fn hostile_batches(mode: HostileBatch) -> Arc<FakeServer> {
    Arc::new(server(Config {
        batch: BatchConfig {
            hostile: Some(mode),
            ..BatchConfig::default()
        },
        ..Config::default()
    }))
}

/// `nmb eval` of the first `tasks` tasks of the sample suite on `wire` of `server`, `samples` each, unscored,
/// then `extra`.
fn eval(
    runs: &Path,
    wire: Wire,
    server: &FakeServer,
    tasks: u32,
    samples: u32,
    extra: &[&str],
) -> Command {
    let mut c = nmb_command(runs);
    let (tasks, samples) = (tasks.to_string(), samples.to_string());
    c.args([
        "eval",
        "--suite",
        "sample",
        "--model",
        &model_spec(wire, server),
    ]);
    c.args([
        "--limit",
        &tasks,
        "--samples",
        &samples,
        "--no-score",
        "-q",
        "--max-retries",
        "1",
    ]);
    c.args(extra);
    c
}

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    let runs = |name: &str| dir.join(name);
    // 3 GB on every wire: announced in content-length (refused before reading), or not (read to the cap).
    for (wire, mode) in [
        (Wire::OpenAi, "huge:3000000000"),
        (Wire::Anthropic, "huge-close:3000000000"),
        (Wire::Gemini, "huge:3000000000"),
        (Wire::Gemini, "huge-close:3000000000"),
    ] {
        let name = format!("{wire:?} {mode}");
        let s = hostile(mode);
        let at = runs(&name.replace([' ', ':'], "-"));
        let command = eval(&at, wire, &s, 2, 1, &[]);
        cases.push(
            Case::refused(
                &name,
                command,
                &at,
                &["response_too_large", "--max-response-mib"],
            )
            .keep(s),
        );
    }
    for (wire, mode) in [
        (Wire::OpenAi, "gzip-bomb:3000000000"),
        (Wire::Anthropic, "deflate-bomb:3000000000"),
    ] {
        let s = hostile(mode);
        let at = runs(mode.split(':').next().unwrap_or(mode));
        let command = eval(&at, wire, &s, 2, 1, &[]);
        cases.push(Case::refused(mode, command, &at, &["response_too_large"]).keep(s));
    }
    // Two answers of 200 MB each (n = 2 in one response): refused at the cap, never held.
    let s = hostile("huge:200000000");
    let at = runs("two-200mb-answers");
    let command = eval(&at, Wire::OpenAi, &s, 1, 2, &[]);
    cases.push(Case::refused("two 200 MB answers", command, &at, &["response_too_large"]).keep(s));
    // One byte a second: the attempt ends at --timeout (2 s), headers and body together.
    let s = hostile("drip:1000");
    let at = runs("drip");
    let command = eval(&at, Wire::Anthropic, &s, 2, 1, &["--timeout", "2"]);
    cases.push(Case::refused("a body dripping past --timeout", command, &at, &["timeout"]).keep(s));
    for (wire, mode, says) in [
        // A length past the cap is refused as announced; one within it that the body never fills is cut short.
        (Wire::OpenAi, "lie:1000000000", "response_too_large"),
        (Wire::Anthropic, "lie:100000", "network"),
        (Wire::Gemini, "encoding:br", "malformed_response"),
        (Wire::Anthropic, "encoding:gzip", "malformed_response"),
        (Wire::OpenAi, "numbers:float", "malformed_response"),
    ] {
        let s = hostile(mode);
        let at = runs(&mode.replace(':', "-"));
        let command = eval(&at, wire, &s, 2, 1, &[]);
        cases.push(Case::refused(mode, command, &at, &[says]).keep(s));
    }
    // Nested 100,000 deep in a field no wire reads: skipped, and the answers are stored.
    let s = hostile("deep:100000");
    let at = runs("deep");
    let command = eval(&at, Wire::Gemini, &s, 2, 1, &["--json"]);
    cases.push(Case::answered("deep:100000", command, &at, &["\"run_id\""]).keep(s));
    cases.extend(batch_cases(dir));
    cases
}

/// `nmb eval --batch`, polling every 0.1 s, then `extra`.
fn batch_eval(runs: &Path, wire: Wire, server: &FakeServer, extra: &[&str]) -> Command {
    let mut c = eval(
        runs,
        wire,
        server,
        2,
        1,
        &["--batch", "--batch-poll", "0.1"],
    );
    c.args(extra);
    c
}

fn batch_cases(dir: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    // A 3 GB output file, and the same command run again over the stored batch: a clear error both times.
    let s = hostile_batches(HostileBatch::HugeAnswer(3_000_000_000));
    let runs = dir.join("batch-3gb-file");
    for name in [
        "batch output file of 3 GB",
        "the same command again over the stored batch",
    ] {
        let command = batch_eval(&runs, Wire::OpenAi, &s, &[]);
        cases.push(Case::refused(name, command, &runs, &["response_too_large"]).keep(s.clone()));
    }
    // One line of 2 MB in Anthropic's results: that request errors, the other is answered.
    let s = hostile_batches(HostileBatch::HugeAnswer(2_000_000));
    let runs = dir.join("batch-long-line");
    let command = batch_eval(&runs, Wire::Anthropic, &s, &["--json"]);
    cases.push(
        Case::answered(
            "a batch line past its cap",
            command,
            &runs,
            &["response_too_large"],
        )
        .keep(s),
    );
    let s = hostile_batches(HostileBatch::HugeAnswer(3_000_000_000));
    let runs = dir.join("batch-gemini-3gb");
    let command = batch_eval(&runs, Wire::Gemini, &s, &[]);
    cases.push(
        Case::refused(
            "Gemini inlined responses of 3 GB",
            command,
            &runs,
            &["response_too_large"],
        )
        .keep(s),
    );
    // Broken lines before the real ones: only the request a broken line names errors.
    let s = hostile_batches(HostileBatch::MalformedLines);
    let runs = dir.join("batch-malformed");
    let command = batch_eval(&runs, Wire::OpenAi, &s, &["--json"]);
    cases.push(
        Case::answered(
            "malformed batch lines",
            command,
            &runs,
            &["malformed_response"],
        )
        .keep(s),
    );
    // An output file dripping one byte a second: each poll ends at --timeout (1 s), and after ten the run ends.
    let s = hostile_batches(HostileBatch::Drip(std::time::Duration::from_secs(1)));
    let runs = dir.join("batch-drip");
    let command = batch_eval(&runs, Wire::Anthropic, &s, &["--timeout", "1"]);
    cases.push(
        Case::refused(
            "a batch output dripping past --timeout",
            command,
            &runs,
            &["timeout"],
        )
        .keep(s),
    );
    // `completed` with no output file: a clear error after a few polls, and one batch, never resubmitted.
    for wire in [Wire::OpenAi, Wire::Gemini] {
        let s = hostile_batches(HostileBatch::NoOutput);
        let runs = dir.join(format!("batch-no-output-{wire:?}"));
        let command = batch_eval(&runs, wire, &s, &[]);
        let check = s.clone();
        let name = format!("{wire:?} batch done without output");
        let case = Case::refused(&name, command, &runs, &["malformed_response"]);
        cases.push(case.keep(s));
        let runs = runs.clone();
        cases.push(Case::custom(
            &format!("{name}: submitted once"),
            &runs,
            move || match check.batches_created() {
                1 => Ok(()),
                n => Err(format!("{n} batches were created for one")),
            },
        ));
    }
    cases
}

#[test]
fn every_servers_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
