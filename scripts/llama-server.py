#!/usr/bin/env python3
"""Starts llama.cpp's real OpenAI-compatible HTTP server in-process (PyPI `xllamacpp`) on a GGUF model.

Usage: llama-server.py MODEL.gguf [--threads N] [--ctx N] [--mmproj MMPROJ.gguf]
With --mmproj the server takes images (`CommonParams.mmproj`, as llama-server's own --mmproj): image parts of a
chat request go through llama.cpp's `mtmd` with that projector.
Prints `LISTENING <base URL>` on stdout once it serves, then runs until killed or until stdin closes.
`scripts/assets.sh` installs xllamacpp into .nmb-assets/py; put that folder on PYTHONPATH.
"""
import argparse
import sys
import threading

import xllamacpp as xlc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--mmproj", help="a vision projector (mmproj GGUF) for image parts")
    args = ap.parse_args()
    params = xlc.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.cpuparams.n_threads = args.threads
    if args.mmproj:
        params.mmproj.path = args.mmproj
    server = xlc.Server(params)
    print("LISTENING", server.listening_address, flush=True)
    # Serve until the parent closes our stdin (it exited) or kills us.
    done = threading.Event()

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    done.wait()


if __name__ == "__main__":
    main()
