//! The run manifests and the scoring configuration of each run.

use std::fmt::Write;

use super::escape;
use super::label;
use crate::input::RunData;

/// The manifest's optional fields, where this run recorded them.
fn recorded_rows(m: &nmb_store::Manifest) -> Vec<(&'static str, String)> {
    let src = &m.suite_source;
    let mut rows = Vec::new();
    let mut push = |k: &'static str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            rows.push((k, v));
        }
    };
    push("suite named as", src.suite_spec.clone());
    push("answer key", src.answers_path.clone());
    push("filters", src.filters.as_ref().map(|f| f.join(", ")));
    push("level", src.level.clone());
    push(
        "suite version / format",
        m.suite_version
            .as_ref()
            .map(|v| format!("{v} / {}", m.suite_format.as_deref().unwrap_or("?"))),
    );
    push("task limit", m.limit.get().map(u64::to_string));
    push("answer language", m.answer_language.get().cloned());
    push(
        "templates",
        m.templates.as_ref().map(|t| {
            t.iter()
                .map(|(family, t)| format!("{family}: {} v{} ({})", t.id, t.version, t.hash))
                .collect::<Vec<_>>()
                .join("; ")
        }),
    );
    push(
        "model identity",
        m.model_identity
            .as_ref()
            .filter(|i| !i.is_empty())
            .map(|i| serde_json::Value::Object(i.clone()).to_string()),
    );
    push("one request per sample", m.n_unsupported.clone());
    push(
        "parameters adjusted",
        m.params_adjusted.as_ref().map(nmb_results::adjusted_text),
    );
    push("scored run (judge run)", m.judged_run().map(str::to_string));
    rows
}

pub(super) fn manifests(h: &mut String, runs: &[RunData]) {
    h.push_str("<h2 id=\"manifest\">Run manifests</h2>");
    for r in runs {
        let m = &r.manifest;
        let mut rows: Vec<(&str, String)> = vec![
            ("run", r.info.run_id.clone()),
            ("status", r.info.status.as_str().into()),
            ("created", nmb_store::format_utc_ms(r.info.created_ms)),
            ("name", m.display_name()),
            ("model", m.model.clone()),
            ("suite", format!("{} ({})", m.suite_id, m.suite_hash)),
            (
                "template",
                format!("{} ({})", m.template_id, m.template_hash),
            ),
            ("parameters", m.params.to_string()),
            ("input mode", m.input_mode.to_string()),
            ("samples per task", m.samples.to_string()),
            ("nmb version (run)", m.nmb_version.clone()),
            ("config hash", r.info.config_hash.clone()),
            (
                "dropped inputs",
                if m.dropped_inputs.is_empty() {
                    "none".into()
                } else {
                    m.dropped_inputs.join("; ")
                },
            ),
        ];
        rows.extend(recorded_rows(m));
        for (k, v) in &m.extra {
            rows.push((k.as_str(), v.to_string()));
        }
        if let Some(s) = &r.scores {
            let c = &s.config;
            rows.push(("scored by nmb", c.nmb_version.clone()));
            rows.push(("score config hash", c.config_hash.clone()));
            let judges: Vec<String> = c
                .judges
                .iter()
                .map(|j| {
                    let adjusted = if j.params_adjusted.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (parameters adjusted: {})",
                            nmb_results::adjusted_text(&j.params_adjusted)
                        )
                    };
                    format!(
                        "{}{}{adjusted}",
                        j.spec,
                        if j.self_grading {
                            " (self-grading)"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            rows.push((
                "judges",
                if judges.is_empty() {
                    "none".into()
                } else {
                    judges.join(", ")
                },
            ));
            rows.push((
                "rubric",
                c.rubric.as_ref().map_or("none".into(), |x| {
                    format!("{} v{} ({})", x.id, x.version, x.hash)
                }),
            ));
            rows.push((
                "bootstrap",
                format!(
                    "seed {}, {} resamples, level {}",
                    c.bootstrap.seed, c.bootstrap.resamples, c.bootstrap.level
                ),
            ));
            rows.push(("suite hash scored", c.suite_hash_scored.clone()));
        }
        let _ = write!(h, "<h3>{}</h3><dl class=\"manifest\">", escape(&label(r)));
        for (k, v) in rows {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
        }
        h.push_str("</dl>");
    }
}
