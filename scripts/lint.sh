#!/usr/bin/env bash
# The project's habits, enforced: formatting, clippy and rustdoc with warnings as errors (lints come from
# [workspace.lints] in Cargo.toml). `.ci/run` runs it before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "lint: cargo fmt --check" >&2
cargo fmt --all -- --check
echo "lint: cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "lint: cargo doc -D warnings" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "lint: ok" >&2
