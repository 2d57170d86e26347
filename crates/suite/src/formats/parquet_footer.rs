//! Checks a Parquet file's metadata before the parquet crate builds anything from it.
//!
//! The crate trusts its footer: a schema group claiming 2^31 children makes it allocate for them all (17 GB),
//! a schema nested 100,000 levels deep overflows the stack of its recursive schema builder, and a page claiming
//! to decompress to 2 GB is allocated and zeroed before the decompressor finds out. So the footer is walked here
//! first, with a Thrift compact-protocol reader of its own that trusts nothing it reads: every length and count
//! is checked against the bytes that remain, nesting is bounded, and then the schema's shape (children counts,
//! depth up to [`MAX_PARQUET_DEPTH`]), each column chunk's extent against the file's data section, and each
//! page's sizes (against its chunk, and its decompressed size against [`PARQUET_PAGE_RATIO`] times its
//! compressed size) are checked. Anything the crate would misread this way is refused with what was found.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::limits::{max_file_bytes, MAX_PARQUET_DEPTH, PARQUET_PAGE_FLOOR, PARQUET_PAGE_RATIO};

/// What the footer says that the loader needs: the rows it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Footer {
    pub rows: u64,
}

/// Thrift structs nest a few levels in real footers (file, row group, column chunk, metadata, statistics, a
/// logical type); anything deeper is refused before it is skipped.
const MAX_THRIFT_DEPTH: usize = 16;

/// The longest page header read: headers hold a few sizes and at most small statistics.
const MAX_PAGE_HEADER: u64 = 1 << 20;

/// Checks the file at `path`; `Err` says what is wrong, for the loader to name the file.
pub(super) fn check(path: &Path) -> Result<Footer, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len < 12 {
        return Err(format!(
            "{len} bytes is too short for a Parquet file (PAR1 … footer … PAR1)"
        ));
    }
    let mut head = [0u8; 4];
    file.read_exact(&mut head).map_err(|e| e.to_string())?;
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::Start(len - 8))
        .map_err(|e| e.to_string())?;
    file.read_exact(&mut tail).map_err(|e| e.to_string())?;
    if &tail[4..] == b"PARE" {
        return Err("an encrypted Parquet footer (PARE); nmb reads plain Parquet only".into());
    }
    if &head != b"PAR1" || &tail[4..] != b"PAR1" {
        return Err("no PAR1 magic at its start and end".into());
    }
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let data_end = len - 8;
    if footer_len > data_end - 4 {
        return Err(format!(
            "its footer claims {footer_len} bytes, but the file has {} bytes before it",
            data_end - 4
        ));
    }
    if footer_len > max_file_bytes() {
        return Err(format!(
            "its footer is {footer_len} bytes, over the {}-byte cap on what nmb reads whole (--max-file-mib)",
            max_file_bytes()
        ));
    }
    let data_end = data_end - footer_len;
    file.seek(SeekFrom::Start(data_end))
        .map_err(|e| e.to_string())?;
    let mut footer = vec![0u8; footer_len as usize];
    file.read_exact(&mut footer).map_err(|e| e.to_string())?;
    let meta = read_file_metadata(&footer)?;
    check_schema(&meta.schema)?;
    let mut rows: u64 = 0;
    for (g, group) in meta.row_groups.iter().enumerate() {
        let at = |what: String| format!("row group {g}: {what}");
        let group_rows = u64::try_from(group.rows)
            .map_err(|_| at(format!("a negative row count ({})", group.rows)))?;
        rows = rows.saturating_add(group_rows);
        let mut claimed: u64 = 0;
        for (c, chunk) in group.columns.iter().enumerate() {
            let extent =
                check_chunk(chunk, data_end).map_err(|e| at(format!("column {c}: {e}")))?;
            claimed = claimed.saturating_add(extent.1 - extent.0);
            check_pages(&mut file, extent).map_err(|e| at(format!("column {c}: {e}")))?;
        }
        if claimed > data_end - 4 {
            return Err(at(format!(
                "its column chunks claim {claimed} bytes, more than the {} bytes of data in the file",
                data_end - 4
            )));
        }
    }
    if meta
        .rows
        .is_some_and(|r| u64::try_from(r).ok() != Some(rows))
    {
        return Err(format!(
            "the footer claims {} rows, its row groups {rows}",
            meta.rows.unwrap_or_default()
        ));
    }
    Ok(Footer { rows })
}

#[derive(Default)]
struct FileMetaData {
    schema: Vec<SchemaElement>,
    rows: Option<i64>,
    row_groups: Vec<RowGroup>,
}

#[derive(Default)]
struct SchemaElement {
    has_type: bool,
    children: Option<i64>,
}

#[derive(Default)]
struct RowGroup {
    rows: i64,
    columns: Vec<ColumnChunk>,
}

#[derive(Default)]
struct ColumnChunk {
    external: bool,
    meta: Option<ColumnMeta>,
}

#[derive(Default)]
struct ColumnMeta {
    values: i64,
    uncompressed: i64,
    compressed: i64,
    data_page: i64,
    dictionary_page: Option<i64>,
}

fn read_file_metadata(bytes: &[u8]) -> Result<FileMetaData, String> {
    let mut t = Thrift::new(bytes);
    let mut meta = FileMetaData::default();
    t.read_struct(|t, id, ty| {
        match (id, ty) {
            (2, LIST) => t.read_list(STRUCT, |t| {
                let mut el = SchemaElement::default();
                t.read_struct(|t, id, ty| match (id, ty) {
                    (1, I32) => {
                        el.has_type = true;
                        t.int().map(|_| true)
                    }
                    (5, I32) => t.int().map(|n| {
                        el.children = Some(n);
                        true
                    }),
                    _ => Ok(false),
                })?;
                meta.schema.push(el);
                Ok(())
            }),
            (3, I64) => t.int().map(|n| {
                meta.rows = Some(n);
            }),
            (4, LIST) => t.read_list(STRUCT, |t| {
                let group = read_row_group(t)?;
                meta.row_groups.push(group);
                Ok(())
            }),
            _ => return Ok(false),
        }
        .map(|()| true)
    })?;
    Ok(meta)
}

fn read_row_group(t: &mut Thrift<'_>) -> Result<RowGroup, String> {
    let mut group = RowGroup::default();
    t.read_struct(|t, id, ty| match (id, ty) {
        (1, LIST) => t
            .read_list(STRUCT, |t| {
                let chunk = read_column_chunk(t)?;
                group.columns.push(chunk);
                Ok(())
            })
            .map(|()| true),
        (3, I64) => t.int().map(|n| {
            group.rows = n;
            true
        }),
        _ => Ok(false),
    })?;
    Ok(group)
}

fn read_column_chunk(t: &mut Thrift<'_>) -> Result<ColumnChunk, String> {
    let mut chunk = ColumnChunk::default();
    t.read_struct(|t, id, ty| match (id, ty) {
        (1, BINARY) => t.binary().map(|_| {
            chunk.external = true;
            true
        }),
        (3, STRUCT) => {
            let mut meta = ColumnMeta::default();
            t.read_struct(|t, id, ty| {
                let slot = match (id, ty) {
                    (5, I64) => &mut meta.values,
                    (6, I64) => &mut meta.uncompressed,
                    (7, I64) => &mut meta.compressed,
                    (9, I64) => &mut meta.data_page,
                    (11, I64) => {
                        meta.dictionary_page = Some(t.int()?);
                        return Ok(true);
                    }
                    _ => return Ok(false),
                };
                *slot = t.int()?;
                Ok(true)
            })?;
            chunk.meta = Some(meta);
            Ok(true)
        }
        _ => Ok(false),
    })?;
    Ok(chunk)
}

/// The schema is a flattened tree (each group followed by its children): every children count must fit in
/// the elements that follow, the tree must use them all, and it may nest [`MAX_PARQUET_DEPTH`] levels.
fn check_schema(schema: &[SchemaElement]) -> Result<(), String> {
    let Some(root) = schema.first() else {
        return Err("its schema is empty".into());
    };
    if root.children.unwrap_or(0) <= 0 {
        return Err("its schema's root has no columns".into());
    }
    // Children still to come, per open group.
    let mut open: Vec<i64> = Vec::new();
    for (i, el) in schema.iter().enumerate() {
        if i > 0 {
            let Some(left) = open.last_mut() else {
                return Err(format!(
                    "schema element {i} lies outside the tree its root's children make"
                ));
            };
            *left -= 1;
        }
        let children = el.children.unwrap_or(0);
        let follow = (schema.len() - i - 1) as i64;
        if children < 0 || children > follow {
            return Err(format!(
                "schema element {i} claims {children} children; only {follow} elements come after it"
            ));
        }
        if children > 0 {
            open.push(children);
            if open.len() > MAX_PARQUET_DEPTH {
                return Err(format!(
                    "its schema nests deeper than {MAX_PARQUET_DEPTH} levels (at element {i}); nmb reads \
                     schemas at most that deep"
                ));
            }
        } else if !el.has_type {
            return Err(format!(
                "schema element {i} is neither a group with children nor a column with a type"
            ));
        }
        while open.last() == Some(&0) {
            open.pop();
        }
    }
    match open.is_empty() {
        true => Ok(()),
        false => Err("its schema ends before its groups' children do".into()),
    }
}

/// The byte range `[start, end)` of a column chunk, inside the data section `[4, data_end)`.
fn check_chunk(chunk: &ColumnChunk, data_end: u64) -> Result<(u64, u64), String> {
    if chunk.external {
        return Err(
            "its data is in another file (file_path); nmb reads single-file Parquet".into(),
        );
    }
    let meta = chunk.meta.as_ref().ok_or("no column metadata")?;
    for (name, v) in [
        ("num_values", meta.values),
        ("total_uncompressed_size", meta.uncompressed),
        ("total_compressed_size", meta.compressed),
    ] {
        if v < 0 {
            return Err(format!("a negative {name} ({v})"));
        }
    }
    let start = match meta.dictionary_page {
        Some(d) if d > 0 => d.min(meta.data_page),
        _ => meta.data_page,
    };
    let start = u64::try_from(start).ok().filter(|s| *s >= 4);
    let end = start.and_then(|s| s.checked_add(meta.compressed as u64));
    match (start, end) {
        (Some(start), Some(end)) if end <= data_end => Ok((start, end)),
        _ => Err(format!(
            "its pages (from byte {} on, {} bytes) lie outside the file's data (bytes 4 to {data_end})",
            start.map_or(meta.data_page, |s| s as i64),
            meta.compressed
        )),
    }
}

/// Walks the page headers of one column chunk: each page must fit in what is left of its chunk, and decompress
/// to at most [`PARQUET_PAGE_RATIO`] times its size (or [`PARQUET_PAGE_FLOOR`]).
fn check_pages(file: &mut std::fs::File, (start, end): (u64, u64)) -> Result<(), String> {
    let mut at = start;
    while at < end {
        let (header, uncompressed, compressed) = page_header(file, at, end)?;
        let (Ok(uncompressed), Ok(compressed)) =
            (u64::try_from(uncompressed), u64::try_from(compressed))
        else {
            return Err(format!("the page at byte {at} has a negative size"));
        };
        if header + compressed > end - at {
            return Err(format!(
                "the page at byte {at} claims {compressed} bytes, but its chunk has {} left",
                end - at - header
            ));
        }
        let cap = compressed
            .saturating_mul(PARQUET_PAGE_RATIO)
            .max(PARQUET_PAGE_FLOOR);
        if uncompressed > cap {
            return Err(format!(
                "the page at byte {at} claims to decompress from {compressed} to {uncompressed} bytes (at most \
                 {cap} are believed)"
            ));
        }
        at += header + compressed;
    }
    Ok(())
}

/// The page header at byte `at` (before `end`): its length, uncompressed and compressed sizes. A few KiB are
/// read first, up to [`MAX_PAGE_HEADER`] for a header with large statistics.
fn page_header(file: &mut std::fs::File, at: u64, end: u64) -> Result<(u64, i64, i64), String> {
    let mut buf = Vec::new();
    for want in [16 << 10, MAX_PAGE_HEADER] {
        let want = (end - at).min(want);
        buf.resize(want as usize, 0);
        file.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
        file.read_exact(&mut buf).map_err(|e| e.to_string())?;
        let mut t = Thrift::new(&buf);
        let (mut uncompressed, mut compressed) = (None, None);
        let read = t.read_struct(|t, id, ty| match (id, ty) {
            (2, I32) => t.int().map(|n| {
                uncompressed = Some(n);
                true
            }),
            (3, I32) => t.int().map(|n| {
                compressed = Some(n);
                true
            }),
            _ => Ok(false),
        });
        match read {
            Err(_) if t.ran_out && want < end - at && want < MAX_PAGE_HEADER => continue,
            Err(e) => return Err(format!("the page header at byte {at}: {e}")),
            Ok(()) => {
                return match (uncompressed, compressed) {
                    (Some(u), Some(c)) => Ok((t.pos as u64, u, c)),
                    _ => Err(format!("the page header at byte {at} has no sizes")),
                }
            }
        }
    }
    Err(format!(
        "the page header at byte {at} is longer than {MAX_PAGE_HEADER} bytes"
    ))
}

thread_local! {
    /// Set while [`guard`] runs the parquet crate on this thread: a panic there is caught and reported as an
    /// error, so the panic hook stays quiet for it.
    static CAUGHT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs the parquet crate's reading, turning a panic inside it into an error message. Its record reader asserts
/// on data a checked footer cannot rule out (definition levels that disagree with the values, a value cut
/// short), and a panic must not end the process. A hook installed once stays silent for the panics caught here
/// and hands every other panic to the hook that was there before.
pub(super) fn guard<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CAUGHT.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    let was = CAUGHT.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CAUGHT.with(|c| c.set(was));
    result.map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".into());
        format!("the parquet crate failed on malformed data ({what})")
    })
}

// Thrift compact protocol types (field and element types).
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const I8: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// A Thrift compact-protocol reader over a slice that checks every length against what remains and bounds
/// nesting at [`MAX_THRIFT_DEPTH`].
struct Thrift<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// Whether a read went past the end (a header cut by the buffer, rather than a malformed one).
    ran_out: bool,
}

impl<'a> Thrift<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Thrift {
            bytes,
            pos: 0,
            depth: 0,
            ran_out: false,
        }
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn err(&self, what: &str) -> String {
        format!("{what} (at byte {} of {})", self.pos, self.bytes.len())
    }

    fn byte(&mut self) -> Result<u8, String> {
        let Some(&b) = self.bytes.get(self.pos) else {
            self.ran_out = true;
            return Err(self.err("it ends inside a value"));
        };
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.left() {
            self.ran_out = true;
            return Err(self.err(&format!("a value claims {n} bytes, more than remain")));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(self.err("a varint longer than 64 bits"))
    }

    /// A zigzag integer (i16, i32 or i64).
    fn int(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn binary(&mut self) -> Result<&'a [u8], String> {
        let n = self.varint()?;
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// A list (or set) header: its length, checked against what remains (every element takes a byte at least).
    fn list_header(&mut self) -> Result<(usize, u8), String> {
        let b = self.byte()?;
        let n = match b >> 4 {
            15 => usize::try_from(self.varint()?).unwrap_or(usize::MAX),
            n => usize::from(n),
        };
        if n > self.left() {
            return Err(self.err(&format!(
                "a list claims {n} elements, more than the bytes that remain"
            )));
        }
        Ok((n, b & 0x0f))
    }

    /// Reads a list whose elements must be of type `want`, each with `each`.
    fn read_list(
        &mut self,
        want: u8,
        mut each: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        let (n, ty) = self.list_header()?;
        if ty != want {
            return Err(self.err(&format!("a list of type {ty} where type {want} belongs")));
        }
        self.nested(|t| (0..n).try_for_each(|_| each(t)))
    }

    /// Reads a struct's fields, handing each (id, type) to `field`, which reads it and returns true, or returns
    /// false to have it skipped.
    fn read_struct(
        &mut self,
        mut field: impl FnMut(&mut Self, i16, u8) -> Result<bool, String>,
    ) -> Result<(), String> {
        self.nested(|t| {
            let mut last: i16 = 0;
            loop {
                let b = t.byte()?;
                let ty = b & 0x0f;
                if ty == 0 {
                    return Ok(());
                }
                let id = match b >> 4 {
                    0 => i16::try_from(t.int()?).map_err(|_| t.err("a field id out of range"))?,
                    delta => last
                        .checked_add(i16::from(delta))
                        .ok_or_else(|| t.err("a field id out of range"))?,
                };
                last = id;
                if !field(t, id, ty)? {
                    t.skip(ty)?;
                }
            }
        })
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        if self.depth >= MAX_THRIFT_DEPTH {
            return Err(self.err(&format!(
                "Thrift values nested deeper than {MAX_THRIFT_DEPTH}"
            )));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    /// Skips a value of type `ty` (a field's or an element's: a boolean element is one byte).
    fn skip(&mut self, ty: u8) -> Result<(), String> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            I8 => self.byte().map(drop),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.take(8).map(drop),
            UUID => self.take(16).map(drop),
            BINARY => self.binary().map(drop),
            LIST | SET => {
                let (n, elem) = self.list_header()?;
                self.nested(|t| (0..n).try_for_each(|_| t.skip_element(elem)))
            }
            MAP => {
                let n = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                if n == 0 {
                    return Ok(());
                }
                if n > self.left() {
                    return Err(self.err(&format!(
                        "a map claims {n} entries, more than the bytes that remain"
                    )));
                }
                let kinds = self.byte()?;
                self.nested(|t| {
                    (0..n).try_for_each(|_| {
                        t.skip_element(kinds >> 4)?;
                        t.skip_element(kinds & 0x0f)
                    })
                })
            }
            STRUCT => self.read_struct(|_, _, _| Ok(false)),
            other => Err(self.err(&format!("an unknown Thrift type {other}"))),
        }
    }

    fn skip_element(&mut self, ty: u8) -> Result<(), String> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => self.byte().map(drop),
            other => self.skip(other),
        }
    }
}
