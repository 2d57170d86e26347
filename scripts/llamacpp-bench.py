#!/usr/bin/env python3
"""The llama.cpp reference for `cargo bench -p nmb-local`: prefill and decode speed of llama.cpp's real server
(PyPI `xllamacpp`, in-process) on a GGUF, for 1 sample and for 5 samples of one prompt.

Usage: llamacpp-bench.py MODEL.gguf --threads N --prompt-file FILE --max-tokens K --runs R [--log FILE]
                         [--five-method auto|concurrent]

`scripts/assets.sh` installs xllamacpp into .nmb-assets/py; put that folder on PYTHONPATH.
Every request is greedy (temperature 0) with `ignore_eos`, so each sample decodes exactly K tokens, and
`cache_prompt` false, so each run processes the whole prompt. The prompt file is sent as text; llama.cpp
tokenises it with its special tokens parsed (ChatML markers become their ids), as nmb does.

- one: POST /completion on a server with one slot, R times; `timings` gives prefill and decode speed, the
  client measures the wall time. Medians over the runs. The first token is sampled at the end of the prefill;
  `predicted_ms` covers the K - 1 decode steps after it, and this llama.cpp's `predicted_per_second` is
  (K - 1) / predicted_ms: decode steps per second, as nmb's bench counts them.
- five: POST /completion with `n_cmpl: 5` on a second server with 5 slots (`n_parallel = 5`): llama.cpp
  processes the prompt once in one slot, copies its KV cache to 4 child slots and decodes the 5 sequences
  together, one batch per step. If this llama.cpp does not accept `n_cmpl`, 5 concurrent requests to the 5 slots
  are used instead (each processes the prompt; llama.cpp batches them). `method` (`n_cmpl` or `concurrent`)
  says which, `method_detail` in words.
  decode_tok_s = the decode steps of all 5 (5 x (K - 1)) / the longest `predicted_ms` of the 5. Medians over
  the runs.

Prints one JSON object on stdout (medians, and under `runs` each run's figures); llama.cpp's log goes to --log (default: a temporary file named on stderr on
failure).
"""
import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import xllamacpp as xlc

FIVE = 5


def post(base, path, body, timeout=600):
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"POST {path}: HTTP {e.code}: {e.read().decode(errors='replace')[:500]}") from e
    return out, time.perf_counter() - started


def start_server(model, threads, slots, ctx_per_slot):
    p = xlc.CommonParams()
    p.model.path = model
    p.n_parallel = slots
    p.n_ctx = ctx_per_slot * slots  # split evenly between the slots
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.cache_prompt = False
    return xlc.Server(p)


def request(prompt, max_tokens, **extra):
    return dict(
        prompt=prompt,
        n_predict=max_tokens,
        temperature=0,
        ignore_eos=True,
        cache_prompt=False,
        **extra,
    )


def decode_steps(timings):
    """Tokens decoded after the one sampled at the end of the prefill, which `predicted_ms` does not cover."""
    return timings["predicted_n"] - 1


def check_counts(result, prompt_tokens, max_tokens):
    t = result["timings"]
    if t["predicted_n"] != max_tokens:
        raise RuntimeError(f"decoded {t['predicted_n']} tokens, not {max_tokens}: {result.get('stop_type')}")
    if result["tokens_evaluated"] != prompt_tokens:
        raise RuntimeError(f"prompt of {result['tokens_evaluated']} tokens, /tokenize said {prompt_tokens}")


def bench_one(base, prompt, prompt_tokens, max_tokens, runs):
    post(base, "/completion", request(prompt, 4))  # warm-up, not measured
    prefill, decode, wall = [], [], []
    for _ in range(runs):
        out, secs = post(base, "/completion", request(prompt, max_tokens))
        check_counts(out, prompt_tokens, max_tokens)
        t = out["timings"]
        prefill.append(t["prompt_per_second"])
        decode.append(t["predicted_per_second"])
        wall.append(secs)
    return {
        "prefill_tok_s": statistics.median(prefill),
        "decode_tok_s": statistics.median(decode),
        "wall_s": statistics.median(wall),
        "runs": {"prefill_tok_s": prefill, "decode_tok_s": decode, "wall_s": wall},
    }


def five_n_cmpl(base, prompt, prompt_tokens, max_tokens):
    """One request for 5 completions; None when this llama.cpp does not do `n_cmpl`."""
    try:
        out, secs = post(base, "/completion", request(prompt, max_tokens, n_cmpl=FIVE))
    except RuntimeError as e:
        print(f"llamacpp-bench: n_cmpl refused ({e}); using {FIVE} concurrent requests", file=sys.stderr)
        return None
    if not isinstance(out, list) or len(out) != FIVE:
        print("llamacpp-bench: n_cmpl gave no list of 5; using concurrent requests", file=sys.stderr)
        return None
    return out, secs


def five_concurrent(base, prompt, prompt_tokens, max_tokens):
    results = [None] * FIVE
    errors = []

    def one(i):
        try:
            results[i] = post(base, "/completion", request(prompt, max_tokens))[0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(FIVE)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - started
    if errors:
        raise errors[0]
    return results, secs


def bench_five(base, prompt, prompt_tokens, max_tokens, runs, method):
    # Warm-up, and the probe for n_cmpl.
    if method == "concurrent" or five_n_cmpl(base, prompt, prompt_tokens, 4) is None:
        method = "concurrent"
        five_concurrent(base, prompt, prompt_tokens, 4)
    else:
        method = "n_cmpl"
    wall, decode, prefill = [], [], []
    for _ in range(runs):
        if method == "n_cmpl":
            results, secs = five_n_cmpl(base, prompt, prompt_tokens, max_tokens)
        else:
            results, secs = five_concurrent(base, prompt, prompt_tokens, max_tokens)
        for r in results:
            check_counts(r, prompt_tokens, max_tokens)
        tokens = sum(decode_steps(r["timings"]) for r in results)
        decode_s = max(r["timings"]["predicted_ms"] for r in results) / 1000
        wall.append(secs)
        decode.append(tokens / decode_s)
        prefill.append(min(r["timings"]["prompt_per_second"] for r in results))
    if method == "n_cmpl":
        detail = (
            f"POST /completion with n_cmpl={FIVE} on {FIVE} slots: the prompt is processed once, its KV cache "
            f"copied to {FIVE - 1} child slots, the {FIVE} sequences decoded in one batch per step"
        )
    else:
        detail = (
            f"{FIVE} concurrent POST /completion on {FIVE} slots: each slot processes the prompt (batched "
            f"together), then the {FIVE} sequences decode in one batch per step"
        )
    return {
        "wall_s": statistics.median(wall),
        "decode_tok_s": statistics.median(decode),
        "prefill_tok_s": statistics.median(prefill),
        "runs": {"prefill_tok_s": prefill, "decode_tok_s": decode, "wall_s": wall},
        "method": method,
        "method_detail": detail,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--max-tokens", type=int, default=128, help="at least 2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--five-method",
        choices=["auto", "concurrent"],
        default="auto",
        help="auto: n_cmpl when this llama.cpp has it, else concurrent requests",
    )
    ap.add_argument("--log", help="where llama.cpp's log goes (default: a temporary file)")
    args = ap.parse_args()
    runs = max(1, args.runs)
    if args.max_tokens < 2:
        ap.error("--max-tokens must be at least 2 (decode speed needs a decode step)")
    with open(args.prompt_file, encoding="utf-8") as f:
        prompt = f.read()

    log_path = args.log or tempfile.mkstemp(prefix="llamacpp-bench-", suffix=".log")[1]
    # llama.cpp writes to fds 1 and 2 from C++; keep our stdout for the JSON and send both to the log.
    out_fd, err_fd = os.dup(1), os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    try:
        ctx = 4096
        server = start_server(args.model, args.threads, 1, ctx)
        base = server.listening_address
        tokens, _ = post(base, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})
        prompt_tokens = len(tokens["tokens"])
        if prompt_tokens + args.max_tokens + 8 > ctx:
            raise RuntimeError(f"{prompt_tokens} prompt tokens + {args.max_tokens} do not fit in {ctx}")
        one = bench_one(base, prompt, prompt_tokens, args.max_tokens, runs)
        del server
        gc.collect()
        server = start_server(args.model, args.threads, FIVE, ctx)
        five = bench_five(
            server.listening_address, prompt, prompt_tokens, args.max_tokens, runs, args.five_method
        )
        del server
        gc.collect()
    except BaseException:
        os.dup2(err_fd, 2)
        print(f"llamacpp-bench: failed; llama.cpp's log is {log_path}", file=sys.stderr)
        raise
    finally:
        sys.stdout.flush()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(log_fd)
    if not args.log:
        os.unlink(log_path)
    report = {
        "engine": f"llama.cpp (xllamacpp {xlc.__version__})",
        "threads": args.threads,
        "prompt_tokens": prompt_tokens,
        "max_tokens": args.max_tokens,
        "runs": runs,
        "one": one,
        "five": five,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
