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

use std::path::Path;

use nmb_test_support::fuzz::{mutate, Campaign, Counting, Outcome, XorShift};

/// The most one allocation of a case may ask for: far more than any seed and its mutations need (under 1 MB),
/// far less than a header can claim.
const BUDGET: usize = 64 << 20;
/// Past this, an allocation is refused outright (which aborts the run) rather than risk the machine.
const REFUSED: usize = 4 << 30;

#[global_allocator]
static ALLOCATOR: Counting = Counting::new(REFUSED);

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

#[test]
fn no_input_panics_hangs_or_allocates_past_its_budget() {
    let mut fuzz = Campaign::from_env(0x6e6d_6266_757a_7a31, BUDGET).keeping_failures("bin");
    let mut ran = 0;
    for target in targets() {
        if !fuzz.runs(target.name) {
            continue;
        }
        ran += 1;
        let dir = tempfile::tempdir().unwrap();
        // The PNG the NeuroVLM manifest names, so that its rows reach the label checks.
        write(dir.path(), "img.png", &nmb_test_support::images::png(8, 1));
        let mut rng = XorShift(fuzz.seed_of(target.name));
        for case in 0..fuzz.cases {
            let bytes = if case == 0 {
                target.seed.clone()
            } else {
                mutate(&mut rng, &target.seed, TOKENS, None)
            };
            let (read, path, input) = (target.read, dir.path().to_path_buf(), bytes.clone());
            match fuzz.case(&ALLOCATOR, target.name, case, &bytes, move || {
                read(&path, &input)
            }) {
                Outcome::Read(read) => assert!(
                    read || case > 0,
                    "the {} seed itself does not read",
                    target.name
                ),
                Outcome::Failed => {}
                Outcome::Stuck => break, // the stuck thread keeps the directory busy
            }
        }
    }
    let largest = fuzz.largest_per_target();
    fuzz.finish(&format!(
        "{ran} targets; largest allocation (bytes): {largest}"
    ));
}
