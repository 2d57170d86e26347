//! Benchmark (not a test): `nmb suite validate` of a question table in CSV with 200,000 rows (about 18 MB).
//!
//! Run in release: `cargo bench -p nmb-suite --bench validate_csv` (rows: `NMB_BENCH_CSV_ROWS`, default
//! 200000). Each row is a multiple-choice question with four option columns, as PMC-VQA's CSV has, and a
//! row's line is found in one pass over the file (a row's line used to be counted from the start for every
//! row). Prints one JSON line: `{bench, rows, file_bytes, validate_ms, tasks, problems}`.

use std::io::Write;
use std::time::Instant;

use serde_json::json;

fn main() {
    let rows: usize = std::env::var("NMB_BENCH_CSV_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().expect("creating a temp dir");
    let path = dir.path().join("questions.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("creating the CSV"));
    writeln!(
        out,
        "id,question,Choice A,Choice B,Choice C,Choice D,answer"
    )
    .unwrap();
    for i in 0..rows {
        writeln!(
            out,
            "q{i},\"Which artery supplies territory {i}, given the deficit?\",MCA,ACA,PCA,Basilar,MCA"
        )
        .unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let file_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let options = nmb_suite::LoadOptions {
        map: vec![(
            "options".into(),
            "Choice A,Choice B,Choice C,Choice D".into(),
        )],
        ..Default::default()
    };
    let start = Instant::now();
    let checked = nmb_suite::describe::validate(&format!("table:{}", path.display()), &options);
    let validate_ms = start.elapsed().as_secs_f64() * 1000.0;
    let line = json!({
        "bench": "validate_csv",
        "rows": rows,
        "file_bytes": file_bytes,
        "validate_ms": (validate_ms * 10.0).round() / 10.0,
        "tasks": checked.tasks,
        "problems": checked.problems.len(),
    });
    println!("{line}");
    assert_eq!(
        checked.tasks,
        rows,
        "every row is a task: {:?}",
        checked.problems.first()
    );
}
