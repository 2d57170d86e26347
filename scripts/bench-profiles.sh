#!/usr/bin/env bash
# The dev profile (what scripts/run-sample.sh and the tests build) against the release profile, on the benches of
# the hot paths: BERTScore (nmb-bertscore throughput), the bootstraps (nmb-stats bootstrap), volume loading and
# rendering (nmb-imaging volumes, a NIfTI phantom) and evaluation throughput (nmb eval against a loopback fake
# server). Each bench runs once per profile, one after the other, never at once.
#
# Prints one JSON object per figure: {bench, figure, dev, release, dev_over_release, rounds}, where
# dev_over_release is the dev build's cost over the release build's (times: dev/release; rates: release/dev), so
# 1.10 is "the dev build is 10% slower". BENCH_ROUNDS (default 3) rounds, medians taken. Wall-clock figures on a
# busy machine mean little: run it on a quiet one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
scripts/assets.sh >/dev/null

benches=(
  "nmb-bertscore throughput"
  "nmb-stats bootstrap"
  "nmb-imaging volumes"
  "nmb eval"
)
rounds="${BENCH_ROUNDS:-3}"
# Both builds first, so that no round times a compiler.
for entry in "${benches[@]}"; do
  read -r package bench <<<"$entry"
  cargo bench -q --profile dev --no-run -p "$package" --bench "$bench" 2>/dev/null
  cargo bench -q --no-run -p "$package" --bench "$bench" 2>/dev/null
done
# Dev and release alternate, bench by bench and round by round, so that a change in the machine's load
# falls on both; each figure is the median of its rounds.
for round in $(seq "$rounds"); do
  for entry in "${benches[@]}"; do
    read -r package bench <<<"$entry"
    for profile in dev release; do
      # `cargo bench` builds with the bench profile, which inherits release; --profile dev builds what the
      # tests do.
      flag=()
      [ "$profile" = dev ] && flag=(--profile dev)
      echo "bench-profiles: round $round, $package $bench ($profile)" >&2
      cargo bench -q "${flag[@]}" -p "$package" --bench "$bench" >"$out/$profile-$bench-$round.json"
    done
  done
done

python3 - "$out" "$rounds" <<'PY'
import json, sys
out = sys.argv[1]

def lines(path):
    text = open(path).read()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(l) for l in text.splitlines() if l.strip().startswith("{")]

def figures(bench, objs):
    """(figure, value, higher_is_better) for each figure of a bench's output."""
    for o in objs:
        if bench == "throughput":
            yield "pairs_per_s", o["pairs_per_s"], True
        elif bench == "bootstrap":
            yield o["bench"] + ".cpu_ms_per_call", o["cpu_ms_per_call"] or o["ms_per_call"], False
        elif bench == "volumes":
            yield o["workload"] + ".median_ms", o["median_ms"], False
        elif bench == "eval":
            yield "requests_per_s", o["run"]["requests_per_s"], True
            yield "cpu_ms_per_request", o["run"]["cpu_ms_per_request"], False

rounds = int(sys.argv[2])

def median(values):
    values = sorted(values)
    return values[len(values) // 2]

def collected(profile, bench):
    """figure -> (median value, higher_is_better) over the rounds."""
    seen = {}
    for r in range(1, rounds + 1):
        for figure, value, up in figures(bench, lines(f"{out}/{profile}-{bench}-{r}.json")):
            seen.setdefault(figure, ([], up))[0].append(value)
    return {f: (median(v), up) for f, (v, up) in seen.items()}

for bench in ["throughput", "bootstrap", "volumes", "eval"]:
    dev, rel = collected("dev", bench), collected("release", bench)
    for figure, (d, up) in dev.items():
        r = rel[figure][0]
        ratio = (r / d) if up else (d / r)
        print(json.dumps({"bench": bench, "figure": figure, "dev": d, "release": r,
                          "dev_over_release": round(ratio, 3), "rounds": rounds}))
PY
