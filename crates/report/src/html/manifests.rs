//! The run manifests and the scoring configuration of each run.

use std::fmt::Write;

use super::escape;
use super::label;
use crate::input::RunData;

pub(super) fn manifests(h: &mut String, runs: &[RunData]) {
    h.push_str("<h2 id=\"manifest\">Run manifests</h2>");
    for r in runs {
        let m = &r.manifest;
        let mut rows: Vec<(&str, String)> = vec![
            ("run", r.info.run_id.clone()),
            ("status", r.info.status.as_str().into()),
            ("created", nmb_store::format_utc_ms(r.info.created_ms)),
            ("model", m.model.clone()),
            ("suite", format!("{} ({})", m.suite_id, m.suite_hash)),
            (
                "template",
                format!("{} ({})", m.template_id, m.template_hash),
            ),
            ("parameters", m.params.to_string()),
            ("input mode", m.input_mode.clone()),
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
                    format!(
                        "{}{}",
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
