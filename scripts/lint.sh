#!/usr/bin/env bash
# The project's habits, enforced: formatting, clippy and rustdoc with warnings as errors (lints come from
# [workspace.lints] in Cargo.toml), and the dependency rules between crates (scripts/check-deps.py, listed in
# ARCHITECTURE.md). `.ci/run` runs it before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "lint: cargo fmt --check" >&2
cargo fmt --all -- --check
echo "lint: cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "lint: cargo doc -D warnings" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# Last, so that a broken rule does not hide what clippy or rustdoc would say; it prints every violation at once.
echo "lint: dependency rules" >&2
python3 scripts/check-deps.py --self-test
python3 scripts/check-deps.py
echo "lint: import circles" >&2
python3 scripts/check-circles.py --self-test
python3 scripts/check-circles.py
echo "lint: ok" >&2
