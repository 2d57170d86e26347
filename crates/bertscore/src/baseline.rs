//! Baseline rescaling files in bert-score's format (`rescale_baseline/LANG/MODEL.tsv`): a `LAYER,P,R,F` header,
//! then one row per layer. Rescaling maps each score `x` to `(x - b) / (1 - b)`.

use std::path::Path;

use crate::BertScoreError;

/// The `[P, R, F]` baselines of `layer` in the baseline text `text` (read from `origin`, named in errors).
pub fn baseline_row(text: &str, origin: &str, layer: usize) -> Result<[f64; 3], BertScoreError> {
    let bad = |msg: String| BertScoreError::Config {
        path: origin.to_string(),
        msg,
    };
    for (i, line) in text.lines().enumerate().skip(1) {
        let Some((first, rest)) = line.split_once(',') else {
            continue;
        };
        if first.trim().parse::<usize>().ok() == Some(layer) {
            return parse_triple(rest)
                .map_err(|e| bad(format!("line {}: layer {layer}: {e}", i + 1)));
        }
    }
    Err(bad(format!(
        "no row for layer {layer}; expected a header `LAYER,P,R,F` and a row `{layer},P,R,F`"
    )))
}

/// [`baseline_row`] of a file.
pub fn baseline_from_file(path: &Path, layer: usize) -> Result<[f64; 3], BertScoreError> {
    let text = std::fs::read_to_string(path).map_err(|source| BertScoreError::Read {
        path: path.display().to_string(),
        source,
    })?;
    baseline_row(&text, &path.display().to_string(), layer)
}

/// Three comma-separated finite numbers `P,R,F`.
pub fn parse_triple(text: &str) -> Result<[f64; 3], String> {
    let values: Vec<&str> = text.split(',').map(str::trim).collect();
    let [p, r, f] = values.as_slice() else {
        return Err(format!(
            "expected three comma-separated numbers P,R,F, got {text:?}"
        ));
    };
    let number = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("expected a number, got {s:?} in {text:?}"))
    };
    Ok([number(p)?, number(r)?, number(f)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triple_parses_and_rejects() {
        assert_eq!(parse_triple("0.1, 0.2,0.3").unwrap(), [0.1, 0.2, 0.3]);
        assert!(parse_triple("0.1,0.2").is_err());
        assert!(parse_triple("0.1,x,0.3").is_err());
        assert!(parse_triple("0.1,NaN,0.3").is_err());
    }

    #[test]
    fn baseline_file_row_by_layer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.tsv");
        std::fs::write(&p, "LAYER,P,R,F\n5,0.1,0.2,0.3\n6,0.4,0.5,0.6\n").unwrap();
        assert_eq!(baseline_from_file(&p, 6).unwrap(), [0.4, 0.5, 0.6]);
        let missing = baseline_from_file(&p, 7).unwrap_err().to_string();
        assert!(
            missing.contains("no row for layer 7") && missing.contains("b.tsv"),
            "{missing}"
        );
        std::fs::write(&p, "LAYER,P,R,F\n7,0.1,oops,0.3\n").unwrap();
        let bad = baseline_from_file(&p, 7).unwrap_err().to_string();
        assert!(bad.contains("line 2") && bad.contains("oops"), "{bad}");
    }
}
