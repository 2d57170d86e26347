//! The hostile corpus (`nmb_test_support::hostile`, over 60 inputs: lying DICOM and NIfTI headers, bombs,
//! non-finite geometry, render options that ask too much, series members that lead out of their directory,
//! broken raster images) through the binary: `nmb suite validate`, `nmb image info` and `nmb image render` each
//! exit with 1 (`info` with 0 where only the render options are hostile), `nmb suite stats` counts the problems
//! and exits normally, none prints "panicked", and each takes under 5 s and under 1 GB of memory (the child's
//! peak RSS, read with `wait4`). Nothing here needs a download, so nothing is ever skipped.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nmb_test_support::hostile::{write_corpus, Hostile};

use crate::common::measured::{run, Run};
use crate::common::nmb_command;

const TIME_LIMIT: Duration = Duration::from_secs(5);
const RSS_LIMIT_KB: i64 = 1 << 20;

fn commands(item: &Hostile, runs: &Path, views: &Path) -> Vec<(&'static str, Command, i32)> {
    let path = item.path();
    let mut validate = nmb_command(runs);
    validate.args(["suite", "validate"]).arg(&item.suite);
    let mut stats = nmb_command(runs);
    stats.args(["suite", "stats"]).arg(&item.suite);
    let mut info = nmb_command(runs);
    info.args(["image", "info"]).arg(&path);
    let mut render = nmb_command(runs);
    render
        .args(["image", "render"])
        .arg(&path)
        .args(item.render_flags())
        .arg("--out")
        .arg(views);
    let info_code = if item.info_ok { 0 } else { 1 };
    vec![
        ("suite validate", validate, 1),
        ("image info", info, info_code),
        ("image render", render, 1),
    ]
}

/// What is wrong with one run, if anything.
fn judge(item: &Hostile, what: &str, expected_code: i32, run: &Run) -> Option<String> {
    let name = format!("{} ({what})", item.name);
    if run.code != expected_code {
        return Some(format!(
            "{name}: exit {} (expected {expected_code}); stderr: {}",
            run.code, run.stderr
        ));
    }
    if run.stderr.contains("panicked") {
        return Some(format!("{name}: stderr says panicked: {}", run.stderr));
    }
    if run.took > TIME_LIMIT {
        return Some(format!("{name}: took {:?}", run.took));
    }
    if run.peak_rss_kb > RSS_LIMIT_KB {
        return Some(format!("{name}: peak RSS {} MB", run.peak_rss_kb / 1024));
    }
    let said = format!("{}{}", run.stdout, run.stderr);
    if what == "suite validate" && !said.contains(item.expect) {
        return Some(format!("{name}: does not say {:?}: {said}", item.expect));
    }
    None
}

#[test]
fn every_hostile_input_is_refused_by_every_command_without_panic_hang_or_bloat() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&tmp.path().join("corpus"));
    assert!(corpus.len() >= 60, "{} inputs", corpus.len());
    let runs = tmp.path().join("runs");
    let mut wrong = Vec::new();
    let mut checked = 0;
    for item in &corpus {
        let views = tmp.path().join("views").join(item.name);
        for (what, command, code) in commands(item, &runs, &views) {
            checked += 1;
            wrong.extend(judge(item, what, code, &run(command, 2 * TIME_LIMIT)));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} runs went wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
