#!/usr/bin/env bash
# The project's one test command: installs what the tests need on a bare machine, then runs every test.
# `.ci/run` calls this same script.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/assets.sh >/dev/null
# Headless Chromium and chromedriver for the browser tests; without them those tests skip locally and fail
# under CI=true (a skipped check is not a passed one).
if chromium_bin="$(scripts/chromium.sh)"; then
  export NMB_CHROMIUM="$chromium_bin"
else
  echo "test.sh: chromium could not be installed; the browser tests will skip (or fail under CI=true)" >&2
fi
# A real T1 brain template (ch2.nii.gz) for the imaging tests.
if mricron_dir="$(scripts/mricron-data.sh)"; then
  export NMB_MRICRON_DIR="$mricron_dir"
else
  echo "test.sh: mricron-data could not be installed; the ch2 imaging tests will skip (or fail under CI=true)" >&2
fi
# A real PostgreSQL server's binaries; the tests start their own private server from them.
if pg_bin="$(scripts/postgres.sh)"; then
  export NMB_PG_BIN="$pg_bin"
else
  echo "test.sh: postgresql could not be installed; the PostgreSQL tests will skip (or fail under CI=true)" >&2
fi
# What the disk holds before and after: CI machines differ, and a full disk fails tests in ways that name
# something else (a PostgreSQL test's "No space left on device").
df -h . "${TMPDIR:-/tmp}" >&2 || true
status=0
cargo test --workspace --no-fail-fast "$@" || status=$?
df -h . "${TMPDIR:-/tmp}" >&2 || true
exit "$status"
