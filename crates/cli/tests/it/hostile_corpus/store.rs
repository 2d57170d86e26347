//! Hostile numbers at the limits of what a store can hold, from servers and from stores that already hold them.
//!
//! A server answering usage counts no call can have (2^63 and 2^64 tokens, negative or fractional counts, two
//! counts that overflow when added) must leave its sample errored as `malformed_response` with nothing of the
//! number stored, on each wire; a server reporting a huge cost is answered (nmb prices tokens itself); and a
//! store that already holds counts at the limits of its integers (written straight into its rows, as an older
//! version or a hand could) still lists, shows, reports, scores and serves every page, on SQLite and PostgreSQL.

use std::path::{Path, PathBuf};
use std::process::Command;

use nmb_fake_server::{FakeServer, Wire};

use super::viewer::Viewer;
use super::{check_all, Case, TIME_LIMIT};
use crate::common::measured::run;
use crate::common::{always, key_var, model_spec, nmb_command, server};

/// The answer every hostile server gives, in the wire's success shape with `usage` as its usage object.
fn answer(wire: Wire, usage: &str) -> String {
    match wire {
        Wire::OpenAi => format!(
            r#"{{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "test-model",
                "choices": [{{"index": 0, "message": {{"role": "assistant", "content": "Multiple sclerosis"}},
                "finish_reason": "stop"}}], "usage": {usage}}}"#
        ),
        Wire::Anthropic => format!(
            r#"{{"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
                "content": [{{"type": "text", "text": "Multiple sclerosis"}}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": {usage}}}"#
        ),
        Wire::Gemini => format!(
            r#"{{"candidates": [{{"content": {{"parts": [{{"text": "Multiple sclerosis"}}], "role": "model"}},
                "finishReason": "STOP", "index": 0}}], "usageMetadata": {usage}, "modelVersion": "test-model"}}"#
        ),
    }
}

/// `nmb eval` of one sample task against `server` on `wire`.
fn eval(runs: &Path, wire: Wire, server: &FakeServer, extra: &[&str]) -> Command {
    let mut c = nmb_command(runs);
    c.env(key_var(wire), "test-key-0123456789")
        .args([
            "eval",
            "--suite",
            "sample",
            "--model",
            &model_spec(wire, server),
        ])
        .args(["--limit", "1", "--samples", "1", "--no-bertscore", "-q"])
        .args(extra);
    c
}

/// A server on `wire` whose every answer reports `usage`: the run must end with its samples errored as
/// `malformed_response` (exit 1: nothing answered), each stored error saying `says` (the field and the value
/// when nmb read the number; the wire parser's complaint, the value and its place, when it is no count at all),
/// and no token count stored.
fn usage_case(dir: &Path, name: &str, wire: Wire, usage: &str, says: &'static str) -> Case {
    let runs = dir.join(name.replace(' ', "-"));
    let fake = always(200, answer(wire, usage));
    let command = eval(&runs, wire, &fake, &[]);
    let store_at = runs.clone();
    Case::custom(name, &runs, move || {
        let done = run(command, 2 * TIME_LIMIT);
        let said = done.said();
        if done.code != 1 || said.contains("panicked") {
            return Err(format!("exit {}: {said}", done.code));
        }
        let store = nmb_store::Store::open_dir(&store_at).map_err(|e| e.to_string())?;
        let run = store.list_runs().map_err(|e| e.to_string())?;
        let run = run.first().ok_or("no run stored")?;
        let samples = store.run_samples(&run.run_id).map_err(|e| e.to_string())?;
        for s in &samples {
            let class = s.error_class.as_deref();
            let message = s.error_message.as_deref().unwrap_or("");
            if class != Some("malformed_response") || !message.contains(says) {
                return Err(format!(
                    "sample {} ended {:?} {class:?} {message:?}; expected malformed_response saying {says:?}",
                    s.task_id, s.status
                ));
            }
        }
        let summary = store.summary(&run.run_id).map_err(|e| e.to_string())?;
        if samples.is_empty() || summary.tokens_in != 0 || summary.tokens_out != 0 {
            return Err(format!(
                "{} samples; tokens stored: in {} out {}",
                samples.len(),
                summary.tokens_in,
                summary.tokens_out
            ));
        }
        Ok(())
    })
    .keep(fake)
}

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    const TWO_63: &str = "9223372036854775808";
    const TWO_64: &str = "18446744073709551616";
    let field = "usage.input_tokens = 9223372036854775808";
    let mut cases = vec![
        usage_case(
            dir,
            "openai 2^63 prompt tokens",
            Wire::OpenAi,
            &format!(r#"{{"prompt_tokens": {TWO_63}, "completion_tokens": 3, "total_tokens": 3}}"#),
            field,
        ),
        usage_case(
            dir,
            "anthropic 2^63 input and 2^63 cache reads",
            Wire::Anthropic,
            &format!(
                r#"{{"input_tokens": {TWO_63}, "cache_read_input_tokens": {TWO_63}, "output_tokens": 3}}"#
            ),
            "usage.input_tokens = 18446744073709551615",
        ),
        usage_case(
            dir,
            "gemini 2^63 prompt tokens",
            Wire::Gemini,
            &format!(r#"{{"promptTokenCount": {TWO_63}, "candidatesTokenCount": 3}}"#),
            field,
        ),
        usage_case(
            dir,
            "openai 2^64 completion tokens",
            Wire::OpenAi,
            &format!(r#"{{"prompt_tokens": 3, "completion_tokens": {TWO_64}}}"#),
            "invalid type: floating point `1.8446744073709552e+19`, expected u64",
        ),
        usage_case(
            dir,
            "anthropic negative output tokens",
            Wire::Anthropic,
            r#"{"input_tokens": 3, "output_tokens": -5}"#,
            "invalid value: integer `-5`, expected u64",
        ),
        usage_case(
            dir,
            "gemini fractional prompt tokens",
            Wire::Gemini,
            r#"{"promptTokenCount": 12.5, "candidatesTokenCount": 3}"#,
            "invalid type: floating point `12.5`, expected u64",
        ),
    ];
    // A cost the server reports is not nmb's to store: the answer is taken, the tokens counted.
    let runs = dir.join("huge-cost");
    let costly = always(
        200,
        answer(
            Wire::OpenAi,
            r#"{"prompt_tokens": 11, "completion_tokens": 3, "cost": 1e308, "total_cost": -1e308}"#,
        ),
    );
    let command = eval(&runs, Wire::OpenAi, &costly, &["--json"]);
    cases.push(
        Case::answered(
            "a server reporting a huge cost",
            command,
            &runs,
            &["\"samples_ok\":1"],
        )
        .keep(costly),
    );
    let runs = dir.join("huge-price");
    let fake = server(nmb_fake_server::Config::default());
    let command = eval(
        &runs,
        Wire::OpenAi,
        &fake,
        &["--price", "test-model=1e300,1"],
    );
    cases.push(
        Case::refused(
            "a price past any cost",
            command,
            &runs,
            &["1e300", "at most"],
        )
        .keep(fake),
    );
    cases.push(holding_case(dir, Engine::Sqlite));
    if let Some(pg) = nmb_test_support::postgres::cluster() {
        cases.push(holding_case(dir, Engine::Postgres(pg.fresh_database())));
    }
    cases
}

enum Engine {
    Sqlite,
    /// The database's URL.
    Postgres(String),
}

/// What a hand writes into every call of the run: counts at the limits of a 64-bit integer, and below zero.
const AT_THE_LIMITS: &str = "UPDATE calls SET
     tokens_in = 9223372036854775807, tokens_out = 9223372036854775807,
     tokens_reasoning = 9223372036854775807, tokens_cached_in = 9223372036854775807,
     tokens_cache_write = -9223372036854775808, latency_ms = 9223372036854775807,
     attempts = 2147483647";

/// A store whose calls already hold numbers no sum of 64-bit integers can take: `nmb runs list`, `runs show`
/// (text and JSON), `score`, `report` and the viewer's pages must all still work on it.
fn holding_case(dir: &Path, engine: Engine) -> Case {
    let name = match engine {
        Engine::Sqlite => "a SQLite store already holding counts at the limits",
        Engine::Postgres(_) => "a PostgreSQL store already holding counts at the limits",
    };
    let runs = dir.join(name.replace(' ', "-"));
    let fake = server(nmb_fake_server::Config::default());
    let model = model_spec(Wire::OpenAi, &fake);
    let at = runs.clone();
    Case::custom(name, &runs, move || {
        let store_flag: Vec<String> = match &engine {
            Engine::Sqlite => Vec::new(),
            Engine::Postgres(url) => vec!["--store".into(), url.clone()],
        };
        let nmb = |args: &[&str]| {
            let mut c = nmb_command(&at);
            c.args(&store_flag).args(args);
            run(c, 2 * TIME_LIMIT)
        };
        let eval = nmb(&[
            "eval", "--suite", "sample", "--model", &model, "--limit", "4",
        ]
        .iter()
        .chain(&["--samples", "2", "--no-bertscore", "--json", "-q"])
        .copied()
        .collect::<Vec<_>>());
        let run_id = serde_json::from_str::<serde_json::Value>(eval.stdout.trim())
            .ok()
            .and_then(|v| v["run_id"].as_str().map(String::from))
            .ok_or_else(|| format!("the eval failed: {}", eval.said()))?;
        write_directly(&engine, &at)?;
        let report_dir = at.join("report").display().to_string();
        for args in [
            vec!["runs", "list"],
            vec!["runs", "show", &run_id],
            vec!["runs", "show", &run_id, "--json"],
            vec!["score", &run_id, "--no-bertscore"],
            vec![
                "report",
                &run_id,
                "--price",
                "test-model=2.5,10",
                "--out",
                &report_dir,
            ],
        ] {
            let done = nmb(&args);
            if done.code != 0 || done.said().contains("panicked") {
                return Err(format!(
                    "`nmb {}` exit {}: {}",
                    args.join(" "),
                    done.code,
                    done.said()
                ));
            }
        }
        let shown = nmb(&["runs", "show", &run_id, "--json"]);
        if !shown.stdout.contains("\"tokens_in\":18446744073709551615") {
            return Err(format!(
                "the summary's sums are not the saturated stored counts: {}",
                shown.stdout
            ));
        }
        let viewer = match &engine {
            Engine::Sqlite => Viewer::start(&at, &[])?,
            Engine::Postgres(url) => Viewer::start(&at, &["--store", url])?,
        };
        viewer.answers("/")?;
        viewer.answers(&format!("/runs/{run_id}"))?;
        Ok(())
    })
    .keep(fake)
}

/// Writes [`AT_THE_LIMITS`] into the store's rows, past nmb's checks.
fn write_directly(engine: &Engine, runs: &PathBuf) -> Result<(), String> {
    match engine {
        Engine::Sqlite => {
            let store = nmb_store::Store::open_dir(runs).map_err(|e| e.to_string())?;
            store
                .with_conn("write counts at the limits", |c| {
                    c.execute(AT_THE_LIMITS, [])
                })
                .map_err(|e| e.to_string())?;
        }
        Engine::Postgres(url) => {
            let pg = nmb_test_support::postgres::cluster().ok_or("no PostgreSQL")?;
            pg.psql(url, AT_THE_LIMITS);
        }
    }
    Ok(())
}

#[test]
fn every_store_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
