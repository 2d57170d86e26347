//! What `nmb runs list` and `nmb runs show` print about stored runs: a table of runs grouped by study, one run's
//! counts and manifest as aligned lines, and the JSON object of a run.

use std::collections::BTreeMap;

use nmb_store::{Manifest, RunInfo, RunSummary};
use serde_json::{json, Value};

/// The summary fields at the top level, with the manifest next to them.
pub fn run_json(summary: &RunSummary, info: &RunInfo) -> Value {
    let mut v = serde_json::to_value(summary).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "manifest".into(),
            serde_json::to_value(&info.manifest).unwrap_or_else(|_| json!({})),
        );
    }
    v
}

/// The table of `nmb runs list`: a header, then one line per run (id, status, created, ok/errored/total, suite,
/// model). `rows` come newest first; when any run belongs to a study (`nmb eval --config`), runs are grouped
/// under `study NAME` headings, studies in the order their newest run appears, runs outside a study last under
/// `not in a study`.
pub fn list_text(rows: &[(RunSummary, RunInfo)]) -> String {
    let mut order: Vec<Option<String>> = Vec::new();
    for (_, info) in rows {
        if !order.contains(&info.manifest.study) {
            order.push(info.manifest.study.clone());
        }
    }
    order.sort_by_key(Option::is_none);
    // A stable sort keeps runs newest first within each study.
    let mut rows: Vec<&(RunSummary, RunInfo)> = rows.iter().collect();
    rows.sort_by_key(|(_, info)| order.iter().position(|s| *s == info.manifest.study));
    let mut heading = None;
    let grouped = order.iter().any(Option::is_some);
    let mut out = format!(
        "{:<24} {:<11} {:<24} {:>14}  {:<12} model\n",
        "run id", "status", "created", "ok/err/total", "suite"
    );
    for (s, info) in rows {
        if grouped && heading != Some(&info.manifest.study) {
            heading = Some(&info.manifest.study);
            match &info.manifest.study {
                Some(name) => out += &format!("study {name}\n"),
                None => out += "not in a study\n",
            }
        }
        let field = |v: &str| if v.is_empty() { "-" } else { v }.to_string();
        out += &format!(
            "{:<24} {:<11} {:<24} {:>14}  {:<12} {}\n",
            s.run_id,
            s.status.as_str(),
            s.created_at,
            format!("{}/{}/{}", s.samples_ok, s.samples_errored, s.samples_total),
            field(&info.manifest.suite_id),
            field(&info.manifest.display_name())
        );
    }
    out
}

/// The requests line of `nmb runs show`; an imported run (`imported:MODEL`) sent none: its calls are the lines of
/// the file it was imported from, replayed.
fn requests(s: &RunSummary, m: &Manifest, errors: &str) -> String {
    if m.model.starts_with("imported:") {
        return format!(
            "none sent: {} lines of the imported file replayed ({} recorded as errors: {errors})",
            s.calls, s.calls_errored
        );
    }
    format!(
        "{} sent ({} calls, {} errored: {errors}), {} answers from the store",
        s.requests_sent, s.calls, s.calls_errored, s.cache_hits
    )
}

/// The text of `nmb runs show`: one aligned `name value` line each for the run's status, manifest (model, suite,
/// inputs, parameters, templates, dropped inputs, nmb version), sample counts, errors by class, requests, tokens
/// and latency.
pub fn show_text(s: &RunSummary, info: &RunInfo) -> String {
    let m = &info.manifest;
    let text = |v: &str| if v.is_empty() { "-" } else { v }.to_string();
    let classes = |c: &BTreeMap<String, u64>| {
        if c.is_empty() {
            "-".to_string()
        } else {
            c.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let dropped = text(&m.dropped_inputs.join("; "));
    let rows = [
        ("run", s.run_id.clone()),
        ("status", s.status.as_str().to_string()),
        ("created", s.created_at.clone()),
        ("updated", s.updated_at.clone()),
        ("name", text(&m.display_name())),
        ("model", text(&m.model)),
        (
            "suite",
            format!("{} (hash {})", text(&m.suite_id), text(&m.suite_hash)),
        ),
        ("inputs", text(m.input_mode.as_str())),
        ("samples/task", m.samples.to_string()),
        ("parameters", m.params.to_string()),
        ("templates", text(&m.template_hash)),
        ("dropped", dropped),
        ("nmb", text(&m.nmb_version)),
        (
            "samples",
            format!(
                "{} total: {} ok, {} errored, {} pending",
                s.samples_total, s.samples_ok, s.samples_errored, s.samples_pending
            ),
        ),
        ("errors", classes(&s.errors_by_class)),
        (
            "requests",
            requests(s, m, &classes(&s.call_errors_by_class)),
        ),
        (
            "tokens",
            format!("in {}, out {}", s.tokens_in, s.tokens_out),
        ),
        (
            "latency ms",
            format!(
                "mean {:.0}, p50 {}, p90 {}, p99 {}, max {} (over {} calls)",
                s.latency_ms.mean,
                s.latency_ms.p50,
                s.latency_ms.p90,
                s.latency_ms.p99,
                s.latency_ms.max,
                s.latency_ms.count
            ),
        ),
    ];
    let mut text: String = rows.iter().map(|(k, v)| format!("{k:<13} {v}\n")).collect();
    for b in &s.batch_resubmissions {
        text += &format!("{:<13} {}\n", "resubmitted", resubmitted(b));
    }
    text
}

/// A batch submitted again: which refused batches it replaced, the provider's words, and the round size.
fn resubmitted(b: &nmb_store::BatchRecord) -> String {
    let Some(r) = &b.resubmission else {
        return b.batch_id.clone();
    };
    format!(
        "batch {} ({} requests) replaced {}, refused by the provider: {} (batches of at most {} requests from then on)",
        b.batch_id,
        b.requests,
        r.replaces.join(", "),
        r.reason,
        r.round
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_store::{LatencyStats, Manifest, RunStatus};

    fn run(id: &str, study: Option<&str>) -> (RunSummary, RunInfo) {
        let manifest = Manifest {
            model: "openai:gpt-x".into(),
            suite_id: "sample".into(),
            study: study.map(String::from),
            ..Manifest::default()
        };
        let summary = RunSummary {
            run_id: id.into(),
            status: RunStatus::Finished,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:01:00.000Z".into(),
            config_hash: "h".into(),
            samples_total: 3,
            samples_ok: 2,
            samples_errored: 1,
            samples_pending: 0,
            requests_sent: 4,
            calls: 3,
            calls_errored: 1,
            cache_hits: 0,
            errors_by_class: [("timeout".to_string(), 1)].into(),
            call_errors_by_class: [("timeout".to_string(), 1)].into(),
            tokens_in: 10,
            tokens_out: 20,
            tokens_reasoning: 0,
            tokens_cached_in: 0,
            tokens_cache_write: 0,
            batch: Default::default(),
            batch_resubmissions: Vec::new(),
            latency_ms: LatencyStats::default(),
        };
        let info = RunInfo {
            run_id: id.into(),
            created_ms: 0,
            updated_ms: 0,
            status: RunStatus::Finished,
            config_hash: "h".into(),
            manifest,
        };
        (summary, info)
    }

    #[test]
    fn runs_are_grouped_by_study_with_runs_outside_a_study_last() {
        let rows = [run("r3", None), run("r2", Some("s")), run("r1", Some("s"))];
        let text = list_text(&rows);
        let firsts: Vec<&str> = text
            .lines()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(firsts, ["run", "study", "r2", "r1", "not", "r3"], "{text}");
        assert!(text.lines().nth(2).unwrap().contains("2/1/3"), "{text}");
        // Without any study there are no headings.
        assert_eq!(list_text(&rows[..1]).lines().count(), 2);
    }

    #[test]
    fn show_text_has_one_aligned_line_per_field() {
        let (s, info) = run("r1", None);
        let text = show_text(&s, &info);
        assert!(
            text.starts_with("run           r1\nstatus        finished\n"),
            "{text}"
        );
        assert!(text.contains("\nerrors        timeout 1\n"), "{text}");
        assert!(text.contains("\ndropped       -\n"), "{text}");
        assert_eq!(run_json(&s, &info)["manifest"]["model"], "openai:gpt-x");
    }
}
