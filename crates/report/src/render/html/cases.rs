//! Per case: thumbnails, the prompt, the reference, and every sampled answer with how it was scored.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use nmb_results::structured::{FieldOutcome, StructuredVerdict};
use nmb_results::{JudgeDecision, MatchOutcome, SampleScore, SampleStatus};
use nmb_store::SampleRecord;

use super::enum_text;
use super::escape;
use crate::input::RunData;
use crate::ReportOptions;

/// The case a task belongs to: from the scores, else the task id up to its first `/`.
fn case_of<'a>(task_id: &'a str, scored: &BTreeMap<(&str, u32), &'a SampleScore>) -> &'a str {
    scored
        .range((task_id, 0)..=(task_id, u32::MAX))
        .next()
        .map(|(_, s)| s.case_id.as_str())
        .unwrap_or_else(|| task_id.split('/').next().unwrap_or(task_id))
}

pub(super) fn cases(h: &mut String, runs: &[RunData], opts: &ReportOptions) {
    // case -> task -> runs that have it
    let mut tree: BTreeMap<String, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
    let scored: Vec<BTreeMap<(&str, u32), &SampleScore>> =
        runs.iter().map(RunData::scored).collect();
    for (i, r) in runs.iter().enumerate() {
        for task in r
            .samples
            .iter()
            .map(|s| s.task_id.as_str())
            .collect::<BTreeSet<_>>()
        {
            let case = case_of(task, &scored[i]).to_string();
            let runs_of = tree
                .entry(case)
                .or_default()
                .entry(task.to_string())
                .or_default();
            runs_of.push(i);
        }
    }
    let _ = write!(h, "<h2 id=\"cases\">Cases ({})</h2>", tree.len());
    let open = if tree.len() <= opts.expand_cases_up_to {
        " open"
    } else {
        ""
    };
    for (case, tasks) in &tree {
        let _ = write!(
            h,
            "<details class=\"case\"{open}><summary>{} <span class=\"muted\">({} task(s))</span></summary>",
            escape(case),
            tasks.len()
        );
        thumbnails(h, runs, tasks);
        for (task, run_ids) in tasks {
            task_section(h, runs, &scored, task, run_ids);
        }
        h.push_str("</details>");
    }
}

/// The CSS class carrying one image (hex digits only, so it needs no escaping).
fn thumb_class(sha: &str) -> String {
    let hex: String = sha
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(24)
        .collect();
    format!("t{hex}")
}

/// One CSS rule per distinct thumbnail, so an image shared by many cases is embedded once.
pub(super) fn thumbnail_styles(runs: &[RunData]) -> String {
    let mut seen = BTreeSet::new();
    let mut css = String::new();
    for r in runs {
        for (sha, t) in &r.thumbnails {
            let Some(b64) = &t.png_base64 else { continue };
            if !seen.insert(thumb_class(sha)) {
                continue;
            }
            // Base64 holds only [A-Za-z0-9+/=]; filtering keeps anything else from closing the string, the
            // rule or the style element.
            let clean: String = b64
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
                .collect();
            let _ = write!(
                css,
                ".{}{{background-image:url(\"data:image/png;base64,{clean}\")}}",
                thumb_class(sha)
            );
        }
    }
    css
}

pub(super) fn thumbnails(h: &mut String, runs: &[RunData], tasks: &BTreeMap<String, Vec<usize>>) {
    let mut seen = BTreeSet::new();
    let mut html = String::new();
    for (task, run_ids) in tasks {
        for &i in run_ids {
            let Some(prompt) = runs[i].prompts.get(task) else {
                continue;
            };
            for sha in &prompt.images {
                if !seen.insert(sha.clone()) {
                    continue;
                }
                let Some(t) = runs[i].thumbnails.get(sha) else {
                    continue;
                };
                match &t.png_base64 {
                    Some(_) => {
                        let _ = write!(
                            html,
                            "<span class=\"thumb {}\" role=\"img\" aria-label=\"{}\" title=\"{}\" \
                             style=\"width:{}px;height:{}px\"></span>",
                            thumb_class(sha),
                            escape(&format!("image {}", &sha[..sha.len().min(12)])),
                            escape(&format!("sha256 {sha}")),
                            t.width,
                            t.height,
                        );
                    }
                    None => {
                        let _ = write!(
                            html,
                            "<span class=\"note\">{}</span>",
                            escape(t.problem.as_deref().unwrap_or("no thumbnail"))
                        );
                    }
                }
            }
        }
    }
    if !html.is_empty() {
        let _ = write!(h, "<div class=\"thumbs\">{html}</div>");
    }
}

fn task_section(
    h: &mut String,
    runs: &[RunData],
    scored: &[BTreeMap<(&str, u32), &SampleScore>],
    task: &str,
    run_ids: &[usize],
) {
    let first = scored.iter().find_map(|m| {
        m.range((task, 0)..=(task, u32::MAX))
            .next()
            .map(|(_, s)| *s)
    });
    let kind = first.map_or(String::new(), |s| {
        format!(
            " <span class=\"tag\">{}</span><span class=\"tag\">{}</span>",
            s.family.as_str(),
            s.level.as_str()
        )
    });
    let _ = write!(h, "<h3>{}{kind}</h3>", escape(task));
    if let Some(prompt) = run_ids.iter().find_map(|&i| runs[i].prompts.get(task)) {
        let _ = write!(
            h,
            "<details><summary class=\"muted\">prompt</summary><div class=\"answer\">{}</div></details>",
            escape(&prompt.text)
        );
    }
    if let Some(reference) = first.and_then(reference_text) {
        let _ = write!(h, "<p><b>Reference:</b> {}</p>", escape(&reference));
    }
    for &i in run_ids {
        let r = &runs[i];
        let _ = write!(h, "<div><b>{}</b>", escape(&r.name()));
        for s in r.samples.iter().filter(|s| s.task_id == task) {
            sample(h, s, scored[i].get(&(task, s.sample_index)).copied());
        }
        h.push_str("</div>");
    }
}

fn reference_text(s: &SampleScore) -> Option<String> {
    if let Some(d) = &s.diagnosis {
        return Some(d.reference.clone());
    }
    if let Some(l) = &s.lesion {
        let parts: Vec<&str> = [l.reference_type.as_deref(), l.reference_location.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        return (!parts.is_empty()).then(|| parts.join(" · "));
    }
    None
}

pub(super) fn sample(h: &mut String, rec: &SampleRecord, score: Option<&SampleScore>) {
    let (class, verdict) = match (rec.status, score) {
        (nmb_store::SampleStatus::Errored, _) => ("err", "errored".to_string()),
        (nmb_store::SampleStatus::Pending, _) => ("err", "pending".to_string()),
        (_, Some(s)) => match (s.status, s.correct) {
            (SampleStatus::NoReference, _) => ("err", "no reference".into()),
            (SampleStatus::ParseFailed, _) => ("bad", "parse failed".into()),
            (_, Some(true)) => ("ok", "correct".into()),
            (_, Some(false)) if s.unresolved => ("bad", "wrong (unresolved match)".into()),
            (_, Some(false)) => ("bad", "wrong".into()),
            (_, None) => ("err", "not scored".into()),
        },
        (_, None) => ("err", "not scored".into()),
    };
    let _ = write!(
        h,
        "<div class=\"sample {class}\"><span class=\"tag {class}\">sample {} · {}</span>",
        rec.sample_index,
        escape(&verdict)
    );
    if let Some(e) = &rec.error_class {
        let _ = write!(
            h,
            "<span class=\"tag err\">error class: {}</span> <span class=\"muted\">{}</span>",
            escape(e),
            escape(rec.error_message.as_deref().unwrap_or(""))
        );
    }
    if let Some(t) = score.and_then(|s| s.taxonomy.as_ref()) {
        let _ = write!(
            h,
            "<span class=\"tag\">taxonomy: {}</span> <span class=\"muted\">{}</span>",
            escape(t.category.map_or("unlabelled", |c| c.as_str())),
            escape(t.justification.as_deref().unwrap_or(""))
        );
    }
    for t in &rec.turns {
        if rec.turns.len() > 1 {
            let _ = write!(h, "<div class=\"muted\">turn {}</div>", t.turn_index + 1);
        }
        match &t.text {
            Some(text) => {
                let _ = write!(h, "<div class=\"answer\">{}</div>", escape(text));
            }
            None => {
                let _ = write!(
                    h,
                    "<div class=\"muted\">no answer ({})</div>",
                    escape(t.error_class.as_deref().unwrap_or("none"))
                );
            }
        }
    }
    if let Some(s) = score {
        parsed(h, s);
    }
    h.push_str("</div>");
}

fn parsed(h: &mut String, s: &SampleScore) {
    if let Some(e) = &s.parse_error {
        let _ = write!(h, "<div class=\"muted\">parse: {}</div>", escape(e));
    }
    if let Some(d) = &s.diagnosis {
        h.push_str("<div>Parsed differential:</div><ol>");
        for c in &d.candidates {
            let outcome = match c.outcome {
                MatchOutcome::Match => "match",
                MatchOutcome::NoMatch => "no match",
                MatchOutcome::Inconclusive => "inconclusive",
            };
            let method = c
                .method
                .map_or(String::new(), |m| format!(" by {}", enum_text(&m)));
            let _ = write!(
                h,
                "<li>{} <span class=\"tag\">{}{}</span>",
                escape(&c.diagnosis),
                outcome,
                escape(&method)
            );
            if let Some(j) = &c.judge {
                judge(h, j);
            }
            h.push_str("</li>");
        }
        h.push_str("</ol>");
    } else if let Some(p) = &s.parsed {
        if !p.differential.is_empty() {
            h.push_str("<div>Parsed differential:</div><ol>");
            for d in &p.differential {
                let _ = write!(h, "<li>{}</li>", escape(&d.diagnosis));
            }
            h.push_str("</ol>");
        }
    }
    if let Some(l) = &s.lesion {
        for (name, m) in [("type", &l.type_match), ("location", &l.location_match)] {
            if let Some(m) = m {
                let _ = write!(
                    h,
                    "<div>Lesion {name}: {} <span class=\"tag\">{}</span></div>",
                    escape(m.candidate.as_deref().unwrap_or("–")),
                    escape(&enum_text(&m.outcome))
                );
                if let Some(j) = &m.judge {
                    judge(h, j);
                }
            }
        }
    }
    if let Some(b) = &s.breadth {
        let _ = write!(
            h,
            "<div>Extracted: {}{}{}</div>",
            escape(b.extracted.as_deref().unwrap_or("–")),
            if b.extraction_failed {
                " <span class=\"tag bad\">extraction failed</span>"
            } else {
                ""
            },
            b.token_recall
                .map_or(String::new(), |r| format!(" · token recall {r:.2}"))
        );
    }
    if let Some(r) = &s.rubric {
        let scores: Vec<String> = r
            .scores
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d.dimension,
                    d.score.map_or("–".into(), |v| format!("{v:.1}"))
                )
            })
            .collect();
        let _ = write!(h, "<div>Rubric: {}</div>", escape(&scores.join(" · ")));
        for j in &r.judges {
            let _ = write!(
                h,
                "<div class=\"muted\">{}{}: {}</div>",
                escape(&j.judge),
                if j.self_grading {
                    " (self-grading)"
                } else {
                    ""
                },
                escape(
                    j.rationale
                        .as_deref()
                        .or(j.failure.as_deref())
                        .unwrap_or("")
                )
            );
        }
    }
    if let Some(b) = &s.bertscore {
        let _ = write!(
            h,
            "<div>BERTScore P {:.3} · R {:.3} · F1 {:.3}</div>",
            b.p, b.r, b.f
        );
    }
    if let Some(v) = &s.structured {
        structured(h, v);
    }
}

/// A NeuroVLM-Bench answer: whether it is valid JSON and schema-valid, each field's outcome, the flags it raised.
fn structured(h: &mut String, v: &StructuredVerdict) {
    let validity = match (v.valid_json, v.schema_valid) {
        (true, true) => ("ok", "schema-valid JSON".to_string()),
        (true, false) => ("bad", "valid JSON, not schema-valid".to_string()),
        (false, _) => (
            "bad",
            format!(
                "not JSON: {}",
                v.json_error.as_deref().unwrap_or("unreadable")
            ),
        ),
    };
    let _ = write!(
        h,
        "<div class=\"structured\">Fields: <span class=\"tag {}\">{}</span>",
        validity.0,
        escape(&validity.1)
    );
    for (field, outcome) in &v.fields {
        let class = match outcome {
            FieldOutcome::Correct => "ok",
            FieldOutcome::Abstained => "err",
            FieldOutcome::Wrong | FieldOutcome::Invalid | FieldOutcome::Missing => "bad",
        };
        let _ = write!(
            h,
            "<span class=\"tag {class} field\">{}: {}</span>",
            escape(field),
            escape(&enum_text(outcome))
        );
    }
    for flag in &v.flags {
        let _ = write!(
            h,
            "<span class=\"tag bad flag\">flag: {}</span>",
            escape(flag)
        );
    }
    h.push_str("</div>");
}

pub(super) fn judge(h: &mut String, j: &JudgeDecision) {
    h.push_str("<ul>");
    for v in &j.verdicts {
        let said = match v.equivalent {
            Some(true) => "equivalent",
            Some(false) => "not equivalent",
            None => "no valid verdict",
        };
        let _ = write!(
            h,
            "<li class=\"muted\">judge {}{}: {said} — {}</li>",
            escape(&v.judge),
            if v.self_grading {
                " (self-grading)"
            } else {
                ""
            },
            escape(
                v.rationale
                    .as_deref()
                    .or(v.failure.as_deref())
                    .unwrap_or("")
            )
        );
    }
    h.push_str("</ul>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structured_verdict_shows_each_field_and_flag_escaped() {
        let v = StructuredVerdict {
            valid_json: false,
            schema_valid: false,
            json_error: Some("expected value at <script>".into()),
            fields: [
                ("diagnosis_name".to_string(), FieldOutcome::Missing),
                ("plane".to_string(), FieldOutcome::Abstained),
                ("modality<i>".to_string(), FieldOutcome::Correct),
            ]
            .into_iter()
            .collect(),
            flags: vec!["missing_field".into(), "<b>odd</b>".into()],
        };
        let mut h = String::new();
        structured(&mut h, &v);
        assert!(
            !h.contains("<script>") && !h.contains("<b>") && !h.contains("<i>"),
            "{h}"
        );
        assert!(h.contains("not JSON: expected value at &lt;script&gt;"));
        assert_eq!(h.matches("field\">").count(), 3, "{h}");
        assert!(h.contains("<span class=\"tag bad field\">diagnosis_name: missing</span>"));
        assert!(h.contains("<span class=\"tag err field\">plane: abstained</span>"));
        assert!(h.contains("<span class=\"tag ok field\">modality&lt;i&gt;: correct</span>"));
        assert!(h.contains("<span class=\"tag bad flag\">flag: &lt;b&gt;odd&lt;/b&gt;</span>"));
    }
}
