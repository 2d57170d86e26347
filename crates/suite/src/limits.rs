//! The caps on what nmb reads from files: how many bytes a file read whole may hold, how deep JSON may nest, and
//! what a Parquet table may claim. Each is checked before the bytes are trusted, so that a huge or hostile file
//! is a clear error naming the file and the cap, never an abort, a hang or gigabytes of memory.
//!
//! Every file nmb reads whole (a suite in any format but Parquet, an answer key, an import, a run file, a rubric,
//! a criteria file, a ratings CSV) goes through [`read`] or [`read_to_string`], which refuse a file over
//! [`max_file_bytes`] before reading it (and stop reading at the cap, for a file that grows or a device that
//! never ends). Parquet tables are read a row group at a time instead; their footers are checked by the table
//! loader against [`MAX_PARQUET_DEPTH`], the file's size and the decoded-size budget of [`parquet_budget`].

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes a file read whole may hold by default (64 MiB): every benchmark file nmb knows is under 20 MB (the
/// Neural-MedBench site file with its images is about 10 MB); parsing takes several times a file's size in
/// memory, so a few hundred MB would take gigabytes.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// How deep JSON may nest: serde_json's own recursion limit, which every JSON parser in nmb keeps (a suite, a
/// table, an answer, an import line). Real files nest a handful of levels.
pub const MAX_JSON_DEPTH: usize = 128;

/// How deep a Parquet schema may nest (groups within groups). A Hugging Face export nests two or three levels
/// (an image struct, a list of strings); the parquet crate builds its schema and record readers recursively.
pub const MAX_PARQUET_DEPTH: usize = 32;

/// Decoded bytes per byte of a Parquet file that its cells may add up to beyond [`max_file_bytes`]: text
/// compresses about 3 to 5 times with dictionaries and snappy; a table whose cells decode to far more repeats
/// one value (a dictionary bomb).
pub const PARQUET_DECODE_RATIO: u64 = 16;

/// Bytes a Parquet page may decompress to per compressed byte beyond [`PARQUET_PAGE_FLOOR`] (snappy expands at
/// most about 22 times; uncompressed pages are their own size).
pub const PARQUET_PAGE_RATIO: u64 = 64;

/// Bytes any Parquet page may decompress to, whatever its ratio.
pub const PARQUET_PAGE_FLOOR: u64 = 1 << 20;

static MAX_FILE: AtomicU64 = AtomicU64::new(MAX_FILE_BYTES);

/// Sets the cap of [`max_file_bytes`] for the rest of the process (0 keeps the default); the command line's
/// `--max-file-mib`.
pub fn set_max_file_bytes(bytes: u64) {
    let bytes = if bytes == 0 { MAX_FILE_BYTES } else { bytes };
    MAX_FILE.store(bytes, Ordering::Relaxed);
}

/// Bytes a file read whole may hold ([`MAX_FILE_BYTES`] unless set).
pub fn max_file_bytes() -> u64 {
    MAX_FILE.load(Ordering::Relaxed)
}

/// Bytes the cells of a Parquet file of `file_len` bytes may decode to.
pub fn parquet_budget(file_len: u64) -> u64 {
    file_len
        .saturating_mul(PARQUET_DECODE_RATIO)
        .max(max_file_bytes())
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is larger than {} ({size}); nmb reads files of at most {} whole; raise the cap with \
         --max-file-mib (or NMB_MAX_FILE_MIB)",
        mib(*cap),
        mib(*cap)
    )]
    TooLarge {
        path: String,
        /// What is known of its size: `N bytes`, or `more than the cap` for a file that grew while read.
        size: String,
        cap: u64,
    },
    #[error("{path} is not UTF-8 text (at byte {at})")]
    NotUtf8 { path: String, at: usize },
}

fn mib(bytes: u64) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{bytes} bytes"),
    }
}

/// The whole of the file at `path`, refused when it is larger than [`max_file_bytes`].
pub fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    read_capped(path, max_file_bytes())
}

/// The whole of the file at `path` as UTF-8 text, refused when it is larger than [`max_file_bytes`].
pub fn read_to_string(path: &Path) -> Result<String, FileError> {
    let bytes = read(path)?;
    String::from_utf8(bytes).map_err(|e| FileError::NotUtf8 {
        path: path.display().to_string(),
        at: e.utf8_error().valid_up_to(),
    })
}

/// [`read`] as an `io::Result`, for readers whose errors already name the file (`cannot read PATH: ...`): the
/// cap's error says what was too large and how to raise the cap, without repeating the path.
pub fn read_io(path: &Path) -> std::io::Result<Vec<u8>> {
    read(path).map_err(FileError::into_io)
}

/// [`read_to_string`] as an `io::Result` (see [`read_io`]).
pub fn read_to_string_io(path: &Path) -> std::io::Result<String> {
    read_to_string(path).map_err(FileError::into_io)
}

impl FileError {
    /// The error without the file's name, as an `io::Error`.
    pub fn into_io(self) -> std::io::Error {
        use std::io::{Error, ErrorKind};
        match self {
            FileError::Read { source, .. } => source,
            FileError::TooLarge { size, cap, .. } => Error::other(format!(
                "larger than {} ({size}); nmb reads files of at most {} whole; raise the cap with \
                 --max-file-mib (or NMB_MAX_FILE_MIB)",
                mib(cap),
                mib(cap)
            )),
            FileError::NotUtf8 { at, .. } => Error::new(
                ErrorKind::InvalidData,
                format!("not UTF-8 text (at byte {at})"),
            ),
        }
    }
}

/// [`read`] with an explicit cap.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let shown = || path.display().to_string();
    let io = |source| FileError::Read {
        path: shown(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > cap {
        return Err(FileError::TooLarge {
            path: shown(),
            size: format!("{size} bytes"),
            cap,
        });
    }
    // The size said is a hint (a device or a growing file says otherwise): at most one byte past the cap is read.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge {
            path: shown(),
            size: "more than the cap".into(),
            cap,
        });
    }
    Ok(bytes)
}

/// A serde_json error as a message; at the nesting bound it says so ([`MAX_JSON_DEPTH`]) rather than
/// serde_json's "recursion limit exceeded".
pub fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.strip_prefix("recursion limit exceeded") {
        Some(at) => format!("nested more than {MAX_JSON_DEPTH} levels deep{at}; nmb reads JSON nested at most that deep"),
        None => text,
    }
}

/// A TOML error as a message: what is wrong, its line, and a bounded excerpt around it with its byte offset
/// (the toml crate's own text quotes the whole line, which may be a megabyte long).
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    use nmb_table::terminal::{excerpt_at, excerpt_of};
    let message = excerpt_of(e.message().trim_end(), 500);
    match e.span() {
        Some(span) => {
            let at = span.start.min(text.len());
            let line = 1 + text.as_bytes()[..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            format!("{message} (line {line}, {})", excerpt_at(text, at))
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_cap_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        std::fs::write(&path, vec![b' '; 2048]).unwrap();
        assert_eq!(read_capped(&path, 2048).unwrap().len(), 2048);
        let err = read_capped(&path, 2047).unwrap_err().to_string();
        assert!(
            err.contains("big.json is larger than 2047 bytes (2048 bytes)"),
            "{err}"
        );
        assert!(err.contains("--max-file-mib"), "{err}");
        let err = read_capped(&path, 1 << 20).map(|_| ());
        assert!(err.is_ok());
    }

    #[test]
    fn a_device_that_never_ends_is_cut_at_the_cap() {
        let err = read_capped(Path::new("/dev/zero"), 4096)
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than the cap"), "{err}");
    }

    #[test]
    fn a_toml_error_in_a_long_line_quotes_an_excerpt() {
        let text = format!(
            "id = \"x\"\nlist = {}{}",
            "[".repeat(400_000),
            "]".repeat(400_000)
        );
        let e = toml::from_str::<toml::Table>(&text).unwrap_err();
        let msg = toml_error(&text, &e);
        assert!(msg.contains("(line 2, at byte "), "{msg}");
        assert!(msg.len() < 1000, "{} bytes: {}", msg.len(), &msg[..1000]);
        let e = toml::from_str::<toml::Table>("a = \"\u{1b}[2J\" x").unwrap_err();
        let msg = toml_error("a = \"\u{1b}[2J\" x", &e);
        assert!(!msg.chars().any(char::is_control), "{msg:?}");
    }

    #[test]
    fn too_deep_json_says_so() {
        let deep = "[".repeat(100_000);
        let e = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        let msg = json_error(&e);
        assert!(
            msg.starts_with("nested more than 128 levels deep at line 1 column"),
            "{msg}"
        );
    }
}
