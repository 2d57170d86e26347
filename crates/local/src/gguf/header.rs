//! Reading a GGUF header (metadata and tensor table) with every count, length, size and offset checked against
//! the bytes the file really holds before anything is allocated from it.
//!
//! These are the file format's checks, whatever the file is for: a language model and any other GGUF beside it
//! (a vision projector) go through the same ones. What shape each tensor must have is its reader's to check
//! (`engine`'s loader for a language model), once this has made sure every tensor lies whole inside the file.
//!
//! What is refused, each naming the key or tensor and saying what was expected: a file that is not GGUF version
//! 2 or 3; counts of tensors, metadata entries, array items or string bytes that the rest of the file cannot hold
//! at their smallest size; more than [`MAX_METADATA_VALUES`] metadata values; nested arrays; booleans other than 0
//! and 1; a key or tensor name given twice; more than [`MAX_DIMS`] dimensions; dimensions whose product passes
//! 2^63; a first dimension that is not a whole number of its type's blocks; a `general.alignment` that is not a
//! power of two of at most [`MAX_ALIGNMENT`]; a data section that starts past the end of the file; a tensor whose
//! offset is not aligned, or whose bytes (computed with checked arithmetic) run past the end of the file or
//! overlap another tensor's.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};
use candle_core::quantized::GgmlDType;

use crate::LocalError;

/// GGML's limit on a tensor's dimensions (`GGML_MAX_DIMS`).
pub(crate) const MAX_DIMS: u32 = 4;
/// The most metadata values (array items counted one by one) a header may hold. Each takes 32 bytes in memory
/// however few it takes in the file; the largest vocabularies (262,144 tokens, with their scores and types) need
/// under a million.
pub(crate) const MAX_METADATA_VALUES: u64 = 1 << 22;
/// The largest `general.alignment` accepted (GGUF writers use 32; llama.cpp only asks for a power of two).
pub(crate) const MAX_ALIGNMENT: u64 = 1 << 20;
/// The alignment of a file that names none.
const DEFAULT_ALIGNMENT: u64 = 32;
/// A GGUF file starts with these bytes.
const MAGIC: &[u8; 4] = b"GGUF";

/// Reads and checks the header of the GGUF file at `path`, open as `file`: its metadata, its tensor table, and
/// where its data section starts. Tensor data is not read.
pub(crate) fn read(path: &Path, file: &File) -> Result<Content, LocalError> {
    let len = file.metadata().map_err(|e| super::io_err(path, e))?.len();
    let mut r = Cursor {
        file: BufReader::with_capacity(64 * 1024, file),
        path,
        at: 0,
        len,
        values: 0,
    };
    let magic = r.version()?;
    let tensor_count = r.u64("the tensor count")?;
    let entry_count = r.u64("the metadata entry count")?;
    r.counts_fit(tensor_count, entry_count)?;
    let metadata = r.metadata(entry_count)?;
    let tensors = r.tensor_table(tensor_count)?;
    let alignment = alignment(path, &metadata)?;
    let data_offset = r.at.next_multiple_of(alignment);
    if data_offset > len {
        return Err(r.err(format!(
            "the data section would start at byte {data_offset} (the header ends at byte {}, aligned to {alignment}), \
             past the end of the {len}-byte file",
            r.at
        )));
    }
    let tensor_infos = place(path, tensors, data_offset, alignment, len)?;
    Ok(Content {
        magic,
        metadata,
        tensor_infos,
        tensor_data_offset: data_offset,
    })
}

/// One row of the tensor table, before it is placed in the data section.
struct Entry {
    name: String,
    /// GGML order: the first dimension is the one that varies fastest (a row's length).
    dims: Vec<u64>,
    dtype: GgmlDType,
    offset: u64,
    /// Bytes of data, from the dimensions and the type (checked).
    bytes: u64,
}

/// The file being read, where, and how many metadata values it has given so far.
struct Cursor<'a> {
    file: BufReader<&'a File>,
    path: &'a Path,
    at: u64,
    len: u64,
    values: u64,
}

impl Cursor<'_> {
    fn err(&self, message: String) -> LocalError {
        gguf_err(self.path, message)
    }

    fn left(&self) -> u64 {
        self.len.saturating_sub(self.at)
    }

    /// Fills `buf` from the file, refusing to read past its end.
    fn fill(&mut self, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<(), LocalError> {
        let n = buf.len() as u64;
        if n > self.left() {
            return Err(self.err(format!(
                "the file ends at byte {} in the middle of {}",
                self.len,
                what()
            )));
        }
        self.file
            .read_exact(buf)
            .map_err(|e| self.err(format!("cannot read {} at byte {}: {e}", what(), self.at)))?;
        self.at += n;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], LocalError> {
        let mut b = [0u8; N];
        self.fill(&mut b, what)?;
        Ok(b)
    }

    fn u32(&mut self, what: &str) -> Result<u32, LocalError> {
        self.array(&|| what.to_string()).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, LocalError> {
        self.array(&|| what.to_string()).map(u64::from_le_bytes)
    }

    fn version(&mut self) -> Result<VersionedMagic, LocalError> {
        let magic: [u8; 4] = self.array(&|| "the magic bytes".into())?;
        if &magic != MAGIC {
            return Err(self.err(format!(
                "it starts with {magic:02x?}, not GGUF's magic bytes `GGUF`"
            )));
        }
        match self.u32("the version")? {
            2 => Ok(VersionedMagic::GgufV2),
            3 => Ok(VersionedMagic::GgufV3),
            1 => Err(self.err(
                "GGUF version 1 is not read (llama.cpp no longer reads it either); convert the model again".into(),
            )),
            v if (1..=3).contains(&v.swap_bytes()) => Err(self.err(format!(
                "version {} in big-endian byte order; expected a little-endian GGUF file",
                v.swap_bytes()
            ))),
            v => Err(self.err(format!("GGUF version {v}; expected 2 or 3"))),
        }
    }

    /// Each metadata entry takes at least a key length, a type and one byte; each tensor row at least a name
    /// length, a dimension count, a type and an offset.
    fn counts_fit(&self, tensors: u64, entries: u64) -> Result<(), LocalError> {
        let need = entries
            .checked_mul(8 + 4 + 1)
            .and_then(|m| tensors.checked_mul(8 + 4 + 4 + 8)?.checked_add(m));
        match need {
            Some(need) if need <= self.left() => Ok(()),
            _ => Err(self.err(format!(
                "the header claims {tensors} tensors and {entries} metadata entries, more than the {} bytes \
                 left in the file can hold",
                self.left()
            ))),
        }
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, LocalError> {
        let n = self.array::<8>(&|| format!("the length of {}", what()))?;
        let n = u64::from_le_bytes(n);
        if n > self.left() {
            return Err(self.err(format!(
                "{} claims {n} bytes, but only {} bytes of the file are left",
                what(),
                self.left()
            )));
        }
        let mut bytes = vec![0u8; n as usize];
        self.fill(&mut bytes, what)?;
        // GGUF strings carry no terminator, but some writers add one.
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn metadata(&mut self, count: u64) -> Result<HashMap<String, Value>, LocalError> {
        let mut map = HashMap::new();
        for i in 0..count {
            let key = self.string(&|| format!("the key of metadata entry {i}"))?;
            let what = |k: &str| format!("metadata `{k}`");
            let id = self.u32(&format!("the type of {}", what(&key)))?;
            let kind = Kind::of(id)
                .ok_or_else(|| self.err(format!("{}: unknown value type {id}", what(&key))))?;
            self.count_values(1, &key)?;
            let value = self.value(kind, &key)?;
            if map.insert(key.clone(), value).is_some() {
                return Err(self.err(format!("{} is given twice", what(&key))));
            }
        }
        Ok(map)
    }

    fn count_values(&mut self, n: u64, key: &str) -> Result<(), LocalError> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_METADATA_VALUES {
            return Err(self.err(format!(
                "metadata `{key}`: the metadata holds more than {MAX_METADATA_VALUES} values in all, more than \
                 any model's vocabulary needs"
            )));
        }
        Ok(())
    }

    fn value(&mut self, kind: Kind, key: &str) -> Result<Value, LocalError> {
        let what = || format!("metadata `{key}`");
        Ok(match kind {
            Kind::U8 => Value::U8(u8::from_le_bytes(self.array(&what)?)),
            Kind::I8 => Value::I8(i8::from_le_bytes(self.array(&what)?)),
            Kind::U16 => Value::U16(u16::from_le_bytes(self.array(&what)?)),
            Kind::I16 => Value::I16(i16::from_le_bytes(self.array(&what)?)),
            Kind::U32 => Value::U32(u32::from_le_bytes(self.array(&what)?)),
            Kind::I32 => Value::I32(i32::from_le_bytes(self.array(&what)?)),
            Kind::U64 => Value::U64(u64::from_le_bytes(self.array(&what)?)),
            Kind::I64 => Value::I64(i64::from_le_bytes(self.array(&what)?)),
            Kind::F32 => Value::F32(f32::from_le_bytes(self.array(&what)?)),
            Kind::F64 => Value::F64(f64::from_le_bytes(self.array(&what)?)),
            Kind::Bool => match self.array::<1>(&what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.err(format!("{}: a boolean (0 or 1), found {b}", what()))),
            },
            Kind::String => Value::String(self.string(&what)?),
            Kind::Array => self.array_value(key)?,
        })
    }

    fn array_value(&mut self, key: &str) -> Result<Value, LocalError> {
        let what = format!("metadata `{key}`");
        let id = self.u32(&format!("the item type of {what}"))?;
        let kind = Kind::of(id)
            .ok_or_else(|| self.err(format!("{what}: an array of unknown value type {id}")))?;
        if kind == Kind::Array {
            return Err(self.err(format!(
                "{what}: an array of arrays; GGUF readers (llama.cpp's too) take flat arrays only"
            )));
        }
        let n = self.u64(&format!("the length of {what}"))?;
        let fits = n
            .checked_mul(kind.min_size())
            .is_some_and(|b| b <= self.left());
        if !fits {
            return Err(self.err(format!(
                "{what}: an array of {n} items of at least {} bytes each, more than the {} bytes left in the file",
                kind.min_size(),
                self.left()
            )));
        }
        self.count_values(n, key)?;
        // Sized from the bytes left in the file (checked above), not from the claim alone.
        let mut items = Vec::with_capacity(n as usize);
        for _ in 0..n {
            items.push(self.value(kind, key)?);
        }
        Ok(Value::Array(items))
    }

    fn tensor_table(&mut self, count: u64) -> Result<Vec<Entry>, LocalError> {
        let mut entries = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..count {
            let name = self.string(&|| format!("the name of tensor {i}"))?;
            let entry = self.tensor_entry(name)?;
            if !seen.insert(entry.name.clone()) {
                return Err(tensor_err(
                    self.path,
                    &entry.name,
                    "it is listed twice".into(),
                ));
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn tensor_entry(&mut self, name: String) -> Result<Entry, LocalError> {
        let what = |part: &str| format!("the {part} of tensor `{name}`");
        let n_dims = self.u32(&what("dimension count"))?;
        if n_dims > MAX_DIMS {
            return Err(tensor_err(
                self.path,
                &name,
                format!("{n_dims} dimensions; GGML tensors have at most {MAX_DIMS}"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64(&what("dimensions"))?);
        }
        let type_id = self.u32(&what("type"))?;
        let dtype = ggml_dtype(type_id).ok_or_else(|| unsupported_type(self.path, type_id))?;
        let offset = self.u64(&what("offset"))?;
        let bytes = byte_size(&dims, dtype).map_err(|m| tensor_err(self.path, &name, m))?;
        Ok(Entry {
            name,
            dims,
            dtype,
            offset,
            bytes,
        })
    }
}

/// The bytes a tensor of `dims` (GGML order) in `dtype` takes, with checked arithmetic.
fn byte_size(dims: &[u64], dtype: GgmlDType) -> Result<u64, String> {
    let shown = shown(dims);
    let elems = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| format!("shape {shown} holds more than 2^63 values"))?;
    let block = dtype.block_size() as u64;
    let row = dims.first().copied().unwrap_or(1);
    if !row.is_multiple_of(block) {
        return Err(format!(
            "shape {shown} in {dtype:?}: its rows of {row} values are not a whole number of {block}-value blocks"
        ));
    }
    Ok(elems / block * dtype.type_size() as u64)
}

/// Dimensions as the rest of this crate shows them: outermost first (`[rows, columns]`), the reverse of GGML's
/// order.
fn shown(dims: &[u64]) -> String {
    let rev: Vec<u64> = dims.iter().rev().copied().collect();
    format!("{rev:?}")
}

/// `general.alignment`: a power of two of at most [`MAX_ALIGNMENT`], or 32 when absent.
fn alignment(path: &Path, metadata: &HashMap<String, Value>) -> Result<u64, LocalError> {
    let key = "general.alignment";
    let Some(v) = metadata.get(key) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let found = super::as_uint(v);
    match found {
        Some(a) if a.is_power_of_two() && a <= MAX_ALIGNMENT => Ok(a),
        _ => Err(LocalError::Metadata {
            path: path.to_path_buf(),
            key: key.into(),
            expected: format!(
                "a power of two of at most {MAX_ALIGNMENT} bytes (GGUF writers use 32), found {}",
                found.map_or_else(|| format!("{v:?}"), |a| a.to_string())
            ),
        }),
    }
}

/// Places every tensor in the data section: its offset aligned, its bytes inside the file and apart from every
/// other tensor's.
fn place(
    path: &Path,
    entries: Vec<Entry>,
    data_offset: u64,
    alignment: u64,
    len: u64,
) -> Result<HashMap<String, TensorInfo>, LocalError> {
    let mut extents = Vec::with_capacity(entries.len());
    for e in &entries {
        if !e.offset.is_multiple_of(alignment) {
            return Err(tensor_err(
                path,
                &e.name,
                format!(
                    "offset {} is not a multiple of the file's alignment of {alignment} bytes",
                    e.offset
                ),
            ));
        }
        let start = data_offset.checked_add(e.offset);
        let end = start.and_then(|s| s.checked_add(e.bytes));
        match (start, end) {
            (Some(start), Some(end)) if end <= len => extents.push((start, end, &e.name)),
            _ => {
                return Err(tensor_err(
                    path,
                    &e.name,
                    format!(
                        "its {} bytes at offset {} of the data section (which starts at byte {data_offset}) run \
                         past the end of the {len}-byte file",
                        e.bytes, e.offset
                    ),
                ))
            }
        }
    }
    extents.retain(|(start, end, _)| end > start);
    extents.sort_unstable();
    if let Some(w) = extents.windows(2).find(|w| w[1].0 < w[0].1) {
        let ((s0, e0, a), (s1, e1, b)) = (w[0], w[1]);
        return Err(tensor_err(
            path,
            b,
            format!("its bytes {s1}..{e1} overlap those of tensor `{a}` ({s0}..{e0})"),
        ));
    }
    Ok(entries
        .into_iter()
        .map(|e| {
            let mut dims: Vec<usize> = e.dims.iter().map(|&d| d as usize).collect();
            dims.reverse();
            let info = TensorInfo {
                ggml_dtype: e.dtype,
                shape: dims.into(),
                offset: e.offset,
            };
            (e.name, info)
        })
        .collect())
}

/// GGUF's value types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl Kind {
    fn of(id: u32) -> Option<Kind> {
        use Kind::*;
        [
            U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64,
        ]
        .get(id as usize)
        .copied()
    }

    /// The fewest bytes one value takes in the file.
    fn min_size(self) -> u64 {
        match self {
            Kind::U8 | Kind::I8 | Kind::Bool => 1,
            Kind::U16 | Kind::I16 => 2,
            Kind::U32 | Kind::I32 | Kind::F32 => 4,
            Kind::U64 | Kind::I64 | Kind::F64 | Kind::String => 8,
            Kind::Array => 4 + 8,
        }
    }
}

/// The tensor types candle holds (GGML's ids); the others are refused by name.
fn ggml_dtype(id: u32) -> Option<GgmlDType> {
    Some(match id {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => return None,
    })
}

fn unsupported_type(path: &Path, id: u32) -> LocalError {
    LocalError::UnsupportedType {
        path: path.to_path_buf(),
        type_name: ggml_type_name(id).to_string(),
        id,
        supported: crate::quant::supported_types(),
    }
}

/// GGML's name for a tensor type that is not read here.
fn ggml_type_name(id: u32) -> &'static str {
    match id {
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => "unknown",
    }
}

fn gguf_err(path: &Path, message: String) -> LocalError {
    LocalError::Gguf {
        path: path.to_path_buf(),
        message,
    }
}

pub(crate) fn tensor_err(path: &Path, name: &str, message: String) -> LocalError {
    gguf_err(path, format!("tensor `{name}`: {message}"))
}
