#!/usr/bin/env python3
"""Prints llama.cpp's logits after each of several prompts, exactly as its CPU build computes them.

Usage: llama-logits.py MODEL.gguf [--threads N]
Reads prompts from stdin, one per line as comma-separated token ids. For each prompt, in a fresh context
(4096 positions, prompt read in batches and chunks of 512 as llama.cpp's server reads it, flash attention
left to llama.cpp's choice), prints one line: the logits after the prompt's last token as little-endian f32 bytes in
hex. The tests compare these bit for bit with nmb's local engine. For a model with sliding-window attention
(Gemma 3) the server ends a batch where 516 and where 4 prompt tokens are left, to save a context checkpoint
there (`checkpoint_offsets` in its `server-context.cpp`), and so does this script: those last tokens round
differently from a prompt read in one batch.

It calls llama.cpp's C API in the shared library of PyPI's `xllamacpp` (which exports it) through ctypes;
`scripts/assets.sh` installs the pinned version into .nmb-assets/py, so put that folder on PYTHONPATH. The
context parameters are set at their offsets in that version's `llama_context_params`; the script checks the
defaults it finds there first and stops with a message if the layout is not the one it knows.
"""
import argparse
import ctypes as C
import os
import struct
import sys

import xllamacpp


class Params(C.Structure):
    # Larger than llama_model_params and llama_context_params: both are returned and passed by value in
    # memory, so a bigger buffer holds them and the library reads only its own size.
    _fields_ = [("raw", C.c_ubyte * 512)]


class Batch(C.Structure):
    _fields_ = [
        ("n_tokens", C.c_int32),
        ("token", C.c_void_p),
        ("embd", C.c_void_p),
        ("pos", C.c_void_p),
        ("n_seq_id", C.c_void_p),
        ("seq_id", C.c_void_p),
        ("logits", C.c_void_p),
    ]


# Offsets in llama_context_params of xllamacpp 2026.10.11549: n_ctx, n_batch, n_ubatch, n_seq_max (u32 at 0,
# 4, 8, 12), n_threads and n_threads_batch (i32 at 28 and 32).
EXPECTED_DEFAULTS = {0: 512, 4: 2048, 8: 512, 12: 1}


def library():
    folder = os.path.dirname(xllamacpp.__file__)
    names = [n for n in os.listdir(folder) if n.startswith("xllamacpp") and ".so" in n]
    if not names:
        sys.exit(f"llama-logits.py: no xllamacpp shared library in {folder}")
    lib = C.CDLL(os.path.join(folder, names[0]))
    quiet = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)(lambda level, text, data: None)
    lib.llama_log_set.argtypes = [C.c_void_p, C.c_void_p]
    lib.llama_log_set(C.cast(quiet, C.c_void_p), None)
    library.keep = quiet  # the callback must outlive every call
    lib.llama_model_default_params.restype = Params
    lib.llama_context_default_params.restype = Params
    lib.llama_model_load_from_file.restype = C.c_void_p
    lib.llama_model_load_from_file.argtypes = [C.c_char_p, Params]
    lib.llama_init_from_model.restype = C.c_void_p
    lib.llama_init_from_model.argtypes = [C.c_void_p, Params]
    lib.llama_batch_get_one.restype = Batch
    lib.llama_batch_get_one.argtypes = [C.c_void_p, C.c_int32]
    lib.llama_decode.argtypes = [C.c_void_p, Batch]
    lib.llama_get_logits_ith.restype = C.POINTER(C.c_float)
    lib.llama_get_logits_ith.argtypes = [C.c_void_p, C.c_int32]
    lib.llama_model_get_vocab.restype = C.c_void_p
    lib.llama_model_get_vocab.argtypes = [C.c_void_p]
    lib.llama_vocab_n_tokens.argtypes = [C.c_void_p]
    lib.llama_model_n_swa.argtypes = [C.c_void_p]
    lib.llama_free.argtypes = [C.c_void_p]
    return lib


def context_params(lib, threads):
    raw = bytearray(bytes(lib.llama_context_default_params().raw))
    for offset, value in EXPECTED_DEFAULTS.items():
        found = struct.unpack_from("<I", raw, offset)[0]
        if found != value:
            sys.exit(
                f"llama-logits.py: llama_context_params has {found} at byte {offset} where this script expects "
                f"the default {value}: not the xllamacpp version it knows (2026.10.11549)"
            )
    struct.pack_into("<III", raw, 0, 4096, 2048, 512)
    struct.pack_into("<ii", raw, 28, threads, threads)
    return Params.from_buffer_copy(bytes(raw))


# llama.cpp's server: `n_batch` tokens at most per batch, and for a model with sliding-window attention a
# batch ends once `min(n_batch, offset)` prompt tokens are left, for each of these offsets (4 + n_ubatch, 4).
SERVER_BATCH = 2048
CHECKPOINT_OFFSETS = (4 + 512, 4)


def server_batches(n, checkpoints):
    """The [start, end) batches llama.cpp's server reads an n-token prompt in."""
    batches, start = [], 0
    while start < n:
        end = min(start + SERVER_BATCH, n)
        if checkpoints:
            for offset in CHECKPOINT_OFFSETS:
                cut = n - min(SERVER_BATCH, offset)
                if cut > start:
                    end = min(end, cut)
        batches.append((start, end))
        start = end
    return batches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    lib = library()
    lib.llama_backend_init()
    model = lib.llama_model_load_from_file(args.model.encode(), lib.llama_model_default_params())
    if not model:
        sys.exit(f"llama-logits.py: llama.cpp could not load {args.model}")
    vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
    checkpoints = lib.llama_model_n_swa(model) > 0
    for line in sys.stdin:
        ids = [int(t) for t in line.split(",") if t.strip()]
        if not ids:
            sys.exit("llama-logits.py: an empty prompt")
        ctx = lib.llama_init_from_model(model, context_params(lib, args.threads))
        if not ctx:
            sys.exit("llama-logits.py: llama.cpp could not create a context")
        tokens = (C.c_int32 * len(ids))(*ids)
        for start, end in server_batches(len(ids), checkpoints):
            part = (C.c_int32 * (end - start)).from_buffer(tokens, 4 * start)
            rc = lib.llama_decode(ctx, lib.llama_batch_get_one(part, end - start))
            if rc != 0:
                sys.exit(f"llama-logits.py: llama_decode returned {rc}")
        logits = lib.llama_get_logits_ith(ctx, -1)
        print(C.string_at(logits, 4 * vocab).hex(), flush=True)
        lib.llama_free(ctx)


if __name__ == "__main__":
    main()
