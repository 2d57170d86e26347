#!/usr/bin/env python3
"""The workspace's dependency rules, checked on `cargo metadata` (and, for SQL, on the sources).

Only normal dependencies count (not dev- or build-dependencies). Prints every violation, one a line, naming the
crate, the forbidden dependency and the rule, and exits 1 if there is any. `--self-test` checks that each rule
catches a violation on made-up metadata and passes a clean one. `scripts/lint.sh` runs both.
"""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

# The rules. Crates are package names (the CLI's package is `nmb`, in crates/cli).
NO_WORKSPACE_DEPS = {  # crate -> why it depends on no workspace crate
    "nmb-chat": "chat types are the leaf every layer shares; any nmb dependency would pull a layer under all others",
    "nmb-store": "the store keeps bytes for every layer; it must not know about the layers that use it",
}
NEVER_REACHES = [  # (crates, forbidden even transitively, why)
    (["nmb-report", "nmb-serve"], ["nmb-run", "nmb-local"],
     "the report and the viewer read stored results; they never run an evaluation or a model"),
    (["nmb-report", "nmb-serve", "nmb-review"], ["nmb-score", "nmb-judges", "nmb-requests", "nmb-record"],
     "readers of scores read them through nmb-results; they never score, ask a judge, hold a backend or record "
     "a call"),
    (["nmb-results"], ["nmb-requests", "nmb-record", "nmb-local", "nmb-run", "nmb-judges", "nmb-score"],
     "the read model of scores asks no model: every reader links it, and through it nothing that does"),
    (["nmb-score", "nmb-judges"], ["nmb-local"],
     "scoring is handed its judges as backends by its caller; it must not build or link the in-process engine"),
]
NO_DIRECT = [  # (crates, workspace crates they may not name directly, why)
    (["nmb-report", "nmb-serve"], ["nmb-requests"],
     "the report and the viewer name models through nmb-chat's ModelSpec and never hold a backend; nmb-score, "
     "which they read results from, is the one layer between them and the judges it asks"),
]
ONLY_HOLDER = [  # (the one crate allowed, external crates no other may depend on, why)
    ("nmb-store", ["rusqlite", "libsqlite3-sys", "postgres", "tokio-postgres", "tokio-postgres-rustls",
                   "postgres-types", "sqlx", "diesel", "sea-orm", "mysql", "duckdb"],
     "only nmb-store holds SQL: every query is written once against its engine-neutral seam"),
    ("nmb", ["clap"], "only the CLI parses command lines; the library crates take typed arguments"),
]
SQL_HOLDER = "nmb-store"  # the only crate whose `src/` may contain SQL statements (same why as above)
# An SQL statement opening a string literal ("SELECT ..., r#"INSERT INTO ...) or a line of a multi-line one.
# Upper case only: prose such as "Update your differential" or "select the model" does not match.
SQL_RE = re.compile(r'(?:"|^\s*)(?:SELECT\s+\S|INSERT\s+(?:OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s'
                    r'|CREATE\s+(?:TABLE|(?:UNIQUE\s+)?INDEX|VIEW|TRIGGER)\s|DROP\s+(?:TABLE|INDEX)\s|ALTER\s+TABLE\s'
                    r'|PRAGMA\s+\w)')
DATA_FLOW_WHY = "a crate may only depend on crates listed before it in the root Cargo.toml's members (data-flow order)"


def load(root):
    """Returns (members: package names in `members` order, deps: name -> set of normal dependency names,
    dirs: name -> crate directory relative to root)."""
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=root,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    meta = json.loads(out)
    deps, dirs = {}, {}
    for p in meta["packages"]:
        deps[p["name"]] = {d["name"] for d in p["dependencies"] if d["kind"] is None}
        dirs[p["name"]] = Path(p["manifest_path"]).parent.relative_to(root).as_posix()
    by_dir = {d: n for n, d in dirs.items()}
    with open(root / "Cargo.toml", "rb") as f:
        members = [by_dir[m.rstrip("/")] for m in tomllib.load(f)["workspace"]["members"]]
    return members, deps, dirs


def path_to(deps, start, target):
    """The shortest chain of normal dependencies from start to target, or None."""
    seen, queue = {start: None}, [start]
    for name in queue:
        for dep in sorted(deps.get(name, ())):
            if dep in deps and dep not in seen:  # follow workspace crates only
                seen[dep] = name
                queue.append(dep)
            if dep == target:
                chain = [target, name]
                while seen[chain[-1]] is not None:
                    chain.append(seen[chain[-1]])
                return chain[::-1]
    return None


def check_graph(members, deps):
    """Every violation of the metadata rules, as messages."""
    out, ws = [], set(deps)
    for crate, why in NO_WORKSPACE_DEPS.items():
        for dep in sorted(deps.get(crate, set()) & ws):
            out.append(f"{crate} depends on {dep}: rule '{crate} depends on no nmb crate' ({why})")
    for crates, forbidden, why in NEVER_REACHES:
        for crate in crates:
            for target in forbidden:
                chain = path_to(deps, crate, target)
                if chain:
                    out.append(f"{crate} depends on {target} ({' -> '.join(chain)}): rule '{crate} never depends on "
                               f"{', '.join(forbidden)}, even transitively' ({why})")
    for crates, forbidden, why in NO_DIRECT:
        for crate in crates:
            for dep in sorted(deps.get(crate, set()) & set(forbidden)):
                out.append(f"{crate} depends on {dep}: rule '{crate} does not depend on {', '.join(forbidden)} "
                           f"directly' ({why})")
    for holder, externals, why in ONLY_HOLDER:
        for crate in sorted(ws - {holder}):
            for dep in sorted(deps[crate] & set(externals)):
                out.append(f"{crate} depends on {dep}: rule 'only {holder} depends on {dep}' ({why})")
    rank = {name: i for i, name in enumerate(members)}
    for crate in members:
        for dep in sorted(deps[crate] & ws, key=rank.get):
            if rank[dep] > rank[crate]:
                out.append(f"{crate} depends on {dep}, listed after it in members: rule 'no dependency points up the "
                           f"data flow' ({DATA_FLOW_WHY})")
    return out


def check_sql(root, dirs):
    """Every line outside the SQL holder's `src/` that looks like an SQL statement."""
    out = []
    for crate, d in sorted(dirs.items()):
        if crate == SQL_HOLDER:
            continue
        for f in sorted((root / d / "src").rglob("*.rs")):
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if SQL_RE.search(line):
                    out.append(f"{crate} holds SQL at {f.relative_to(root)}:{n}: rule 'only {SQL_HOLDER} holds SQL' "
                               f"({line.strip()[:60]})")
    return out


def self_test():
    """Each rule catches a made-up violation, and a clean graph passes."""
    members = ["nmb-chat", "nmb-suite", "nmb-requests", "nmb-local", "nmb-run", "nmb-store", "nmb-record",
               "nmb-results", "nmb-judges", "nmb-score", "nmb-review", "nmb-report", "nmb-serve", "nmb"]
    clean = {
        "nmb-chat": {"serde"}, "nmb-suite": {"serde"}, "nmb-requests": {"nmb-chat", "reqwest"},
        "nmb-local": {"nmb-chat", "nmb-requests"}, "nmb-run": {"nmb-requests", "nmb-local", "nmb-suite"},
        "nmb-store": {"rusqlite", "postgres"}, "nmb-record": {"nmb-requests", "nmb-store"},
        "nmb-results": {"nmb-store", "nmb-chat"}, "nmb-judges": {"nmb-record", "nmb-results"},
        "nmb-score": {"nmb-judges", "nmb-results", "nmb-store", "nmb-chat"},
        "nmb-review": {"nmb-results", "nmb-store"}, "nmb-report": {"nmb-results", "nmb-review", "nmb-store"},
        "nmb-serve": {"nmb-report"}, "nmb": {"clap", "nmb-run", "nmb-serve", "nmb-score"},
    }
    assert check_graph(members, clean) == [], check_graph(members, clean)
    cases = [  # (crate, dependency added, words the message must contain)
        ("nmb-chat", "nmb-suite", "nmb-chat depends on no nmb crate"),
        ("nmb-store", "nmb-chat", "nmb-store depends on no nmb crate"),
        ("nmb-report", "nmb-requests", "nmb-report does not depend on nmb-requests directly"),
        ("nmb-report", "nmb-run", "nmb-report never depends on"),
        ("nmb-score", "nmb-run", "nmb-score depends on nmb-local (nmb-score -> nmb-run -> nmb-local)"),
        ("nmb-serve", "nmb-run", "nmb-serve depends on nmb-run (nmb-serve -> nmb-run)"),
        ("nmb-report", "nmb-score", "nmb-report depends on nmb-score (nmb-report -> nmb-score)"),
        ("nmb-review", "nmb-judges", "nmb-review depends on nmb-record (nmb-review -> nmb-judges -> nmb-record)"),
        ("nmb-serve", "nmb-requests", "nmb-serve depends on nmb-requests (nmb-serve -> nmb-requests)"),
        ("nmb-results", "nmb-record", "nmb-results depends on nmb-record (nmb-results -> nmb-record)"),
        ("nmb-judges", "nmb-run", "nmb-judges depends on nmb-local (nmb-judges -> nmb-run -> nmb-local)"),
        ("nmb-report", "tokio-postgres", "only nmb-store depends on tokio-postgres"),
        ("nmb-suite", "clap", "only nmb depends on clap"),
        ("nmb-suite", "nmb-requests", "nmb-suite depends on nmb-requests, listed after it"),
    ]
    for crate, dep, words in cases:
        deps = {k: set(v) for k, v in clean.items()}
        deps[crate].add(dep)
        found = check_graph(members, deps)
        assert any(words in m for m in found), (crate, dep, found)
    sql = ['"SELECT id FROM runs WHERE x = ?1"', '    INSERT INTO runs (id) VALUES (1);', 'r#"CREATE TABLE t (',
           '"DELETE FROM calls"', '"UPDATE runs SET x = 1"', 'CREATE UNIQUE INDEX i ON t (x);']
    prose = ['"Update your differential in the light of the MRI."', '// SELECT the model', '"Select one answer"',
             'let update = 1;', '"DELETE the file"', '/// Insert into the map']
    assert all(SQL_RE.search(s) for s in sql), [s for s in sql if not SQL_RE.search(s)]
    assert not any(SQL_RE.search(s) for s in prose), [s for s in prose if SQL_RE.search(s)]
    print("check-deps: self-test ok", file=sys.stderr)


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    members, deps, dirs = load(root)
    problems = check_graph(members, deps) + check_sql(root, dirs)
    for p in problems:
        print(f"check-deps: {p}", file=sys.stderr)
    if problems:
        sys.exit(f"check-deps: {len(problems)} violation(s) of the dependency rules (see ARCHITECTURE.md)")
    print("check-deps: ok", file=sys.stderr)


if __name__ == "__main__":
    main()
