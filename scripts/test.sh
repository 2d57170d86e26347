#!/usr/bin/env bash
# The project's one test command: installs what the tests need on a bare machine, then runs every test.
# `.ci/run` calls this same script.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/assets.sh >/dev/null
cargo test --workspace --no-fail-fast "$@"
