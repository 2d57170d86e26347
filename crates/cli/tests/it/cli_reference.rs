//! The command-line reference in `docs/cli.md` is what the binary prints, and the help shows what each command
//! takes.

use std::path::Path;
use std::process::Command;

use crate::common::text;

fn nmb(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .env_remove("NMB_RUNS_DIR")
        .env_remove("NMB_STORE_URL")
        .output()
        .expect("running nmb");
    assert!(out.status.success(), "nmb {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn committed_reference_is_what_the_binary_prints() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let printed = nmb(&["markdown-help"]);
    assert!(printed.contains("## `nmb eval`"), "{printed}");
    if committed != printed {
        let line = committed
            .lines()
            .zip(printed.lines())
            .position(|(a, b)| a != b)
            .map_or(
                committed.lines().count().min(printed.lines().count()),
                |n| n,
            )
            + 1;
        panic!(
            "docs/cli.md is not what `nmb markdown-help` prints (first difference at line {line}); regenerate it \
             from the repository's root with: cargo run -p nmb -- markdown-help > docs/cli.md"
        );
    }
}

#[test]
fn every_command_has_a_description() {
    let top = nmb(&["--help"]);
    let listed: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description too long for one line goes on under itself.
        .filter(|l| !l.starts_with("   "))
        .collect();
    assert!(listed.iter().any(|l| l.trim_start().starts_with("review ")));
    for line in listed {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(
            words.len() > 1,
            "`nmb --help` lists a command without a description: {line:?}"
        );
    }
    let review = nmb(&["review", "--help"]);
    assert!(
        !review.starts_with("Usage:"),
        "nmb review --help has no description:\n{review}"
    );
}

#[test]
fn store_flags_are_shown_only_where_a_store_is_used() {
    let storeless: [&[&str]; 3] = [
        &["image", "info", "--help"],
        &["image", "render", "--help"],
        &["bertscore", "--help"],
    ];
    for args in storeless {
        let help = nmb(args);
        for flag in ["--runs-dir", "--store"] {
            assert!(!help.contains(flag), "nmb {args:?} shows {flag}:\n{help}");
        }
    }
    for command in ["eval", "score", "report", "serve"] {
        let help = nmb(&[command, "--help"]);
        assert!(
            help.contains("--runs-dir") && help.contains("--store"),
            "nmb {command} --help"
        );
    }
}
