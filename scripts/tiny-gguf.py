#!/usr/bin/env python3
"""Writes a tiny random-weight GGUF in one quantisation type, for the local engine's bit-for-bit tests.

Usage: tiny-gguf.py SMOLLM2.gguf TYPE OUT.gguf [--seed N] [--arch ARCH] [--pre NAME] [--chat-template FILE]
       [--attn-output-bias]
       tiny-gguf.py SMOLLM2.gguf TYPE OUT.gguf --projector {gemma3,idefics3} [--seed N]
TYPE is a GGML type name (Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, BF16). Every matrix
(token_embd, output and each layer's attention and MLP weights) is stored in TYPE; the norms and biases are F32.

ARCH (default llama) picks the layout, with what each family adds as llama.cpp's loader names it:
- llama: Llama.
- llama3: Llama with Llama 3.1's rope scaling, as its converter writes it: a `rope_freqs.weight` tensor of
  per-pair frequency factors (factor 8, low/high frequency factors 1 and 4, original context 8192).
- mistral3: Llama's layout under `mistral3` with YaRN rope scaling (factor 4 over an original context of 128,
  base 1000000) and Llama 4's attention temperature (scale 0.1, length 64, so prompts past 64 tokens grow).
- qwen2: biases on Q, K and V, and linear rope scaling (`qwen2.rope.scaling.*`, factor 4).
- qwen3: per-head Q and K RMS norms, and heads of 128 (`attention.key_length`), wider than width/heads.
- gemma3: per-head Q and K norms, post-attention and post-MLP norms, heads of 128, one key/value head per two
  query heads, 6 layers with a sliding window of 32 positions (layers 0-4 slide, layer 5 is global), and the
  output tied to the embedding (no `output.weight`).
- smolvlm: Llama (SmolVLM's text model) whose vocabulary also holds SmolVLM's added control tokens, the ones
  llama.cpp's mtmd places around Idefics3 tiles (`<global-img>`, `<row_R_col_C>` for R and C from 1 to 6,
  `<fake_token_around_image>`, `<image>`, `<end_of_utterance>`): the text model `--projector idefics3` pairs with.

The tokenizer (vocabulary, merges, special tokens, chat template) is copied from SmolLM2's GGUF, so both
engines tokenise as they do for SmolLM2 and the vocabulary is real (`--pre` replaces its pre-tokenizer name,
`tokenizer.ggml.pre`, and `--chat-template` its template with a file's text, for tokenizer and template tests); the model itself is small (2 layers,
width 256, 4 heads of 64 with 2 key/value heads, MLP 512), so each file is a few MB.

Quantised blocks are written byte by byte rather than quantised from floats: PyPI's `gguf` quantises only some
types (none of the K-quants), and random quantised blocks are as good a test as quantised random floats. The
values are random; only each block's f16 scale fields are set so that the weights have a standard deviation
near 0.05 (the `gguf` package dequantises a sample to measure it), which keeps activations in a realistic
range. The same seed gives the same bytes.

With `--projector`, the file is instead a vision projector (an `mmproj` GGUF) in llama.cpp's key layout
(`clip.*` keys, `v.*` and `mm.*` tensors, as its converter writes them for the type), a random SigLIP tower
of 2 layers, width 128, 2 heads of 64, MLP 256, patches of 14 pixels, tanh GELU, LayerNorm eps 1e-6,
mean and std 0.5, every matrix of the tower in TYPE (F16 or Q8_0; the converter's forced types kept: the
patch and position embeddings F32, Gemma 3's input projection F16):
- gemma3 (MedGemma's): 224-pixel images (16×16 patches), average pooling by 4 to 16 tokens, the soft-embedding
  RMS norm and the input projection to width 256, the width of `--arch gemma3` files.
- idefics3 (SmolVLM's): 112-pixel tiles (8×8 patches), pixel shuffle by 2 (16 tokens of width 512), the
  projection `mm.model.fc` to width 256 (`--arch smolvlm` files, whose vocabulary has the tokens mtmd places
  around its tiles), images sliced at a longest edge of 224.
`--projector-width N` and `--projector-layers N` and `--image-size N` make a larger tower (for benchmarks);
`--projector-heads N` and `--projector-ffn N` set the head count and MLP width (MedGemma's ratios: width 144, 2
heads of 72, MLP 136, widths that are no multiple of 32);
`--preproc-image-size N` sets Idefics3's longest edge (N = the image size gives images of one tile).

Needs PyPI's `gguf` and `numpy` (scripts/assets.sh installs both into .nmb-assets/py).
"""
import argparse
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

DIM, FFN, HEADS, KV_HEADS, LAYERS = 256, 512, 4, 2, 2
TARGET_STD = 0.05
ARCHS = ("llama", "llama3", "mistral3", "qwen2", "qwen3", "gemma3", "smolvlm")

# SmolVLM's added tokens (after SmolLM2's 49152), which llama.cpp's mtmd places around Idefics3 image tiles.
SMOLVLM_TOKENS = (["<global-img>"] + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
                  + ["<fake_token_around_image>", "<image>", "<end_of_utterance>"])

# Byte offsets of each block's f16 scale fields (d, and dmin or m where the type has one), and the block size.
SCALE_FIELDS = {
    T.Q4_0: (18, [0]),
    T.Q4_1: (20, [0, 2]),
    T.Q5_0: (22, [0]),
    T.Q5_1: (24, [0, 2]),
    T.Q8_0: (34, [0]),
    T.Q4_K: (144, [0, 2]),
    T.Q5_K: (176, [0, 2]),
    T.Q6_K: (210, [208]),
}
VALUES_PER_BLOCK = {
    T.Q4_0: 32, T.Q4_1: 32, T.Q5_0: 32, T.Q5_1: 32, T.Q8_0: 32, T.Q4_K: 256, T.Q5_K: 256, T.Q6_K: 256,
}


def random_blocks(rng, qtype, rows, cols):
    """`rows` rows of `cols` values in `qtype`, as raw bytes shaped (rows, bytes per row)."""
    size, fields = SCALE_FIELDS[qtype]
    per_row = cols // VALUES_PER_BLOCK[qtype]
    blocks = rng.integers(0, 256, size=(rows * per_row, size), dtype=np.uint8)

    def set_scales(factor):
        for at in fields:
            scale = (rng.uniform(0.5, 1.5, size=rows * per_row) * factor).astype(np.float16)
            blocks[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)

    # Measure the spread at scale 1 on a sample, then set the scales for the target spread.
    state = rng.bit_generator.state
    set_scales(1.0)
    sample = gguf.quants.dequantize(blocks[: min(len(blocks), 64)].reshape(-1), qtype)
    std = float(np.std(sample)) or 1.0
    rng.bit_generator.state = state
    set_scales(TARGET_STD / std)
    return blocks.reshape(rows, per_row * size)


def matrix(rng, qtype, rows, cols):
    if qtype == T.F32:
        return rng.normal(0, TARGET_STD, size=(rows, cols)).astype(np.float32), None
    if qtype == T.F16:
        return rng.normal(0, TARGET_STD, size=(rows, cols)).astype(np.float16), None
    if qtype == T.BF16:
        bits = rng.normal(0, TARGET_STD, size=(rows, cols)).astype(np.float32).view(np.uint32)
        # Round to nearest even on the upper 16 bits, as a BF16 conversion does.
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return rounded.view(np.uint8).reshape(rows, cols * 2), T.BF16
    return random_blocks(rng, qtype, rows, cols), qtype


def copy_tokenizer(reader, writer, replace, extra=()):
    """Copies the tokenizer; `extra` are control tokens appended to the vocabulary."""
    for name, value in replace.items():
        writer.add_string(name, value)
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer.") or name in replace:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                value = [field.parts[i][0].item() for i in field.data]
            if name == "tokenizer.ggml.tokens":
                value += list(extra)
            elif name == "tokenizer.ggml.token_type":
                value += [gguf.TokenType.CONTROL.value] * len(extra)
            writer.add_array(name, value)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            writer.add_key_value(name, field.parts[field.data[0]][0].item(), vtype)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data) + len(extra)
    return vocab


def llama3_rope_factors(head_dim, base, factor=8.0, low=1.0, high=4.0, original=8192):
    """Llama 3.1's frequency factors, as llama.cpp's converter computes them (`generate_extra_tensors`)."""
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    low_wavelen, high_wavelen = original / low, original / high
    factors = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def write_projector(args, qtype):
    """A random-weight vision projector (see the module doc)."""
    kind = args.projector
    width, layers = args.projector_width, args.projector_layers
    heads = args.projector_heads or max(1, width // 64)
    ffn = args.projector_ffn or (2 * width if width == 128 else 4352)
    patch = 14
    image = args.image_size or (224 if kind == "gemma3" else 112)
    text = DIM
    rng = np.random.default_rng(args.seed)
    writer = gguf.GGUFWriter(args.out, "clip")
    writer.add_name(f"tiny-mmproj-{kind}-{qtype.name}")
    writer.add_string(gguf.Keys.Clip.PROJECTOR_TYPE, kind)
    writer.add_bool(gguf.Keys.Clip.HAS_VISION_ENCODER, True)
    writer.add_bool(gguf.Keys.ClipVision.USE_GELU, True)
    writer.add_uint32(gguf.Keys.ClipVision.EMBEDDING_LENGTH, width)
    writer.add_uint32(gguf.Keys.ClipVision.FEED_FORWARD_LENGTH, ffn)
    writer.add_uint32(gguf.Keys.ClipVision.BLOCK_COUNT, layers)
    writer.add_uint32(gguf.Keys.ClipVision.Attention.HEAD_COUNT, heads)
    writer.add_float32(gguf.Keys.ClipVision.Attention.LAYERNORM_EPS, 1e-6)
    writer.add_uint32(gguf.Keys.ClipVision.IMAGE_SIZE, image)
    writer.add_uint32(gguf.Keys.ClipVision.PATCH_SIZE, patch)
    writer.add_uint32(gguf.Keys.ClipVision.PROJECTION_DIM, text)
    writer.add_array(gguf.Keys.ClipVision.IMAGE_MEAN, [0.5, 0.5, 0.5])
    writer.add_array(gguf.Keys.ClipVision.IMAGE_STD, [0.5, 0.5, 0.5])
    if kind == "idefics3":
        writer.add_uint32(gguf.Keys.ClipVision.Projector.SCALE_FACTOR, 2)
        writer.add_uint32(gguf.Keys.ClipVision.PREPROC_IMAGE_SIZE, args.preproc_image_size or 2 * image)

    def add(name, rows, cols, qt=qtype):
        data, raw = matrix(rng, qt, rows, cols)
        writer.add_tensor(name, data, raw_dtype=raw)

    def vec(name, size, mean, std):
        writer.add_tensor(name, (mean + rng.normal(0, std, size=size)).astype(np.float32))

    # The patch embedding as a convolution kernel, ggml shape [patch, patch, 3, width].
    writer.add_tensor("v.patch_embd.weight",
                      rng.normal(0, 0.05, size=(width, 3, patch, patch)).astype(np.float32))
    vec("v.patch_embd.bias", width, 0, 0.1)
    vec_pos = rng.normal(0, 0.1, size=((image // patch) ** 2, width)).astype(np.float32)
    writer.add_tensor("v.position_embd.weight", vec_pos)
    for i in range(layers):
        b = f"v.blk.{i}"
        vec(f"{b}.ln1.weight", width, 1, 0.1)
        vec(f"{b}.ln1.bias", width, 0, 0.1)
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add(f"{b}.{t}.weight", width, width)
            vec(f"{b}.{t}.bias", width, 0, 0.1)
        vec(f"{b}.ln2.weight", width, 1, 0.1)
        vec(f"{b}.ln2.bias", width, 0, 0.1)
        add(f"{b}.ffn_up.weight", ffn, width)
        vec(f"{b}.ffn_up.bias", ffn, 0, 0.1)
        add(f"{b}.ffn_down.weight", width, ffn)
        vec(f"{b}.ffn_down.bias", width, 0, 0.1)
    vec("v.post_ln.weight", width, 1, 0.1)
    vec("v.post_ln.bias", width, 0, 0.1)
    if kind == "gemma3":
        vec("mm.soft_emb_norm.weight", width, 1, 0.1)
        # Stored as the model holds it, [vision width, text width] (ggml: text width fastest).
        writer.add_tensor("mm.input_projection.weight",
                          rng.normal(0, TARGET_STD, size=(width, text)).astype(np.float16))
    else:
        add("mm.model.fc.weight", text, width * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("smollm2")
    ap.add_argument("type")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--arch", default="llama", choices=ARCHS)
    ap.add_argument("--pre", help="tokenizer.ggml.pre to write instead of SmolLM2's")
    ap.add_argument("--chat-template", help="a file whose text becomes tokenizer.chat_template")
    ap.add_argument("--attn-output-bias", action="store_true",
                    help="also write each layer's attn_output.bias (llama.cpp adds it; nmb refuses such files)")
    ap.add_argument("--projector", choices=("gemma3", "idefics3"),
                    help="write a vision projector (mmproj) of this type instead of a text model")
    ap.add_argument("--projector-width", type=int, default=128)
    ap.add_argument("--projector-layers", type=int, default=2)
    ap.add_argument("--projector-heads", type=int, default=0)
    ap.add_argument("--projector-ffn", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--preproc-image-size", type=int, default=0,
                    help="Idefics3's longest edge (clip.vision.preproc_image_size; default twice the image size)")
    args = ap.parse_args()
    replace = {}
    if args.pre:
        replace["tokenizer.ggml.pre"] = args.pre
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            replace["tokenizer.chat_template"] = f.read()
    try:
        qtype = T[args.type.upper()]
    except KeyError:
        sys.exit(f"tiny-gguf.py: unknown type {args.type!r}")
    if qtype not in SCALE_FIELDS and qtype not in (T.F16, T.BF16, T.F32):
        sys.exit(f"tiny-gguf.py: type {args.type} is not one this script writes")
    if args.projector:
        if qtype not in (T.F16, T.Q8_0, T.F32):
            sys.exit("tiny-gguf.py: a projector's type is F16, Q8_0 or F32")
        write_projector(args, qtype)
        return
    arch = args.arch
    gguf_arch = "llama" if arch in ("llama3", "smolvlm") else arch
    head_dim = 128 if arch in ("qwen3", "gemma3") else DIM // HEADS
    layers = 6 if arch == "gemma3" else LAYERS
    rope_base = {"llama3": 500000.0, "gemma3": 1000000.0, "mistral3": 1000000.0}.get(arch, 100000.0)
    rng = np.random.default_rng(args.seed)
    reader = gguf.GGUFReader(args.smollm2)
    writer = gguf.GGUFWriter(args.out, gguf_arch)
    writer.add_name(f"tiny-{arch}-{qtype.name}")
    vocab = copy_tokenizer(reader, writer, replace, SMOLVLM_TOKENS if arch == "smolvlm" else ())
    writer.add_block_count(layers)
    writer.add_context_length(2048)
    writer.add_embedding_length(DIM)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(rope_base)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-6 if arch == "gemma3" else 1e-5)
    writer.add_vocab_size(vocab)
    if head_dim != DIM // HEADS:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if arch == "qwen2":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(4.0)
    if arch == "gemma3":
        writer.add_sliding_window(32)
    if arch == "mistral3":
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(4.0)
        writer.add_rope_scaling_orig_ctx_len(128)
        writer.add_rope_scaling_yarn_beta_fast(32.0)
        writer.add_rope_scaling_yarn_beta_slow(1.0)
        writer.add_attn_temperature_scale(0.1)
        writer.add_attn_temperature_length(64)

    def add(name, rows, cols):
        data, raw = matrix(rng, qtype, rows, cols)
        writer.add_tensor(name, data, raw_dtype=raw)

    def norm(name, size=DIM):
        writer.add_tensor(name, (1.0 + rng.normal(0, 0.1, size=size)).astype(np.float32))

    def bias(name, size):
        writer.add_tensor(name, rng.normal(0, 0.5, size=size).astype(np.float32))

    q_dim, kv = head_dim * HEADS, head_dim * KV_HEADS
    add("token_embd.weight", vocab, DIM)
    if arch == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(head_dim, rope_base))
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        add(f"blk.{i}.attn_q.weight", q_dim, DIM)
        add(f"blk.{i}.attn_k.weight", kv, DIM)
        add(f"blk.{i}.attn_v.weight", kv, DIM)
        if args.attn_output_bias:
            bias(f"blk.{i}.attn_output.bias", DIM)
        if arch == "qwen2":
            bias(f"blk.{i}.attn_q.bias", q_dim)
            bias(f"blk.{i}.attn_k.bias", kv)
            bias(f"blk.{i}.attn_v.bias", kv)
        if arch in ("qwen3", "gemma3"):
            norm(f"blk.{i}.attn_q_norm.weight", head_dim)
            norm(f"blk.{i}.attn_k_norm.weight", head_dim)
        add(f"blk.{i}.attn_output.weight", DIM, q_dim)
        if arch == "gemma3":
            norm(f"blk.{i}.post_attention_norm.weight")
        norm(f"blk.{i}.ffn_norm.weight")
        add(f"blk.{i}.ffn_gate.weight", FFN, DIM)
        add(f"blk.{i}.ffn_up.weight", FFN, DIM)
        add(f"blk.{i}.ffn_down.weight", DIM, FFN)
        if arch == "gemma3":
            norm(f"blk.{i}.post_ffw_norm.weight")
    norm("output_norm.weight")
    if arch != "gemma3":
        add("output.weight", vocab, DIM)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
