//! The body of `nmb bertscore`: read two line files, score them, format the result.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::{BertScoreError, BertScorer, Prf, ScoreOptions};

/// Arguments of `nmb bertscore --model-dir DIR --layer L --cands FILE --refs FILE [--idf]`.
#[derive(Debug, Clone)]
pub struct CliArgs {
    pub model_dir: PathBuf,
    pub layer: usize,
    pub cands: PathBuf,
    pub refs: PathBuf,
    pub idf: bool,
    pub baseline: Option<[f64; 3]>,
    pub batch_size: usize,
    /// The most bytes either line file may hold; a larger file is refused before it is read.
    pub max_file_bytes: u64,
}

/// Reads both files (one text per line), checks they pair up, loads the model and scores.
pub fn run_cli(args: &CliArgs) -> Result<Vec<Prf>, BertScoreError> {
    let cands = read_lines(&args.cands, args.max_file_bytes)?;
    let refs = read_lines(&args.refs, args.max_file_bytes)?;
    if cands.len() != refs.len() {
        return Err(BertScoreError::LineMismatch {
            cands_path: args.cands.display().to_string(),
            cands: cands.len(),
            refs_path: args.refs.display().to_string(),
            refs: refs.len(),
        });
    }
    let scorer = BertScorer::load(&args.model_dir, args.layer)?;
    let opts = ScoreOptions {
        idf: args.idf,
        baseline: args.baseline,
        batch_size: args.batch_size,
        ..ScoreOptions::default()
    };
    scorer.score(&cands, &refs, &opts)
}

/// One text per line; `\r\n` endings are accepted and a final newline does not add an empty
/// text, but empty lines in between are kept as empty texts (they score 0). A file of more than
/// `max_bytes` is refused, having read at most one byte past the cap.
pub fn read_lines(path: &Path, max_bytes: u64) -> Result<Vec<String>, BertScoreError> {
    use std::io::Read as _;
    let read_err = |source| BertScoreError::Read {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    (file.take(max_bytes.saturating_add(1)))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > max_bytes {
        return Err(BertScoreError::TooLarge {
            path: path.display().to_string(),
            cap: match max_bytes % (1 << 20) {
                0 => format!("{} MiB", max_bytes >> 20),
                _ => format!("{max_bytes} bytes"),
            },
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (at byte {})", e.utf8_error().valid_up_to()),
        ))
    })?;
    Ok(text.lines().map(str::to_string).collect())
}

/// `[{"p":..,"r":..,"f":..}, ...]`; NaN is written as `null`.
pub fn format_json(scores: &[Prf]) -> String {
    serde_json::to_string(scores).unwrap_or_else(|_| "[]".to_string())
}

/// A tab-separated table with a header, one row per pair, and a mean row.
pub fn format_table(scores: &[Prf]) -> String {
    let mut out = String::from("pair\tP\tR\tF1\n");
    for (i, s) in scores.iter().enumerate() {
        let _ = writeln!(out, "{}\t{:.6}\t{:.6}\t{:.6}", i + 1, s.p, s.r, s.f);
    }
    if !scores.is_empty() {
        let n = scores.len() as f64;
        let mean = |g: fn(&Prf) -> f64| scores.iter().map(g).sum::<f64>() / n;
        let _ = writeln!(
            out,
            "mean\t{:.6}\t{:.6}\t{:.6}",
            mean(|s| s.p),
            mean(|s| s.r),
            mean(|s| s.f)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_and_nan() {
        let s = [
            Prf {
                p: 0.5,
                r: 0.25,
                f: 1.0 / 3.0,
            },
            Prf {
                p: f64::NAN,
                r: 0.0,
                f: 0.0,
            },
        ];
        let v: serde_json::Value = serde_json::from_str(&format_json(&s)).unwrap();
        assert_eq!(v[0]["p"], 0.5);
        assert_eq!(v[0]["r"], 0.25);
        assert!(v[1]["p"].is_null());
        assert_eq!(v.as_array().map(|a| a.len()), Some(2));
    }

    #[test]
    fn lines_keep_inner_empty_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.txt");
        std::fs::write(&p, "a\r\n\nb\n").unwrap();
        assert_eq!(read_lines(&p, 1 << 20).unwrap(), vec!["a", "", "b"]);
        assert!(matches!(
            read_lines(&p, 3),
            Err(BertScoreError::TooLarge { .. })
        ));
    }

    #[test]
    fn table_has_mean_row() {
        let s = [
            Prf {
                p: 1.0,
                r: 0.0,
                f: 0.0,
            },
            Prf {
                p: 0.0,
                r: 1.0,
                f: 0.0,
            },
        ];
        let t = format_table(&s);
        assert!(t
            .lines()
            .last()
            .unwrap()
            .starts_with("mean\t0.500000\t0.500000"));
    }
}
