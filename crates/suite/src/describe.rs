//! Plain-text descriptions of a suite and its cases, as `nmb suite stats` and `nmb suite show` print them.
//!
//! Images are described (format, size, dimensions, hash), never printed. Volumes (DICOM, NIfTI) are rendered
//! with the case's render options while describing them, so that a volume a model could not be shown is
//! reported here too; [`write_views`] writes those views as PNG files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nmb_table::terminal::{excerpt, excerpt_of, inert, inert_lines, quote};

use crate::{
    check_images, load, Case, Image, LoadOptions, Problem, Reference, Suite, SuiteError,
    SuiteStats, Task,
};

/// Why [`write_views`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ViewsError {
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Volume(#[from] nmb_imaging::VolumeError),
}

/// The counts of [`crate::stats`] as aligned `name value` lines, one per line.
pub fn stats_text(s: &SuiteStats) -> String {
    let counts = |m: &BTreeMap<String, usize>| match m.is_empty() {
        true => "-".to_string(),
        false => m
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let rows = [
        (
            "suite",
            format!("{} ({}, version {})", s.id, s.format, s.version),
        ),
        (
            "hash",
            s.hash
                .clone()
                .unwrap_or_else(|| "- (an image could not be read)".into()),
        ),
        (
            "cases",
            format!(
                "{} ({} with content, {} empty placeholders)",
                s.cases, s.cases_with_content, s.empty_cases
            ),
        ),
        (
            "tasks",
            format!(
                "{} ({} with a reference, {} later turns)",
                s.tasks, s.with_reference, s.turns
            ),
        ),
        (
            "images",
            format!("{} ({})", s.images, counts(&s.image_formats)),
        ),
        ("by family", counts(&s.by_family)),
        ("by level", counts(&s.by_level)),
        ("languages", counts(&s.languages)),
        (
            "problems",
            format!("{} error(s), {} warning(s)", s.errors, s.warnings),
        ),
    ];
    // The suite's id, version and format names come from its files.
    rows.iter()
        .map(|(k, v)| format!("{k:<10} {}\n", inert(v)))
        .collect()
}

/// One case readably: metadata, images (each read now to describe it), EHR, notes, and every task with its
/// options, turns and reference. What the file held is made inert for a terminal (control characters other than
/// line breaks and tabs escaped; the case id on its one line).
pub fn case_text(suite_id: &str, case: &Case) -> String {
    let mut out = String::new();
    let lang = case.language.as_deref().unwrap_or("unknown");
    let id = inert(&case.id);
    out += &format!("Case {id} (suite {suite_id}, language {lang})\n");
    if !case.metadata.is_empty() {
        out += &format!("Metadata: {}\n", pairs(case.metadata.iter()));
    }
    out += &format!("\nImages ({}):\n", case.images.len());
    for (i, image) in case.images.iter().enumerate() {
        out += &image_text("  ", i, image);
    }
    if !case.ehr.is_empty() {
        out += "\nEHR:\n";
        for (k, v) in &case.ehr {
            out += &format!("  {k}: {v}\n");
        }
    }
    if !case.notes.trim().is_empty() {
        out += &format!("\nNotes:\n{}\n", indent(&case.notes, "  "));
    }
    out += &format!("\nTasks ({}):\n", case.tasks.len());
    for task in &case.tasks {
        out += &task_text(task);
    }
    inert_lines(&out).into_owned()
}

/// Why `case_id` cannot be shown: it is an empty placeholder (no text, no images), or the suite has no such case
/// (the message lists its first ten case ids).
pub fn missing_case(suite: &Suite, case_id: &str) -> String {
    if suite.empty_cases.iter().any(|c| c == case_id) {
        return format!(
            "{} is an empty placeholder in {} (no text, no images); nothing to show",
            excerpt(case_id),
            inert(&suite.id)
        );
    }
    let known: Vec<String> = suite
        .cases
        .iter()
        .take(10)
        .map(|c| excerpt(&c.id))
        .collect();
    let more = suite.cases.len().saturating_sub(known.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "no case {} in suite {}; its cases are: {}{more}",
        quote(case_id),
        inert(&suite.id),
        known.join(", ")
    )
}

/// Writes each volume's views as `IMAGE-NN.png` in `dir` (created if missing; image ids made file-safe), and
/// calls `written` with each file as soon as it is written. Images that are not volumes are skipped.
pub fn write_views(
    case: &Case,
    dir: &Path,
    mut written: impl FnMut(&Path),
) -> Result<(), ViewsError> {
    std::fs::create_dir_all(dir).map_err(|source| ViewsError::Create {
        path: dir.to_path_buf(),
        source,
    })?;
    for image in &case.images {
        let (Some(path), Some(opts)) = (image.source.path(), &image.render) else {
            continue;
        };
        let (views, _) = nmb_imaging::render_path(path, opts)?;
        let stem: String = image
            .id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        for (n, view) in views.iter().enumerate() {
            let file = dir.join(format!("{stem}-{:02}.png", n + 1));
            std::fs::write(&file, &view.png).map_err(|source| ViewsError::Write {
                path: file.clone(),
                source,
            })?;
            written(&file);
        }
    }
    Ok(())
}

fn image_text(pad: &str, i: usize, image: &Image) -> String {
    if let Some(opts) = &image.render {
        return volume_text(pad, i, image, opts);
    }
    let info = match image.source.read().and_then(|b| nmb_imaging::inspect(&b)) {
        Ok(info) => {
            let dims = match (info.width, info.height) {
                (Some(w), Some(h)) => format!(" {w}x{h}"),
                _ => String::new(),
            };
            format!(
                "{}{dims}, {}, sha256 {}…",
                info.format,
                human_bytes(info.bytes),
                &info.sha256[..12]
            )
        }
        Err(e) => format!("UNREADABLE: {}", with_causes(&e)),
    };
    let mut line = format!(
        "{pad}[{i}] {}: {info}, {}\n",
        image.id,
        image.source.describe()
    );
    if let Some(label) = image.label() {
        line += &format!("{pad}    {label}\n");
    }
    line
}

/// A volume with the views a model would receive (rendered now, so problems show here too).
fn volume_text(pad: &str, i: usize, image: &Image, opts: &nmb_imaging::RenderOptions) -> String {
    let mut out = format!(
        "{pad}[{i}] {}: volume {}, render {}\n",
        image.id,
        image.source.describe(),
        opts.key()
    );
    if let Some(label) = image.label() {
        out += &format!("{pad}    {label}\n");
    }
    let Some(path) = image.source.path() else {
        return out;
    };
    match nmb_imaging::render_path(path, opts) {
        Ok((views, meta)) => {
            let [c, r, s] = meta.source_dims;
            out += &format!(
                "{pad}    {} {c}x{r}x{s}, {} view(s):\n",
                meta.format,
                views.len()
            );
            for v in views {
                let sha = nmb_imaging::content_hash(&v.png);
                out += &format!(
                    "{pad}      {} {}x{} png, sha256 {}…\n",
                    v.label,
                    v.width,
                    v.height,
                    &sha[..12]
                );
            }
        }
        Err(e) => out += &format!("{pad}    UNREADABLE: {e}\n"),
    }
    out
}

fn task_text(task: &Task) -> String {
    let mut out = format!("  {} ({}, {})\n", task.id, task.family, task.level);
    out += &format!("    Question: {}\n", task.question);
    for (letter, text) in &task.options {
        out += &format!("      {letter}. {text}\n");
    }
    for (t, turn) in task.turns.iter().enumerate() {
        out += &format!("    Turn {}:\n", t + 1);
        if !turn.text.is_empty() {
            out += &format!("{}\n", indent(&turn.text, "      "));
        }
        for (i, image) in turn.images.iter().enumerate() {
            out += &image_text("      ", i, image);
        }
        out += &format!("      Question: {}\n", turn.question);
    }
    match &task.reference {
        Some(r) => out += &reference_text(r),
        None => out += "    Reference: none\n",
    }
    if !task.metadata.is_empty() {
        out += &format!("    Metadata: {}\n", pairs(task.metadata.iter()));
    }
    out
}

fn reference_text(r: &Reference) -> String {
    let mut out = String::from("    Reference:\n");
    let mut line = |name: &str, value: &Option<String>| {
        if let Some(v) = value {
            out += &format!("      {name}: {v}\n");
        }
    };
    line("diagnosis", &r.diagnosis);
    line("lesion type", &r.lesion_type);
    line("lesion location", &r.lesion_location);
    line("rationale", &r.rationale);
    line("choice", &r.choice);
    line("answer", &r.answer);
    if !r.synonyms.is_empty() {
        out += &format!("      synonyms: {}\n", r.synonyms.join("; "));
    }
    for (rank, dx) in r.differential.iter().enumerate() {
        out += &format!("      differential {}: {dx}\n", rank + 1);
    }
    out
}

/// An error and each of its causes, `: `-separated (the way `anyhow` prints `{:#}`).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out += &format!(": {c}");
        cause = c.source();
    }
    out
}

fn pairs<'a>(items: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    items
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn indent(text: &str, pad: &str) -> String {
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// What `nmb suite validate` found: every problem, and the counts behind its summary line.
#[derive(Debug, Default)]
pub struct Validation {
    pub problems: Vec<Problem>,
    pub cases: usize,
    pub empty_cases: usize,
    pub tasks: usize,
    pub images: usize,
}

impl Validation {
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|p| p.is_error()).count()
    }

    pub fn warnings(&self) -> usize {
        self.problems.len() - self.errors()
    }

    /// The validation as one JSON object {suite, ok, errors, warnings, cases, empty_cases, tasks, images,
    /// by_kind, problems}; `spec` is the suite as it was named.
    pub fn json(&self, spec: &str) -> serde_json::Value {
        let errors = self.errors();
        serde_json::json!({
            "suite": spec,
            "ok": errors == 0,
            "errors": errors,
            "warnings": self.warnings(),
            "cases": self.cases,
            "empty_cases": self.empty_cases,
            "tasks": self.tasks,
            "images": self.images,
            "by_kind": crate::group_problems(&self.problems, 0)
                .into_iter()
                .map(|g| serde_json::json!({"kind": g.group, "count": g.count}))
                .collect::<Vec<_>>(),
            "problems": self.problems,
        })
    }

    /// The problems counted by kind ([`crate::group_problems`]), one line each (`29504 × file_path: image not
    /// found`), so that the count of a rare kind is not lost in a long list of a common one. Empty without
    /// problems.
    pub fn by_kind(&self) -> Vec<String> {
        crate::group_problems(&self.problems, 0)
            .into_iter()
            .map(|g| format!("{} × {}", g.count, excerpt_of(&g.group, 1000)))
            .collect()
    }

    /// The one-line summary printed after the problems (no newline); `spec` is the suite as it was named.
    pub fn summary(&self, spec: &str) -> String {
        format!(
            "{}: {} error(s), {} warning(s); {} cases with content, {} empty placeholders, {} tasks, {} images \
             checked",
            inert(spec),
            self.errors(),
            self.warnings(),
            self.cases,
            self.empty_cases,
            self.tasks,
            self.images
        )
    }
}

/// Loads the suite named `spec` and checks its images; a fatal load error (an unreadable or unparseable file)
/// becomes the one problem reported.
pub fn validate(spec: &str, options: &LoadOptions) -> Validation {
    let loaded = match load(spec, options) {
        Ok(loaded) => loaded,
        Err(e) => {
            return Validation {
                problems: vec![fatal_problem(spec, e)],
                ..Validation::default()
            }
        }
    };
    let images = check_images(&loaded.suite);
    let mut problems = loaded.problems;
    problems.extend(images.problems);
    Validation {
        problems,
        cases: loaded.suite.cases.len(),
        empty_cases: loaded.suite.empty_cases.len(),
        tasks: loaded.suite.task_count(),
        images: images.images,
    }
}

fn fatal_problem(spec: &str, error: SuiteError) -> Problem {
    match error {
        SuiteError::Invalid(problem) => *problem,
        other => Problem::error(spec, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_case_is_described_with_its_images_and_tasks() {
        let suite = crate::sample::build();
        let case = &suite.cases[0];
        let text = case_text(&suite.id, case);
        assert!(
            text.starts_with(&format!("Case {} (suite sample, language en)\n", case.id)),
            "{text}"
        );
        assert!(text.contains("  [0] "), "{text}");
        assert!(text.contains(": png 224x224, "), "{text}");
        assert!(
            text.contains(&format!("\nTasks ({}):\n", case.tasks.len())),
            "{text}"
        );
        assert!(text.contains("    Reference:\n      diagnosis: "), "{text}");
    }

    #[test]
    fn a_case_from_a_hostile_file_prints_inert() {
        let mut suite = crate::sample::build();
        let case = &mut suite.cases[0];
        case.id = "c\u{1b}[2J".into();
        case.notes = "first line\nsecond\u{1b}]0;title\u{7} line\r".into();
        let text = case_text(&suite.id, &suite.cases[0]);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.starts_with("Case c\\u{1b}[2J (suite"), "{text}");
        assert!(
            text.contains("  first line\n  second\\u{1b}]0;title\\u{7} line\\r"),
            "{text}"
        );
        let missing = missing_case(&suite, "x\u{9b}y");
        assert!(
            missing.starts_with("no case \"x\\u{9b}y\" in suite"),
            "{missing}"
        );
        assert!(!missing.chars().any(char::is_control), "{missing:?}");
    }

    #[test]
    fn a_missing_case_names_the_first_cases() {
        let suite = crate::sample::build();
        let text = missing_case(&suite, "nope");
        assert!(
            text.starts_with("no case \"nope\" in suite sample; its cases are: "),
            "{text}"
        );
        assert!(
            text.ends_with(&format!(" and {} more", suite.cases.len() - 10)),
            "{text}"
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(38042), "37.2 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(indent("a\nb", "  "), "  a\n  b");
    }
}
