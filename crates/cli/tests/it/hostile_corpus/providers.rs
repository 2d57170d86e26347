//! Hostile provider behaviour at its limits: retry hints and waits too long to honour, quota refusals, batch results with foreign error codes.

use std::path::Path;

use nmb_fake_server::batch::BatchConfig;
use nmb_fake_server::{Config, FakeServer, Fault, Wire};

use super::{check_all, Case};
use crate::common::{eval_args, model_spec, native_suite, nmb_command, TestTask};

/// A fake server that answers every request with `fault` (its batches with `fault` in each answer).
fn faulty(fault: &str) -> FakeServer {
    let fault: Fault = fault.parse().expect("fault spec");
    let config = Config {
        fault_every: Some((1, fault)),
        batch: BatchConfig {
            polls: 1,
            ..BatchConfig::default()
        },
        ..Config::default()
    };
    FakeServer::start_in_background(config, 2).expect("fake server starts")
}

/// `nmb eval` of a one-task suite against `wire` of a server answering `fault`, which must end with the sample
/// stored as errored with `class`, and say so: every sample errored, so the run exits 1.
fn case(dir: &Path, name: &str, wire: Wire, fault: &str, extra: &[&str], class: &str) -> Case {
    let root = dir.join(name);
    let tasks = [TestTask {
        id: "t_hostile",
        question: "What is the most likely diagnosis?",
    }];
    let suite = native_suite(&root, &tasks);
    let runs = root.join("runs");
    let server = faulty(fault);
    let mut more = vec!["--no-score", "--max-retries", "2", "--timeout", "5"];
    more.extend(extra);
    let mut command = nmb_command(&runs);
    command.args(eval_args(
        suite.to_str().unwrap(),
        &model_spec(wire, &server),
        &more,
    ));
    Case::refused(name, command, &runs, &[class, "every sample errored"])
        .keep(server)
        .forbid("cannot convert float seconds")
}

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let batch = ["--batch", "--batch-poll", "0.05"];
    vec![
        // Retry-After: 1e20 is more seconds than a Duration holds (it once panicked the evaluation).
        case(
            dir,
            "retry_after_1e20",
            Wire::OpenAi,
            "429:1e20",
            &[],
            "rate_limit",
        ),
        case(
            dir,
            "retry_after_negative",
            Wire::Anthropic,
            "429:-5",
            &[],
            "rate_limit",
        ),
        case(
            dir,
            "retry_after_nan",
            Wire::OpenAi,
            "429:NaN",
            &[],
            "rate_limit",
        ),
        case(
            dir,
            "retry_after_a_day",
            Wire::Anthropic,
            "429:86400",
            &[],
            "rate_limit",
        ),
        case(
            dir,
            "retry_after_ms_u64_max",
            Wire::OpenAi,
            "429ms:18446744073709551615",
            &[],
            "rate_limit",
        ),
        // Gemini's RetryInfo in the body, a google.protobuf.Duration of 1e20 seconds.
        case(
            dir,
            "gemini_retry_delay_1e20",
            Wire::Gemini,
            "retryinfo:1e20",
            &[],
            "rate_limit",
        ),
        // Quota refusals, each in its provider's words: not retried six times as rate limits.
        case(
            dir,
            "openai_insufficient_quota",
            Wire::OpenAi,
            "quota",
            &[],
            "quota_exhausted",
        ),
        case(
            dir,
            "gemini_daily_quota",
            Wire::Gemini,
            "quota",
            &[],
            "quota_exhausted",
        ),
        case(
            dir,
            "anthropic_billing_error_in_a_batch",
            Wire::Anthropic,
            "quota",
            &batch,
            "quota_exhausted",
        ),
        // A Gemini batch's inline errors carry gRPC codes (14 UNAVAILABLE), never read as HTTP statuses.
        case(
            dir,
            "gemini_batch_grpc_unavailable",
            Wire::Gemini,
            "503",
            &batch,
            "server_error",
        ),
        // The server says not to retry: one attempt, whatever the status.
        case(
            dir,
            "x_should_retry_false",
            Wire::OpenAi,
            "noretry:503",
            &[],
            "server_error",
        ),
    ]
}

#[test]
fn every_providers_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
