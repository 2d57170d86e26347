#!/usr/bin/env python3
"""Prints what llama.cpp's multimodal library (`mtmd`) computes for prompts holding images, bit for bit as its CPU
build computes it: the chunks a prompt becomes, each image's embeddings, and the logits after the prompt.

Usage: llama-mtmd.py MODEL.gguf MMPROJ.gguf [--threads N]
Reads requests from stdin, one JSON object a line: {"prompt": TEXT, "images": [[WIDTH, HEIGHT, RGB_FILE], ...]}
(and optionally "logits": false, to skip the logits) where TEXT holds one `<__media__>` marker per image and each RGB_FILE holds WIDTH × HEIGHT × 3 bytes (RGB, rows
top to bottom). For each, in a fresh context (4096 positions, batches of 512 as llama.cpp's server reads them), it
prints one JSON line: {"chunks": [{"text": [ids]} or {"image": N_TOKENS, "embd": HEX}], "logits": HEX}, with
`embd` each image's embeddings (N_TOKENS rows of the text model's width) and `logits` those after the prompt's
last position, both as little-endian f32 bytes in hex. The tests compare these with nmb's local engine.

The prompt is tokenised by `mtmd_tokenize` with special tokens parsed and BOS added as the model says; the
projector's context takes llama.cpp's defaults (flash attention left to its choice, warm-up on) with
`--threads` threads and no GPU. Like scripts/llama-logits.py it calls the C API in xllamacpp's shared library
through ctypes (the structs' layouts of xllamacpp 2026.10.11549; the script checks what it can).
"""
import argparse
import ctypes as C
import importlib.util
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("llama_logits", os.path.join(HERE, "llama-logits.py"))
ll = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ll)


class MtmdParams(C.Structure):
    # Larger than mtmd_context_params, returned and passed by value in memory (see llama-logits.py).
    _fields_ = [("raw", C.c_ubyte * 256)]


class InputText(C.Structure):
    # xllamacpp 2026.10.11549's mtmd_input_text carries the text's length after its pointer.
    _fields_ = [("text", C.c_char_p), ("len", C.c_size_t), ("add_special", C.c_bool), ("parse_special", C.c_bool)]


def mtmd_library(lib):
    lib.mtmd_context_params_default.restype = MtmdParams
    lib.mtmd_init_from_file.restype = C.c_void_p
    lib.mtmd_init_from_file.argtypes = [C.c_char_p, C.c_void_p, MtmdParams]
    lib.mtmd_log_set.argtypes = [C.c_void_p, C.c_void_p]
    lib.mtmd_log_set(C.cast(ll.library.keep, C.c_void_p), None)
    lib.mtmd_helper_log_set.argtypes = [C.c_void_p, C.c_void_p]
    lib.mtmd_helper_log_set(C.cast(ll.library.keep, C.c_void_p), None)
    lib.mtmd_bitmap_init.restype = C.c_void_p
    lib.mtmd_bitmap_init.argtypes = [C.c_uint32, C.c_uint32, C.c_char_p]
    lib.mtmd_bitmap_free.argtypes = [C.c_void_p]
    lib.mtmd_input_chunks_init.restype = C.c_void_p
    lib.mtmd_input_chunks_free.argtypes = [C.c_void_p]
    lib.mtmd_input_chunks_size.restype = C.c_size_t
    lib.mtmd_input_chunks_size.argtypes = [C.c_void_p]
    lib.mtmd_input_chunks_get.restype = C.c_void_p
    lib.mtmd_input_chunks_get.argtypes = [C.c_void_p, C.c_size_t]
    lib.mtmd_tokenize.restype = C.c_int32
    lib.mtmd_tokenize.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(InputText), C.c_void_p, C.c_size_t]
    lib.mtmd_input_chunk_get_type.restype = C.c_int
    lib.mtmd_input_chunk_get_type.argtypes = [C.c_void_p]
    lib.mtmd_input_chunk_get_tokens_text.restype = C.POINTER(C.c_int32)
    lib.mtmd_input_chunk_get_tokens_text.argtypes = [C.c_void_p, C.POINTER(C.c_size_t)]
    lib.mtmd_input_chunk_get_n_tokens.restype = C.c_size_t
    lib.mtmd_input_chunk_get_n_tokens.argtypes = [C.c_void_p]
    lib.mtmd_encode_chunk.restype = C.c_int32
    lib.mtmd_encode_chunk.argtypes = [C.c_void_p, C.c_void_p]
    lib.mtmd_get_output_embd.restype = C.POINTER(C.c_float)
    lib.mtmd_get_output_embd.argtypes = [C.c_void_p]
    lib.mtmd_helper_eval_chunks.restype = C.c_int32
    lib.mtmd_helper_eval_chunks.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p, C.c_int32, C.c_int32, C.c_int32,
                                            C.c_bool, C.POINTER(C.c_int32)]
    lib.llama_model_n_embd.restype = C.c_int32
    lib.llama_model_n_embd.argtypes = [C.c_void_p]


EVAL_CB = C.CFUNCTYPE(C.c_bool, C.c_void_p, C.c_bool, C.c_void_p)


def dump_callback(folder):
    """An eval callback writing each named contiguous F32 tensor the encoder computes to FOLDER/NAME.f32."""
    def cb(t, ask, _user):
        if ask:
            return True
        raw = C.string_at(t, 320)
        ttype = struct.unpack_from("<i", raw, 0)[0]
        ne = struct.unpack_from("<4q", raw, 16)
        nb = struct.unpack_from("<4Q", raw, 48)
        data = struct.unpack_from("<Q", raw, 248)[0]
        name = raw[256:320].split(b"\0")[0].decode()
        n = ne[0] * ne[1] * ne[2] * ne[3]
        op = struct.unpack_from("<i", raw, 80)[0]
        srcs = struct.unpack_from("<10Q", raw, 152)
        snames = []
        for sp in srcs:
            if sp:
                sr = C.string_at(sp, 320)
                snames.append(sr[256:320].split(b"\0")[0].decode() + ":" + str(struct.unpack_from("<i", sr, 0)[0]))
        with open(os.path.join(folder, "graph.txt"), "a") as f:
            f.write(f"{name} op={op} type={ttype} ne={ne} srcs={snames}\n")
        if ttype == 0 and name and data and nb[0] == 4 and nb[1] == 4 * ne[0]:
            with open(os.path.join(folder, f"{name}.f32"), "wb") as f:
                f.write(C.string_at(data, 4 * n))
        elif ttype == 1 and name and data and nb[0] == 2 and nb[1] == 2 * ne[0]:
            halves = struct.unpack(f"<{n}e", C.string_at(data, 2 * n))
            with open(os.path.join(folder, f"{name}.f32"), "wb") as f:
                f.write(struct.pack(f"<{n}f", *halves))
        return True
    return EVAL_CB(cb)


def mtmd_params(lib, threads):
    raw = bytearray(bytes(lib.mtmd_context_params_default().raw))
    folder = os.environ.get("NMB_MTMD_DUMP")
    if folder:
        mtmd_params.cb = dump_callback(folder)
        struct.pack_into("<Q", raw, 56, C.cast(mtmd_params.cb, C.c_void_p).value)
    # use_gpu (bool at 0), print_timings (bool at 16), n_threads (i32 at 20), flash_attn_type (i32 at 40, -1:
    # auto), warmup (bool at 44).
    found = struct.unpack_from("<BiiB", raw, 16)
    if found != (1, 4, -1, 1) and struct.unpack_from("<iiB", raw, 20)[:1] != (4,):
        sys.exit(f"llama-mtmd.py: mtmd_context_params holds {found}: not the layout this script knows")
    if struct.unpack_from("<i", raw, 40)[0] != -1:
        sys.exit("llama-mtmd.py: mtmd_context_params' flash_attn_type is not at byte 40")
    raw[0] = 0
    raw[16] = 0
    struct.pack_into("<i", raw, 20, threads)
    return MtmdParams.from_buffer_copy(bytes(raw))


def bench(lib, ctx, args):
    import time
    side = args.image_size
    state, data = 1, bytearray(side * side * 3)
    for i in range(len(data)):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        data[i] = state >> 56
    bitmap = lib.mtmd_bitmap_init(side, side, bytes(data))
    chunks = lib.mtmd_input_chunks_init()
    marker = b"<__media__>"
    text = InputText(marker, len(marker), True, True)
    arr = (C.c_void_p * 1)(bitmap)
    if lib.mtmd_tokenize(ctx, chunks, C.byref(text), arr, 1) != 0:
        sys.exit("llama-mtmd.py: mtmd_tokenize failed")
    image = next(lib.mtmd_input_chunks_get(chunks, i) for i in range(lib.mtmd_input_chunks_size(chunks))
                 if lib.mtmd_input_chunk_get_type(lib.mtmd_input_chunks_get(chunks, i)) != 0)
    times = []
    for _ in range(args.bench_runs):
        t = time.perf_counter()
        if lib.mtmd_encode_chunk(ctx, image) != 0:
            sys.exit("llama-mtmd.py: mtmd_encode_chunk failed")
        times.append(time.perf_counter() - t)
    times.sort()
    print(json.dumps({"encode_s": times[len(times) // 2], "runs": args.bench_runs, "threads": args.threads}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("mmproj")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench-runs", type=int, default=0,
                    help="instead of reading requests, encode one noise image of the projector's size this many "
                         "times and print {\"encode_s\": MEDIAN SECONDS} (mtmd_encode_chunk alone)")
    ap.add_argument("--image-size", type=int, default=896, help="the noise image's side for --bench-runs")
    args = ap.parse_args()
    lib = ll.library()
    mtmd_library(lib)
    lib.llama_backend_init()
    model = lib.llama_model_load_from_file(args.model.encode(), lib.llama_model_default_params())
    if not model:
        sys.exit(f"llama-mtmd.py: llama.cpp could not load {args.model}")
    ctx = lib.mtmd_init_from_file(args.mmproj.encode(), model, mtmd_params(lib, args.threads))
    if not ctx:
        sys.exit(f"llama-mtmd.py: mtmd could not load {args.mmproj}")
    vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
    n_embd = lib.llama_model_n_embd(model)
    if args.bench_runs:
        bench(lib, ctx, args)
        return
    for line in sys.stdin:
        req = json.loads(line)
        bitmaps = []
        for w, h, path in req["images"]:
            with open(path, "rb") as f:
                data = f.read()
            if len(data) != w * h * 3:
                sys.exit(f"llama-mtmd.py: {path} holds {len(data)} bytes, not {w}x{h}x3")
            bitmaps.append(lib.mtmd_bitmap_init(w, h, data))
        chunks = lib.mtmd_input_chunks_init()
        prompt = req["prompt"].encode()
        text = InputText(prompt, len(prompt), True, True)
        arr = (C.c_void_p * max(1, len(bitmaps)))(*bitmaps)
        rc = lib.mtmd_tokenize(ctx, chunks, C.byref(text), arr, len(bitmaps))
        if rc != 0:
            sys.exit(f"llama-mtmd.py: mtmd_tokenize returned {rc}")
        out = []
        for i in range(lib.mtmd_input_chunks_size(chunks)):
            chunk = lib.mtmd_input_chunks_get(chunks, i)
            if lib.mtmd_input_chunk_get_type(chunk) == 0:
                n = C.c_size_t()
                ids = lib.mtmd_input_chunk_get_tokens_text(chunk, C.byref(n))
                out.append({"text": [ids[j] for j in range(n.value)]})
            else:
                n = lib.mtmd_input_chunk_get_n_tokens(chunk)
                if lib.mtmd_encode_chunk(ctx, chunk) != 0:
                    sys.exit("llama-mtmd.py: mtmd_encode_chunk failed")
                embd = lib.mtmd_get_output_embd(ctx)
                out.append({"image": n, "embd": C.string_at(embd, 4 * n * n_embd).hex()})
        if not req.get("logits", True):
            print(json.dumps({"chunks": out, "logits": ""}), flush=True)
            lib.mtmd_input_chunks_free(chunks)
            for b in bitmaps:
                lib.mtmd_bitmap_free(b)
            continue
        lctx = lib.llama_init_from_model(model, ll.context_params(lib, args.threads))
        if not lctx:
            sys.exit("llama-mtmd.py: llama.cpp could not create a context")
        past = C.c_int32(0)
        rc = lib.mtmd_helper_eval_chunks(ctx, lctx, chunks, 0, 0, 512, True, C.byref(past))
        if rc != 0:
            sys.exit(f"llama-mtmd.py: mtmd_helper_eval_chunks returned {rc}")
        logits = lib.llama_get_logits_ith(lctx, -1)
        print(json.dumps({"chunks": out, "logits": C.string_at(logits, 4 * vocab).hex()}), flush=True)
        lib.llama_free(lctx)
        lib.mtmd_input_chunks_free(chunks)
        for b in bitmaps:
            lib.mtmd_bitmap_free(b)


if __name__ == "__main__":
    main()
