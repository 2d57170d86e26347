//! Hostile chat templates that would run without end or grow without bound.
//!
//! Each sits in the tiny GGUF model `nmb_test_support::gguf` writes, as its `tokenizer.chat_template`, given to
//! `nmb eval --model local:FILE` on one sample task (with a `--timeout`, which a template must not need): the
//! template is rendered once as the model loads, under minijinja's fuel and an output cap, and refused there
//! with an error naming it, before any request.

use std::path::Path;

use nmb_test_support::gguf::{Gguf, Value};

use super::{check_all, Case};
use crate::common::nmb_command;

/// A case whose model carries `template`, refused saying `says`.
fn refused(dir: &Path, name: &str, template: &str, says: &[&str]) -> Case {
    let mut g = Gguf::tiny();
    g.set("tokenizer.chat_template", Value::Str(template.into()));
    let file = dir.join(format!("{name}.gguf"));
    g.write(&file);
    let runs = dir.join(format!("runs-{name}"));
    let mut c = nmb_command(&runs);
    c.args([
        "eval",
        "--suite",
        "sample",
        "--limit",
        "1",
        "--samples",
        "1",
    ])
    .args(["--max-tokens", "4", "--timeout", "5", "-q", "--model"])
    .arg(format!("local:{}", file.display()));
    let mut words = vec!["chat template of", "tokenizer.chat_template"];
    words.extend(says);
    Case::refused(name, c, &runs, &words)
}

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    vec![
        refused(
            dir,
            "doubled-40-times",
            "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}\
             {% endfor %}{{ ns.s }}",
            &["refused at load", "fuel"],
        ),
        refused(
            dir,
            "nested-ranges",
            "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
            &["refused at load", "fuel"],
        ),
        refused(
            dir,
            "output-flood",
            "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
            &["refused at load", "more than"],
        ),
        refused(
            dir,
            "repeat-past-memory",
            "{{ 'x' * 4000000000 }}",
            &["refused at load", "fuel"],
        ),
        refused(
            dir,
            "tojson-indent",
            "{{ messages | tojson(indent=99999999) }}",
            &["refused at load", "tojson would write more than"],
        ),
        refused(
            dir,
            "format-width",
            "{{ '{:>900000000}'.format(messages[0]['content']) }}",
            &["refused at load", "str.format asks for a width"],
        ),
        refused(
            dir,
            "nested-200000-deep",
            "{% set ns = namespace(l=[]) %}{% for k in range(100) %}{% for i in range(2000) %}\
             {% set ns.l = [ns.l] %}{% endfor %}{% endfor %}{{ ns.l == ns.l }}{{ ns.l }}",
            &["refused at load", "fuel"],
        ),
        refused(
            dir,
            "endless-recursion",
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            &["refused at load", "renders none", "recursion"],
        ),
    ]
}

#[test]
fn every_templates_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
