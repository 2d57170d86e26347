//! GGUF files written from Rust: [`Gguf::tiny`], a tiny model (2 layers of width 64, random F16 weights, a
//! byte-fallback SentencePiece vocabulary of 288 tokens) that `nmb-local` loads and runs, and the means to write
//! variants of it whose headers lie: any metadata value replaced or given raw bytes, counts, offsets and
//! dimensions of tensors set by hand, the version changed.
//!
//! Nothing here needs Python or a download, so tests built on it never skip.

use std::path::Path;

use crate::rng::SplitMix;

/// GGUF's value type ids.
pub mod ty {
    pub const U8: u32 = 0;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
}

/// GGML tensor type ids.
pub mod tensor_type {
    pub const F32: u32 = 0;
    pub const F16: u32 = 1;
    pub const Q8_0: u32 = 8;
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    F32s(Vec<f32>),
    I32s(Vec<i32>),
    /// A type id and the bytes written after it, as they are: for values whose lengths lie.
    Raw(u32, Vec<u8>),
}

/// One tensor: its name, dimensions in GGML order (the row length first), GGML type and data. Its offset in
/// the data section is where the writer puts it, unless `offset` says otherwise.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: u32,
    pub data: Vec<u8>,
    pub offset: Option<u64>,
}

/// A GGUF file to write.
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<Tensor>,
    /// Written in place of the real count of tensors, when set.
    pub tensor_count: Option<u64>,
    /// Written in place of the real count of metadata entries, when set.
    pub metadata_count: Option<u64>,
}

/// The tiny model's shape.
pub const DIM: u64 = 64;
pub const HEADS: u64 = 2;
pub const KV_HEADS: u64 = 1;
pub const FFN: u64 = 128;
pub const LAYERS: u64 = 2;
pub const CONTEXT: u64 = 8192;
/// Its vocabulary: `<unk>`, `<s>`, `</s>`, `<|im_start|>`, `<|im_end|>`, the 256 byte tokens, `▁` and the
/// 26 lower-case letters.
pub const VOCAB: u64 = 5 + 256 + 27;

impl Gguf {
    /// The tiny `llama` model: ChatML's turn tokens in its vocabulary and no chat template of its own (so it gets
    /// the built-in ChatML), random F16 matrices and F32 norms from a fixed seed.
    pub fn tiny() -> Gguf {
        let mut rng = SplitMix(0x6767_7566);
        let m = |k: &str, v: Value| (k.to_string(), v);
        let metadata = vec![
            m("general.architecture", Value::Str("llama".into())),
            m("general.alignment", Value::U32(32)),
            m("llama.context_length", Value::U32(CONTEXT as u32)),
            m("llama.embedding_length", Value::U32(DIM as u32)),
            m("llama.block_count", Value::U32(LAYERS as u32)),
            m("llama.feed_forward_length", Value::U32(FFN as u32)),
            m("llama.attention.head_count", Value::U32(HEADS as u32)),
            m("llama.attention.head_count_kv", Value::U32(KV_HEADS as u32)),
            m("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            m("llama.rope.freq_base", Value::F32(10_000.0)),
            m("tokenizer.ggml.model", Value::Str("llama".into())),
            m("tokenizer.ggml.tokens", Value::Strs(tokens())),
            m("tokenizer.ggml.scores", Value::F32s(scores())),
            m("tokenizer.ggml.token_type", Value::I32s(token_types())),
            m("tokenizer.ggml.bos_token_id", Value::U32(1)),
            m("tokenizer.ggml.eos_token_id", Value::U32(2)),
            m("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ];
        let head_dim = DIM / HEADS;
        let (q, kv) = (DIM, KV_HEADS * head_dim);
        let mut tensors = vec![
            matrix(&mut rng, "token_embd.weight", VOCAB, DIM),
            norm("output_norm.weight", DIM),
            matrix(&mut rng, "output.weight", VOCAB, DIM),
        ];
        for l in 0..LAYERS {
            let n = |t: &str| format!("blk.{l}.{t}");
            tensors.extend([
                norm(&n("attn_norm.weight"), DIM),
                matrix(&mut rng, &n("attn_q.weight"), q, DIM),
                matrix(&mut rng, &n("attn_k.weight"), kv, DIM),
                matrix(&mut rng, &n("attn_v.weight"), kv, DIM),
                matrix(&mut rng, &n("attn_output.weight"), DIM, q),
                norm(&n("ffn_norm.weight"), DIM),
                matrix(&mut rng, &n("ffn_gate.weight"), FFN, DIM),
                matrix(&mut rng, &n("ffn_up.weight"), FFN, DIM),
                matrix(&mut rng, &n("ffn_down.weight"), DIM, FFN),
            ]);
        }
        Gguf {
            version: 3,
            metadata,
            tensors,
            tensor_count: None,
            metadata_count: None,
        }
    }

    /// A tiny `gemma3` vision projector (llama.cpp's `mmproj` layout): one SigLIP layer of width 64 with one
    /// head and an MLP of 128, 28-pixel images in patches of 14 (a 2 × 2 grid pooled by 2 to one token), F16
    /// matrices, the F32 patch and position embeddings and an F16 input projection to width [`DIM`].
    pub fn tiny_projector() -> Gguf {
        let mut rng = SplitMix(0x6d6d_7072);
        let m = |k: &str, v: Value| (k.to_string(), v);
        let metadata = vec![
            m("general.architecture", Value::Str("clip".into())),
            m("clip.projector_type", Value::Str("gemma3".into())),
            m("clip.has_vision_encoder", Value::Bool(true)),
            m("clip.use_gelu", Value::Bool(true)),
            m("clip.vision.embedding_length", Value::U32(64)),
            m("clip.vision.feed_forward_length", Value::U32(128)),
            m("clip.vision.block_count", Value::U32(1)),
            m("clip.vision.attention.head_count", Value::U32(1)),
            m("clip.vision.attention.layer_norm_epsilon", Value::F32(1e-6)),
            m("clip.vision.image_size", Value::U32(28)),
            m("clip.vision.patch_size", Value::U32(14)),
            m("clip.vision.projection_dim", Value::U32(DIM as u32)),
            m("clip.vision.image_mean", Value::F32s(vec![0.5; 3])),
            m("clip.vision.image_std", Value::F32s(vec![0.5; 3])),
            m("clip.vision.projector.scale_factor", Value::U32(2)),
        ];
        let f32s = |name: &str, dims: Vec<u64>| {
            let n: u64 = dims.iter().product();
            Tensor {
                name: name.into(),
                dims,
                ty: tensor_type::F32,
                data: (0..n)
                    .flat_map(|i| ((i % 7) as f32 * 0.01).to_le_bytes())
                    .collect(),
                offset: None,
            }
        };
        let mut tensors = vec![
            f32s("v.patch_embd.weight", vec![14, 14, 3, 64]),
            norm("v.patch_embd.bias", 64),
            f32s("v.position_embd.weight", vec![64, 4]),
        ];
        let n = |t: &str| format!("v.blk.0.{t}");
        for (t, rows, cols) in [
            ("attn_q", 64, 64),
            ("attn_k", 64, 64),
            ("attn_v", 64, 64),
            ("attn_out", 64, 64),
            ("ffn_up", 128, 64),
            ("ffn_down", 64, 128),
        ] {
            tensors.push(matrix(&mut rng, &n(&format!("{t}.weight")), rows, cols));
            tensors.push(norm(&n(&format!("{t}.bias")), rows));
        }
        for t in ["ln1", "ln2"] {
            tensors.push(norm(&n(&format!("{t}.weight")), 64));
            tensors.push(norm(&n(&format!("{t}.bias")), 64));
        }
        tensors.extend([
            norm("v.post_ln.weight", 64),
            norm("v.post_ln.bias", 64),
            norm("mm.soft_emb_norm.weight", 64),
            matrix(&mut rng, "mm.input_projection.weight", 64, DIM),
        ]);
        Gguf {
            version: 3,
            metadata,
            tensors,
            tensor_count: None,
            metadata_count: None,
        }
    }

    /// Sets `key` to `value`, in its place when the key is there, at the end otherwise.
    pub fn set(&mut self, key: &str, value: Value) -> &mut Gguf {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        self
    }

    /// The value of `key` (which must exist), to change in place.
    pub fn value(&mut self, key: &str) -> &mut Value {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => v,
            None => panic!("the GGUF has no metadata {key}"),
        }
    }

    /// Leaves `key` out.
    pub fn remove(&mut self, key: &str) -> &mut Gguf {
        self.metadata.retain(|(k, _)| k != key);
        self
    }

    /// The tensor called `name` (which must exist).
    pub fn tensor(&mut self, name: &str) -> &mut Tensor {
        self.tensors
            .iter_mut()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("the tiny GGUF has no tensor {name}"))
    }

    /// The alignment the writer lays the data out with: `general.alignment` when it is a `U32` power of two of
    /// at most 4096, else 32 (so a hostile alignment does not make a huge file).
    fn alignment(&self) -> u64 {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) if a.is_power_of_two() && *a <= 4096 => u64::from(*a),
            _ => 32,
        }
    }

    /// The file's bytes: header, tensor table, padding, then each tensor's data at its offset.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        let count = |real: usize, over: Option<u64>| over.unwrap_or(real as u64);
        out.extend(count(self.tensors.len(), self.tensor_count).to_le_bytes());
        out.extend(count(self.metadata.len(), self.metadata_count).to_le_bytes());
        for (key, value) in &self.metadata {
            string(&mut out, key);
            write_value(&mut out, value);
        }
        let align = self.alignment();
        let mut next = 0u64;
        let mut placed = Vec::new();
        for t in &self.tensors {
            string(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ty.to_le_bytes());
            let offset = t.offset.unwrap_or(next);
            out.extend(offset.to_le_bytes());
            placed.push(offset);
            next = (next + t.data.len() as u64).next_multiple_of(align);
        }
        out.resize((out.len() as u64).next_multiple_of(align) as usize, 0);
        let data_start = out.len();
        for (t, offset) in self.tensors.iter().zip(placed) {
            // A hand-set offset far away gets no data there: the file would be huge.
            let Some(at) = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(data_start))
                .filter(|&at| at <= data_start + next as usize)
            else {
                continue;
            };
            if out.len() < at + t.data.len() {
                out.resize(at + t.data.len(), 0);
            }
            out[at..at + t.data.len()].copy_from_slice(&t.data);
        }
        out.resize(data_start + next as usize, 0);
        out
    }

    /// Writes [`Gguf::bytes`] to `path`.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.bytes()).expect("writes the GGUF");
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, v: &Value) {
    let array = |out: &mut Vec<u8>, item: u32, n: usize| {
        out.extend(ty::ARRAY.to_le_bytes());
        out.extend(item.to_le_bytes());
        out.extend((n as u64).to_le_bytes());
    };
    match v {
        Value::U32(x) => {
            out.extend(ty::U32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        Value::I32(x) => {
            out.extend(ty::I32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        Value::U64(x) => {
            out.extend(ty::U64.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        Value::F32(x) => {
            out.extend(ty::F32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        Value::Bool(b) => {
            out.extend(ty::BOOL.to_le_bytes());
            out.push(u8::from(*b));
        }
        Value::Str(s) => {
            out.extend(ty::STRING.to_le_bytes());
            string(out, s);
        }
        Value::Strs(items) => {
            array(out, ty::STRING, items.len());
            for s in items {
                string(out, s);
            }
        }
        Value::F32s(items) => {
            array(out, ty::F32, items.len());
            for x in items {
                out.extend(x.to_le_bytes());
            }
        }
        Value::I32s(items) => {
            array(out, ty::I32, items.len());
            for x in items {
                out.extend(x.to_le_bytes());
            }
        }
        Value::Raw(id, bytes) => {
            out.extend(id.to_le_bytes());
            out.extend(bytes);
        }
    }
}

fn tokens() -> Vec<String> {
    let mut t: Vec<String> = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
        .map(String::from)
        .to_vec();
    t.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    t.push("\u{2581}".into());
    t.extend(('a'..='z').map(String::from));
    t
}

fn scores() -> Vec<f32> {
    (0..VOCAB).map(|i| -(i as f32)).collect()
}

/// llama.cpp's token types: unknown 2, control 3, byte 6, normal 1.
fn token_types() -> Vec<i32> {
    let mut t = vec![2, 3, 3, 3, 3];
    t.extend([6; 256]);
    t.extend([1; 27]);
    t
}

/// `rows` rows of `cols` random F16 values of magnitude 2^-6 to 2^-2, either sign.
fn matrix(rng: &mut SplitMix, name: &str, rows: u64, cols: u64) -> Tensor {
    let data = (0..rows * cols)
        .flat_map(|_| {
            let r = rng.next_u64();
            let sign = (r & 1) as u16;
            let exponent = 9 + (r >> 1) % 5;
            let mantissa = ((r >> 8) & 0x3ff) as u16;
            ((sign << 15) | ((exponent as u16) << 10) | mantissa).to_le_bytes()
        })
        .collect();
    Tensor {
        name: name.into(),
        dims: vec![cols, rows],
        ty: tensor_type::F16,
        data,
        offset: None,
    }
}

/// A norm of `len` ones, in F32.
fn norm(name: &str, len: u64) -> Tensor {
    Tensor {
        name: name.into(),
        dims: vec![len],
        ty: tensor_type::F32,
        data: (0..len).flat_map(|_| 1f32.to_le_bytes()).collect(),
        offset: None,
    }
}
