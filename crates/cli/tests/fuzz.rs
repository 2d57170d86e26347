//! A seeded mutation fuzzer over every reader of outside data: site JSON, native suites (`suite.toml` and
//! `cases.jsonl`), NeuroVLM manifests, the answer parsers of every family, the NeuroVLM JSON answer reader,
//! NIfTI and DICOM volumes, and question tables (a Parquet file, its footer included, and a CSV file). Each target starts from a valid seed (checked to load, so mutations reach deep
//! code), and each case is one seed mutated a few times from a fixed seed: byte flips, interesting values, token
//! insertions, cut and duplicated ranges, truncation.
//!
//! A case fails on a panic, on taking more than 5 s, or on asking for more than [`BUDGET`] bytes at once (the
//! counting allocator refuses it, which aborts the run; the case printed last is the culprit). `NMB_FUZZ_CASES`
//! sets the cases per target (default 300, what CI runs); `NMB_FUZZ_SEED` another seed, `NMB_FUZZ_TARGET` one target by name. It is its own test binary
//! because it installs its own global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The most one allocation of a case may ask for: far more than any seed and its mutations need (under 1 MB),
/// far less than a header can claim.
const BUDGET: usize = 64 << 20;
/// Past this, an allocation is refused outright (which aborts the run) rather than risk the machine.
const REFUSED: usize = 4 << 30;
const CASE_LIMIT: Duration = Duration::from_secs(5);

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only refuses (null) requests over the budget, which callers handle
// as allocation failure.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > REFUSED {
            return std::ptr::null_mut();
        }
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > REFUSED {
            return std::ptr::null_mut();
        }
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` came from this allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"-1",
    b"1e308",
    b"NaN",
    b"\0",
    b"\n",
    b"\r\n",
    b"\xff\xfe",
    b"99999999999999999999",
    b"..",
    b"/",
    b"\\u0000",
    b"=",
    b"'''",
    b"[[",
    b"\xe4\xb8\xad",
];
const INTERESTING: &[u32] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
];

/// One seed mutated 1 to 4 times.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let v = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                let width = [1, 2, 4][rng.below(3)];
                for (i, byte) in v.iter().take(width).enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                b.splice(at..at, token.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at.min(end)..end);
            }
            4 => {
                let end = (at + 1 + rng.below(256)).min(b.len());
                let copy = b[at.min(end)..end].to_vec();
                b.splice(at..at, copy);
            }
            5 => b.truncate(at),
            _ => {
                let n = 1 + rng.below(8);
                let fill: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, fill);
            }
        }
    }
    b
}

/// Runs `case` on a thread of its own: `Err` on a panic or when it takes longer than [`CASE_LIMIT`].
fn run_case(case: impl FnOnce() -> bool + Send + 'static) -> Result<bool, String> {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(case));
        let _ = done.send(outcome.ok());
    });
    match finished.recv_timeout(CASE_LIMIT) {
        Ok(Some(read)) => Ok(read),
        Ok(None) => Err("panicked".into()),
        Err(_) => Err(format!("took longer than {CASE_LIMIT:?}")),
    }
}

/// Reads one case; true when it was read without an error (what a valid seed must give).
type Reader = fn(&Path, &[u8]) -> bool;

/// A target: its name, its valid seed, and how a case is read (the bytes, written to a file in the directory).
struct Target {
    name: &'static str,
    seed: Vec<u8>,
    read: Reader,
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load(spec: String) -> bool {
    nmb_suite::Source::new(&spec).load(false).is_ok()
}

fn read_site(dir: &Path, bytes: &[u8]) -> bool {
    let path = write(dir, "direct-diagnosis.json", bytes);
    load(format!("site:{}", path.display()))
}

fn read_native_cases(dir: &Path, bytes: &[u8]) -> bool {
    write(dir, "suite.toml", NATIVE_TOML.as_bytes());
    write(dir, "cases.jsonl", bytes);
    load(format!("native:{}", dir.display()))
}

fn read_native_toml(dir: &Path, bytes: &[u8]) -> bool {
    write(dir, "suite.toml", bytes);
    write(dir, "cases.jsonl", NATIVE_CASES.as_bytes());
    load(format!("native:{}", dir.display()))
}

fn read_neurovlm(dir: &Path, bytes: &[u8]) -> bool {
    let path = write(dir, "manifest.csv", bytes);
    load(format!("neurovlm:{}", path.display()))
}

fn read_answers(_: &Path, bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    for family in nmb_suite::Family::ALL {
        let _ = nmb_score::parse::parse_answer(*family, &text);
    }
    let schema = nmb_suite::neurovlm_schema::Schema::bundled();
    let _ = nmb_score::structured::parse_answer(&text, schema);
    true
}

fn read_volume(dir: &Path, bytes: &[u8], name: &str) -> bool {
    let path = write(dir, name, bytes);
    let opts = nmb_imaging::RenderOptions::default();
    let described = nmb_imaging::describe_volume(&path, &opts).is_ok();
    described && nmb_imaging::render_path(&path, &opts).is_ok()
}

fn read_nifti(dir: &Path, bytes: &[u8]) -> bool {
    read_volume(dir, bytes, "volume.nii")
}

fn read_dicom(dir: &Path, bytes: &[u8]) -> bool {
    read_volume(dir, bytes, "slice.dcm")
}

fn read_parquet(dir: &Path, bytes: &[u8]) -> bool {
    let path = write(dir, "questions.parquet", bytes);
    load(format!("table:{}", path.display()))
}

fn read_csv_table(dir: &Path, bytes: &[u8]) -> bool {
    let path = write(dir, "questions.csv", bytes);
    load(format!("table:{}", path.display()))
}

const CSV_TABLE: &str = "id,question,options,choice,answer,image\r\nq1,\"Which artery, given the deficit?\",\"[\"\"MCA\"\", \"\"ACA\"\"]\",A,,img.png\r\nq2,Is it normal?,,,yes,\nq3,What is seen?,,,\"a ring-enhancing \"\"lesion\"\"\",img.png\n";

/// A Parquet file as the parquet crate writes it (snappy, dictionary pages, statistics, a page index): two
/// string columns and an optional group, as a Hugging Face export has them, three rows.
fn parquet_seed() -> Vec<u8> {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;
    let schema =
        "message hf { REQUIRED BYTE_ARRAY question (UTF8); REQUIRED BYTE_ARRAY answer (UTF8); \
                  OPTIONAL group image { OPTIONAL BYTE_ARRAY path (UTF8); } }";
    let schema = Arc::new(parse_message_type(schema).expect("the seed's schema"));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut writer =
        SerializedFileWriter::new(&mut out, schema, Arc::new(props)).expect("a writer");
    let mut group = writer.next_row_group().expect("a row group");
    let text = |v: &[&str]| -> Vec<ByteArray> { v.iter().map(|s| ByteArray::from(*s)).collect() };
    let columns: [(Vec<ByteArray>, Option<Vec<i16>>); 3] = [
        (
            text(&["Is it normal?", "Which lobe?", "Is it normal?"]),
            None,
        ),
        (text(&["yes", "frontal", "no"]), None),
        (text(&["img.png"]), Some(vec![2, 1, 0])),
    ];
    for (values, def) in columns {
        let mut col = group.next_column().expect("a column").expect("a column");
        col.typed::<ByteArrayType>()
            .write_batch(&values, def.as_deref(), None)
            .expect("the seed's values");
        col.close().expect("the column is closed");
    }
    group.close().expect("the row group is closed");
    writer.close().expect("the seed is written");
    out
}

const NATIVE_TOML: &str =
    "id = \"fuzz\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\nsamples = 2\n";
const NATIVE_CASES: &str = r#"{"case_id": "c1", "ehr": {"Age": 68, "Sex": "male"}, "notes": "Left weakness.", "metadata": {"disease_group": "vascular"}, "tasks": [{"id": "c1/dx", "family": "differential", "question": "Diagnosis?", "reference": {"diagnosis": "Stroke", "synonyms": ["infarct"], "differential": ["Stroke", "Bleed"]}}, {"family": "multiple_choice", "question": "Which?", "options": {"A": "FLAIR", "B": "DWI"}, "reference": {"choice": "B"}}, {"family": "lesion", "question": "Lesion?", "turns": [{"text": "ADC now.", "question": "Change?"}], "reference": {"lesion_type": "infarct", "lesion_location": "MCA"}}]}
{"case_id": "c2", "tasks": [{"family": "closed_vqa", "question": "Normal?", "reference": {"answer": "yes"}}]}
"#;
const SITE: &str = r#"[{"case_id": "case_1", "text": "A 77-year-old female with aphasia.", "images": [], "questions": [{"question_number": 1, "question_text": "Diagnosis?"}]}, {"case_id": "case_16", "text": "", "images": [], "questions": [{"question_number": 16, "question_text": "..."}]}]"#;
const ANSWERS: &str = "```json\n{\"differential\": [{\"rank\": 1, \"diagnosis\": \"Stroke\", \"evidence\": \"DWI\"}], \"diagnosis_name\": \"stroke\", \"modality\": \"MRI\", \"confidence\": 0.8}\n```\nLesion type: infarct\nLocation: left MCA\nFinal diagnosis: stroke\nAnswer: B";

/// A 4×4×2 16-bit NIfTI-1 volume with an identity qform.
fn nifti_seed() -> Vec<u8> {
    let mut h = vec![0u8; 352];
    h[0..4].copy_from_slice(&348i32.to_le_bytes());
    for (i, d) in [3i16, 4, 4, 2, 1, 1, 1, 1].iter().enumerate() {
        h[40 + 2 * i..42 + 2 * i].copy_from_slice(&d.to_le_bytes());
    }
    h[70..72].copy_from_slice(&4i16.to_le_bytes()); // int16
    h[72..74].copy_from_slice(&16i16.to_le_bytes());
    for (i, p) in [1f32, 1.0, 1.0, 2.0].iter().enumerate() {
        h[76 + 4 * i..80 + 4 * i].copy_from_slice(&p.to_le_bytes());
    }
    h[108..112].copy_from_slice(&352f32.to_le_bytes());
    h[112..116].copy_from_slice(&1f32.to_le_bytes());
    h[252..254].copy_from_slice(&1i16.to_le_bytes());
    h[344..348].copy_from_slice(b"n+1\0");
    h.extend((0..32i16).flat_map(|v| (v * 100).to_le_bytes()));
    h
}

/// An 8×8 16-bit MR slice, explicit VR little endian.
fn dicom_seed() -> Vec<u8> {
    use dicom_core::{DataElement, PrimitiveValue as P, VR};
    use dicom_dictionary_std::tags;
    use dicom_object::{FileMetaTableBuilder, InMemDicomObject};
    let mut obj = InMemDicomObject::new_empty();
    let mut put = |tag, vr, value: P| {
        obj.put(DataElement::new(tag, vr, value));
    };
    put(
        tags::SOP_CLASS_UID,
        VR::UI,
        P::from("1.2.840.10008.5.1.4.1.1.4"),
    );
    put(tags::SOP_INSTANCE_UID, VR::UI, P::from("1.2.3.4.5"));
    put(tags::MODALITY, VR::CS, P::from("MR"));
    put(tags::SERIES_INSTANCE_UID, VR::UI, P::from("1.2.3.4"));
    put(tags::IMAGE_POSITION_PATIENT, VR::DS, P::from("0\\0\\0"));
    put(
        tags::IMAGE_ORIENTATION_PATIENT,
        VR::DS,
        P::from("1\\0\\0\\0\\1\\0"),
    );
    put(tags::PIXEL_SPACING, VR::DS, P::from("1\\1"));
    put(tags::SAMPLES_PER_PIXEL, VR::US, P::from(1u16));
    put(
        tags::PHOTOMETRIC_INTERPRETATION,
        VR::CS,
        P::from("MONOCHROME2"),
    );
    put(tags::ROWS, VR::US, P::from(8u16));
    put(tags::COLUMNS, VR::US, P::from(8u16));
    put(tags::BITS_ALLOCATED, VR::US, P::from(16u16));
    put(tags::BITS_STORED, VR::US, P::from(16u16));
    put(tags::HIGH_BIT, VR::US, P::from(15u16));
    put(tags::PIXEL_REPRESENTATION, VR::US, P::from(0u16));
    let pixels: Vec<u16> = (0..64u16).map(|v| v * 50).collect();
    put(tags::PIXEL_DATA, VR::OW, P::U16(pixels.into()));
    let meta = FileMetaTableBuilder::new()
        .transfer_syntax("1.2.840.10008.1.2.1")
        .media_storage_sop_class_uid("1.2.840.10008.5.1.4.1.1.4")
        .media_storage_sop_instance_uid("1.2.3.4.5");
    let file = obj.with_meta(meta).expect("a DICOM seed");
    let mut out = Vec::new();
    file.write_all(&mut out).expect("the DICOM seed is written");
    out
}

fn targets() -> Vec<Target> {
    let t = |name, seed: &str, read| Target {
        name,
        seed: seed.as_bytes().to_vec(),
        read,
    };
    let manifest = "image,diagnosis_name,modality,plane,severity\nimg.png,stroke,MRI,axial,0.7\nimg.png,normal,CT,,0\n";
    vec![
        t("site JSON", SITE, read_site as Reader),
        t("native cases.jsonl", NATIVE_CASES, read_native_cases),
        t("native suite.toml", NATIVE_TOML, read_native_toml),
        t("NeuroVLM manifest", manifest, read_neurovlm),
        t("answers", ANSWERS, read_answers),
        Target {
            name: "NIfTI",
            seed: nifti_seed(),
            read: read_nifti,
        },
        Target {
            name: "DICOM",
            seed: dicom_seed(),
            read: read_dicom,
        },
        Target {
            name: "Parquet table",
            seed: parquet_seed(),
            read: read_parquet,
        },
        t("CSV table", CSV_TABLE, read_csv_table),
    ]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn no_input_panics_hangs_or_allocates_past_its_budget() {
    let cases = env_u64("NMB_FUZZ_CASES", 300);
    let seed = env_u64("NMB_FUZZ_SEED", 0x6e6d_6266_757a_7a31);
    // The PNG the NeuroVLM manifest names, so that its rows reach the label checks.
    let mut failures = Vec::new();
    let mut largest_per_target = Vec::new();
    let started = Instant::now();
    let kept = nmb_test_support::assets::repo_root().join("target/fuzz-failures");
    let only = std::env::var("NMB_FUZZ_TARGET").ok();
    for target in targets() {
        if only.as_deref().is_some_and(|o| o != target.name) {
            continue;
        }
        let mut largest = 0;
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "img.png", &nmb_test_support::images::png(8, 1));
        let mut rng = Rng(seed ^ target.name.len() as u64);
        for case in 0..cases {
            let bytes = if case == 0 {
                target.seed.clone()
            } else {
                mutate(&target.seed, &mut rng)
            };
            eprintln!("fuzz: {} case {case} ({} bytes)", target.name, bytes.len());
            let (read, path, input) = (target.read, dir.path().to_path_buf(), bytes.clone());
            LARGEST.store(0, Ordering::Relaxed);
            let outcome = run_case(move || read(&path, &input)).and_then(|read| {
                let asked = LARGEST.load(Ordering::Relaxed);
                largest = largest.max(asked);
                match asked > BUDGET {
                    true => Err(format!(
                        "asked for {asked} bytes at once, over the {BUDGET}-byte budget"
                    )),
                    false => Ok(read),
                }
            });
            match outcome {
                Ok(read) => assert!(
                    read || case > 0,
                    "the {} seed itself does not read",
                    target.name
                ),
                Err(why) => {
                    // Kept for replaying: the input itself.
                    std::fs::create_dir_all(&kept).unwrap();
                    let file = kept.join(format!("{}-{case}.bin", target.name.replace(' ', "_")));
                    std::fs::write(&file, &bytes).unwrap();
                    let name = target.name;
                    failures.push(format!("{name} case {case} ({}): {why}", file.display()));
                    if why.starts_with("took") {
                        break; // the stuck thread keeps the directory busy
                    }
                }
            }
        }
        largest_per_target.push(format!("{} {largest}", target.name));
    }
    println!(
        "fuzz: {cases} cases per target, {} targets, {:.1} s, {} failure(s); largest allocation (bytes): {}",
        largest_per_target.len(),
        started.elapsed().as_secs_f64(),
        failures.len(),
        largest_per_target.join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
