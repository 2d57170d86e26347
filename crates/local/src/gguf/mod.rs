//! Reading GGUF files: the header, checked before use ([`header`]), typed access to the metadata, and the cheap
//! content identity of a file.

mod header;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use sha2::{Digest, Sha256};

use crate::LocalError;

/// Typed access to a GGUF file's metadata map, naming the file in every error.
pub(crate) struct Meta<'a> {
    pub path: &'a Path,
    pub map: &'a HashMap<String, Value>,
}

impl<'a> Meta<'a> {
    fn err(&self, key: &str, expected: &str) -> LocalError {
        LocalError::Metadata {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            expected: expected.to_string(),
        }
    }

    pub fn string(&self, key: &str) -> Result<&'a str, LocalError> {
        match self.map.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(self.err(key, "a string")),
            None => Err(self.err(key, "a string (key missing)")),
        }
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<&'a str>, LocalError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }

    /// Any integer type that fits in a u64 (GGUF writers differ on u32/i32/u64).
    pub fn uint(&self, key: &str) -> Result<u64, LocalError> {
        let v = self
            .map
            .get(key)
            .ok_or_else(|| self.err(key, "an unsigned integer (key missing)"))?;
        as_uint(v).ok_or_else(|| self.err(key, "an unsigned integer"))
    }

    pub fn opt_uint(&self, key: &str) -> Result<Option<u64>, LocalError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(_) => self.uint(key).map(Some),
        }
    }

    /// A number stored as f32 or f64 (or an integer), when present.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, LocalError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => as_int(v)
                .map(|i| Some(i as f32))
                .ok_or_else(|| self.err(key, "a number")),
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, LocalError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.err(key, "a boolean")),
        }
    }

    /// An array of strings (tokens, merges).
    pub fn strings(&self, key: &str) -> Result<Vec<&'a str>, LocalError> {
        let items = match self.map.get(key) {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.err(key, "an array of strings")),
            None => return Err(self.err(key, "an array of strings (key missing)")),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.as_str()),
                _ => Err(self.err(
                    key,
                    &format!("an array of strings (item {i} is not a string)"),
                )),
            })
            .collect()
    }

    /// How many items the array under `key` holds, when there is one.
    pub fn opt_array_len(&self, key: &str) -> Result<Option<usize>, LocalError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.len())),
            Some(_) => Err(self.err(key, "an array")),
        }
    }

    /// An optional array of integers (token types).
    pub fn opt_ints(&self, key: &str) -> Result<Option<Vec<i64>>, LocalError> {
        let items = match self.map.get(key) {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.err(key, "an array of integers")),
            None => return Ok(None),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                as_int(v).ok_or_else(|| {
                    self.err(
                        key,
                        &format!("an array of integers (item {i} is not an integer)"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// An optional array of numbers (token scores), read as f32 as llama.cpp reads them.
    pub fn opt_f32s(&self, key: &str) -> Result<Option<Vec<f32>>, LocalError> {
        let items = match self.map.get(key) {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.err(key, "an array of numbers")),
            None => return Ok(None),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::F32(x) => Ok(*x),
                Value::F64(x) => Ok(*x as f32),
                other => as_int(other).map(|x| x as f32).ok_or_else(|| {
                    self.err(
                        key,
                        &format!("an array of numbers (item {i} is not a number)"),
                    )
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match *v {
        Value::U8(x) => Some(x.into()),
        Value::I8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::I16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::I32(x) => Some(x.into()),
        Value::U64(x) => i64::try_from(x).ok(),
        Value::I64(x) => Some(x),
        _ => None,
    }
}

pub(crate) fn as_uint(v: &Value) -> Option<u64> {
    as_int(v).and_then(|x| u64::try_from(x).ok())
}

/// Opens a GGUF file and reads its header (metadata and tensor table; no tensor data), checked as
/// [`header`] says.
pub(crate) fn read_content(path: &Path) -> Result<(File, Content), LocalError> {
    let file = File::open(path).map_err(|source| io_err(path, source))?;
    let content = header::read(path, &file)?;
    Ok((file, content))
}

/// A candle error's message without the backtrace candle appends to it when `RUST_BACKTRACE` is set: an error
/// text is for people, whatever the environment says.
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => candle_message(inner),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        other => other.to_string(),
    }
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> LocalError {
    LocalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How many evenly spaced slices of tensor data go into the content identity, and how long each is.
const DATA_SAMPLES: u64 = 32;
const SAMPLE_LEN: u64 = 4096;

/// A cheap content hash of a GGUF file: the whole header (metadata, tokenizer, chat template, tensor table),
/// the file length, and 32 slices of 4 KiB spread over the tensor data. Two files that differ only in weights
/// (a fine-tune with the same layout) almost surely differ in those slices too, and hashing reads about 2 MB
/// instead of the whole file.
pub(crate) fn content_hash(
    path: &Path,
    file: &mut File,
    data_offset: u64,
) -> Result<String, LocalError> {
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let mut h = Sha256::new();
    h.update(b"nmb-gguf-id-v1\n");
    h.update(len.to_le_bytes());
    hash_range(path, file, 0, data_offset.min(len), &mut h)?;
    let data_len = len.saturating_sub(data_offset);
    for i in 0..DATA_SAMPLES {
        let start = data_offset + data_len * i / DATA_SAMPLES;
        let take = SAMPLE_LEN.min(len - start);
        hash_range(path, file, start, take, &mut h)?;
    }
    Ok(hex::encode(h.finalize()))
}

fn hash_range(
    path: &Path,
    file: &mut File,
    start: u64,
    len: u64,
    h: &mut Sha256,
) -> Result<(), LocalError> {
    file.seek(SeekFrom::Start(start))
        .map_err(|e| io_err(path, e))?;
    let mut limited = (&mut *file).take(len);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = limited.read(&mut buf).map_err(|e| io_err(path, e))?;
        if n == 0 {
            return Ok(());
        }
        h.update(&buf[..n]);
    }
}

/// The display name part of a model id: the file name, or the whole path when it has none.
pub(crate) fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// `tokenizer.json` next to the GGUF, if there is one.
pub(crate) fn sibling_tokenizer(path: &Path) -> Option<PathBuf> {
    let candidate = path.with_file_name("tokenizer.json");
    candidate.is_file().then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// candle appends a backtrace to its errors' text when `RUST_BACKTRACE` is set; no error of this crate carries
    /// it on.
    #[test]
    fn candle_messages_leave_backtraces_out() {
        let inner = candle_core::Error::Msg("tensor needs 64 bytes".into());
        let e = candle_core::Error::WithBacktrace {
            inner: Box::new(inner),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert!(
            e.to_string()
                .contains("candle_messages_leave_backtraces_out"),
            "{e}"
        );
        assert_eq!(candle_message(&e), "tensor needs 64 bytes");
        let with_context = e.context("reading `output.weight`");
        assert_eq!(
            candle_message(&with_context),
            "reading `output.weight`: tensor needs 64 bytes"
        );
    }
}
