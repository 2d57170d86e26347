//! Hostile tables: crafted Parquet footers and schemas, large CSV files, deeply nested JSON, files over the size
//! cap and answers built to make parsing slow.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{check_all, Case};
use crate::common::{native_suite, nmb_command, TestTask};

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    vec![
        parquet_schema_nested_100k_deep(dir),
        parquet_root_claims_2_pow_31_children(dir),
        parquet_page_claims_2_gb(dir),
        parquet_chunk_outside_the_file(dir),
        parquet_list_claims_more_than_the_footer(dir),
        parquet_page_the_crate_asserts_on(dir),
        csv_of_200k_rows(dir),
        cases_jsonl_nested_arrays(dir),
        site_file_of_100_mb(dir),
        single_line_json_of_30_mb(dir),
        answer_key_over_a_lowered_cap(dir),
        bertscore_lines_over_a_lowered_cap(dir),
        answer_of_100k_nested_braces(dir),
    ]
}

/// A Parquet file the fuzzer found (`fuzz.rs`, Parquet table case 965): its footer is sound, but a data page
/// disagrees with its schema, and the parquet crate's record reader asserted on it (a panic that ended the process).
const FUZZED_PARQUET: &str = concat!(
    "UEFSMRUEFUAVREwVBBUAEgAAIHwNAAAASXMgaXQgbm9ybWFsPwsAAABXaGljaCBsb2JlPxUAFQYVCiwVBhUQFQYVBgAAAwgBAwIV",
    "BBUwFTRMFQYVABIAABhcAwAAAHllcwcAAABmcm9udGFsAgAAAG5vFQAVCBUMLBUGFRAVBhUGAAAEDAIDJAAVBBUWFRpMFQIVABIA",
    "AAsoBwAAAGltZy5wbmcVABUSFRYsFQYVEBUGFQYAAAkgAwAAACwDBgAAAhkSAhkYDUlzIGl0IG5vcm1hbD8ZGAtXaGljaCBsb2Jl",
    "PxUCGRYAABkSAhkYB2Zyb250YWwZGAN5ZXMVAhkWAAAZEgIZGAdpbWcucG5nGRgHaW1nLnBuZxUCGRYEKTYCAgIAGRwWaBUsFgAA",
    "GRZKABkcFuQBFS4WAAAZFhgAGRwWyAIVOBYAABkWDgAVAhlcSAJoZhUGABUMJQAYCHF1ZXN0aW9uJQAAFQwlABgGYW5zd2VyJQAA",
    "NQIYBWltYWdlFQIAFQwlAhgEcGF0aCUAABYGGRwZPCYAHBUMGTUABhAZGAhxdWVzdGlvbhUCFgYWhAEWjAEmaCYIHDYAKAtXaGlj",
    "aCBsb2JlPxgNSXMgaXQgbm9ybWFsPxERABksFQQVABUCABUAFRAVAgA8FkoAABbEBBUaFoADFU4AJgAcFQwZNQAGEBkYBmFuc3dl",
    "chUCFgYWdhZ+JuQBJpQBHDYAKAN5ZXMYB2Zyb250YWwREQAZLBUEFQAVAgAVABUQFQIAPBYYAAAW3gQVHBbOAxUyACYAHBUMGTUA",
    "BhAZKAVpbWFnZQRwYXRoFQIWBhZmFm4myAImkgIcNgQoB2ltZy5wbmcYB2ltZy5wbmcREQAZLBUEFQAVAgAVABUQFQIAPBYOKTYC",
    "AgIAABb6BBUcFoAEFUQAFuACFgYmCBb4AhQAACgZcGFycXVldC1ycyB2ZXJzaW9uIDYwLjEuMBk8HAAAHAAAHAAAAJoBAABQQVIx",
);

/// `nmb suite validate SPEC` in the case's own runs directory.
fn validate(
    dir: &Path,
    name: &str,
    spec: &str,
    extra: &[&str],
) -> (std::process::Command, PathBuf) {
    let runs = dir.join(format!("{name}-runs"));
    let mut c = nmb_command(&runs);
    c.args(["suite", "validate", spec]).args(extra);
    (c, runs)
}

fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A Thrift compact-protocol writer, just enough to write Parquet footers and page headers by hand.
#[derive(Default)]
pub(crate) struct Thrift {
    pub out: Vec<u8>,
    last: Vec<i16>,
}

const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

impl Thrift {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }
    fn zigzag(v: i64) -> u64 {
        ((v << 1) ^ (v >> 63)) as u64
    }
    fn field(&mut self, id: i16, ty: u8) {
        let last = self.last.last_mut().expect("inside a struct");
        let delta = id - *last;
        *last = id;
        match delta {
            1..=15 => self.out.push((delta as u8) << 4 | ty),
            _ => {
                self.out.push(ty);
                self.varint(Self::zigzag(id.into()));
            }
        }
    }
    /// Opens a struct: the file's, a list element's, or (after [`Thrift::field`] with `STRUCT`) a field's.
    pub fn begin(&mut self) -> &mut Self {
        self.last.push(0);
        self
    }
    pub fn end(&mut self) -> &mut Self {
        self.out.push(0);
        self.last.pop();
        self
    }
    pub fn i32(&mut self, id: i16, v: i32) -> &mut Self {
        self.field(id, I32);
        self.varint(Self::zigzag(v.into()));
        self
    }
    pub fn i64(&mut self, id: i16, v: i64) -> &mut Self {
        self.field(id, I64);
        self.varint(Self::zigzag(v));
        self
    }
    pub fn bin(&mut self, id: i16, b: &[u8]) -> &mut Self {
        self.field(id, BINARY);
        self.varint(b.len() as u64);
        self.out.extend_from_slice(b);
        self
    }
    /// A list field of `n` elements of type `ty`; the caller writes them.
    pub fn list(&mut self, id: i16, ty: u8, n: u64) -> &mut Self {
        self.field(id, LIST);
        match n {
            0..=14 => self.out.push((n as u8) << 4 | ty),
            _ => {
                self.out.push(0xf0 | ty);
                self.varint(n);
            }
        }
        self
    }
    pub fn strukt(&mut self, id: i16) -> &mut Self {
        self.field(id, STRUCT);
        self.begin()
    }
}

/// `PAR1`, `data`, the footer, its length, `PAR1`.
fn parquet(data: &[u8], footer: &[u8]) -> Vec<u8> {
    let mut out = b"PAR1".to_vec();
    out.extend_from_slice(data);
    out.extend_from_slice(footer);
    out.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    out.extend_from_slice(b"PAR1");
    out
}

/// A footer with `schema` written by the caller between the version and the (empty) row groups.
fn footer(schema: impl FnOnce(&mut Thrift)) -> Vec<u8> {
    let mut t = Thrift::default();
    t.begin().i32(1, 1);
    schema(&mut t);
    t.i64(3, 0).list(4, STRUCT, 0).end();
    t.out
}

fn parquet_schema_nested_100k_deep(dir: &Path) -> Case {
    let n = 100_000u64;
    let bytes = parquet(
        b"",
        &footer(|t| {
            t.list(2, STRUCT, n + 1);
            for _ in 0..n {
                t.begin().bin(4, b"g").i32(5, 1).end();
            }
            t.begin().i32(1, 6).bin(4, b"leaf").end();
        }),
    );
    let path = file(dir, "deep.parquet", &bytes);
    let (c, runs) = validate(dir, "deep", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet schema nested 100,000 groups deep",
        c,
        &runs,
        &["deep.parquet", "nests deeper than 32 levels"],
    )
}

fn parquet_root_claims_2_pow_31_children(dir: &Path) -> Case {
    let bytes = parquet(
        b"",
        &footer(|t| {
            t.list(2, STRUCT, 2);
            t.begin().bin(4, b"schema").i32(5, i32::MAX).end();
            t.begin().i32(1, 6).bin(4, b"leaf").end();
        }),
    );
    let path = file(dir, "children.parquet", &bytes);
    let (c, runs) = validate(dir, "children", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet root claiming 2^31 children in a file of a few dozen bytes",
        c,
        &runs,
        &[
            "children.parquet",
            "claims 2147483647 children; only 1 elements come after it",
        ],
    )
}

/// A footer of one string column `question` in one row group of one row, its pages at `data_page` for
/// `compressed` bytes.
fn one_column_footer(data_page: i64, compressed: i64) -> Vec<u8> {
    let mut t = Thrift::default();
    t.begin().i32(1, 1).list(2, STRUCT, 2);
    t.begin().bin(4, b"schema").i32(5, 1).end();
    t.begin()
        .i32(1, 6)
        .i32(3, 1)
        .bin(4, b"question")
        .i32(6, 0)
        .end();
    t.i64(3, 1).list(4, STRUCT, 1);
    t.begin().list(1, STRUCT, 1);
    t.begin().i64(2, data_page).strukt(3);
    t.i32(1, 6).list(2, I32, 1);
    t.varint(0);
    t.list(3, BINARY, 1);
    t.varint(8);
    t.out.extend_from_slice(b"question");
    t.i32(4, 1)
        .i64(5, 1)
        .i64(6, compressed)
        .i64(7, compressed)
        .i64(9, data_page);
    t.end().end(); // the metadata, the chunk
    t.i64(2, compressed).i64(3, 1).end(); // the row group
    t.end();
    t.out
}

fn parquet_page_claims_2_gb(dir: &Path) -> Case {
    let mut page = Thrift::default();
    page.begin().i32(1, 0).i32(2, i32::MAX).i32(3, 10).strukt(5);
    page.i32(1, 1).i32(2, 0).i32(3, 3).i32(4, 3).end().end();
    let mut data = page.out;
    data.extend_from_slice(&[0x80; 10]);
    let bytes = parquet(&data, &one_column_footer(4, data.len() as i64));
    let path = file(dir, "page.parquet", &bytes);
    let (c, runs) = validate(dir, "page", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet page of 10 bytes claiming to decompress to 2 GB",
        c,
        &runs,
        &[
            "page.parquet",
            "claims to decompress from 10 to 2147483647 bytes",
        ],
    )
}

fn parquet_chunk_outside_the_file(dir: &Path) -> Case {
    let bytes = parquet(&[0; 16], &one_column_footer(1 << 40, 1 << 20));
    let path = file(dir, "outside.parquet", &bytes);
    let (c, runs) = validate(dir, "outside", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet column chunk a terabyte past the file's end",
        c,
        &runs,
        &["outside.parquet", "lie outside the file's data"],
    )
}

fn parquet_list_claims_more_than_the_footer(dir: &Path) -> Case {
    let mut t = Thrift::default();
    t.begin().i32(1, 1).list(2, STRUCT, 1 << 40);
    let bytes = parquet(b"", &t.out);
    let path = file(dir, "list.parquet", &bytes);
    let (c, runs) = validate(dir, "list", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet footer whose schema list claims 2^40 elements",
        c,
        &runs,
        &["list.parquet", "more than the bytes that remain"],
    )
}

fn parquet_page_the_crate_asserts_on(dir: &Path) -> Case {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(FUZZED_PARQUET)
        .unwrap();
    let path = file(dir, "fuzzed.parquet", &bytes);
    let (c, runs) = validate(dir, "fuzzed", &format!("table:{}", path.display()), &[]);
    Case::refused(
        "a Parquet data page the parquet crate's record reader asserts on",
        c,
        &runs,
        &["fuzzed.parquet", "not a readable Parquet file"],
    )
}

fn csv_of_200k_rows(dir: &Path) -> Case {
    let mut text = String::from("id,question,answer\n");
    for i in 0..200_000 {
        text.push_str(&format!(
            "q{i},\"Is lesion {i} in the left MCA territory, given the deficit?\",yes\n"
        ));
    }
    let path = file(dir, "rows.csv", text.as_bytes());
    let (c, runs) = validate(dir, "rows", &format!("table:{}", path.display()), &[]);
    Case::answered(
        "a valid CSV of 200,000 rows (9 MB)",
        c,
        &runs,
        &["0 error(s), 0 warning(s)", "200000 tasks"],
    )
}

fn cases_jsonl_nested_arrays(dir: &Path) -> Case {
    let root = dir.join("nested-suite");
    std::fs::create_dir_all(&root).unwrap();
    file(&root, "suite.toml", b"id = \"nested\"\nversion = \"1\"\n");
    let line = format!(
        "{{\"case_id\": \"c1\", \"metadata\": {{\"grade\": {}{}}}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    file(&root, "cases.jsonl", line.as_bytes());
    let (c, runs) = validate(dir, "nested", &format!("native:{}", root.display()), &[]);
    Case::refused(
        "100,000 nested arrays in a line of cases.jsonl",
        c,
        &runs,
        &["cases.jsonl:1", "nested more than 128 levels deep"],
    )
}

fn site_file_of_100_mb(dir: &Path) -> Case {
    let path = dir.join("huge-site.json");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(100 << 20).unwrap();
    let (c, runs) = validate(dir, "huge", &format!("site:{}", path.display()), &[]);
    Case::refused(
        "a 100 MB suite file",
        c,
        &runs,
        &["huge-site.json is larger than 64 MiB", "--max-file-mib"],
    )
}

fn single_line_json_of_30_mb(dir: &Path) -> Case {
    let text = "Left hemiparesis. ".repeat(30 << 20 >> 4);
    let site = json!([{"case_id": "case_1", "text": text, "images": [],
                       "questions": [{"question_number": 1, "question_text": "Diagnosis?"}]}]);
    let path = file(dir, "direct-diagnosis.json", site.to_string().as_bytes());
    let (c, runs) = validate(dir, "line", &format!("site:{}", path.display()), &[]);
    Case::answered(
        "a site file of one 30 MB line",
        c,
        &runs,
        &["0 error(s)", "1 cases with content"],
    )
}

fn answer_key_over_a_lowered_cap(dir: &Path) -> Case {
    let row = json!({"case_id": "nope", "diagnosis": "x".repeat(1000)}).to_string() + "\n";
    let key = file(dir, "big-key.jsonl", row.repeat(2100).as_bytes());
    let runs = dir.join("key-runs");
    let mut c = nmb_command(&runs);
    c.args([
        "--max-file-mib",
        "1",
        "suite",
        "validate",
        "sample",
        "--answers",
    ])
    .arg(&key);
    Case::refused(
        "an answer key of 2 MB with --max-file-mib 1",
        c,
        &runs,
        &["big-key.jsonl is larger than 1 MiB", "--max-file-mib"],
    )
}

/// Refused before the encoder is looked for: the model directory does not exist.
fn bertscore_lines_over_a_lowered_cap(dir: &Path) -> Case {
    let cands = file(dir, "cands.txt", "an answer\n".repeat(210_000).as_bytes());
    let refs = file(dir, "refs.txt", b"a reference\n");
    let runs = dir.join("bertscore-runs");
    let mut c = nmb_command(&runs);
    c.args(["--max-file-mib", "1", "bertscore", "--layer", "6"])
        .arg("--model-dir")
        .arg(dir.join("no-model"))
        .arg("--cands")
        .arg(&cands)
        .arg("--refs")
        .arg(&refs);
    Case::refused(
        "BERTScore candidates of 2 MB with --max-file-mib 1",
        c,
        &runs,
        &["cands.txt is larger than 1 MiB", "--max-file-mib"],
    )
}

fn answer_of_100k_nested_braces(dir: &Path) -> Case {
    let root = dir.join("braces");
    let suite = native_suite(
        &root,
        &[TestTask {
            id: "c0/dx",
            question: "Diagnosis?",
        }],
    );
    let answer = format!("{}{}", "{".repeat(100_000), "}".repeat(100_000));
    let line = json!({"task_id": "c0/dx", "answer": answer}).to_string();
    let answers = file(dir, "braces.jsonl", line.as_bytes());
    let runs = dir.join("braces-runs");
    let mut c = nmb_command(&runs);
    c.arg("import")
        .arg(&answers)
        .args(["--suite", &suite.display().to_string(), "--as", "human:lee"])
        .args(["--no-bertscore", "--quiet"]);
    Case::answered(
        "an imported answer of 100,000 nested braces, scored",
        c,
        &runs,
        &["no diagnosis found"],
    )
}

#[test]
fn every_tables_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
