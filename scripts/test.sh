#!/usr/bin/env bash
# The project's one test command: installs what the tests need on a bare machine, then runs every test.
# `.ci/run` calls this same script.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/assets.sh >/dev/null
# Headless Chromium for the report's browser tests (XSS, screenshots); they skip with a message without it.
if chromium_bin="$(scripts/chromium.sh)"; then
  export NMB_CHROMIUM="$chromium_bin"
else
  echo "test.sh: chromium could not be installed; the report's browser tests will skip" >&2
fi
cargo test --workspace --no-fail-fast "$@"
