#!/usr/bin/env bash
# The main job: installs the local model and evaluates the bundled sample suite with it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/assets.sh >/dev/null
cargo run --release -q -p nmb -- suite stats sample
