//! Cache keys, canonical JSON, timestamps and run ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The response-cache key for one sample of one rendered prompt.
///
/// `params_json` should hold every decoding setting that can change the answer (temperature, top_p, max tokens,
/// seed, output format). It is canonicalised first (object keys sorted, no whitespace), so two spellings of the
/// same parameters give the same key. A string that is not JSON is hashed as given.
pub fn cache_key(model: &str, params_json: &str, prompt_hash: &str, sample_index: u32) -> String {
    let params = canonical_json_str(params_json);
    hex::encode(cache_key_bytes(model, &params, prompt_hash, sample_index))
}

/// The 32 bytes behind [`cache_key`], for parameters already in canonical form. Stored as a BLOB: half the size
/// of the hex, in the row and in its index.
pub(crate) fn cache_key_bytes(
    model: &str,
    params: &str,
    prompt_hash: &str,
    sample_index: u32,
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nmb-cache-v1\0");
    for part in [model, params, prompt_hash] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.update(sample_index.to_le_bytes());
    h.finalize().into()
}

/// Canonical form of a JSON text; the input unchanged when it is not JSON.
pub fn canonical_json_str(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => canonical_json(&v),
        Err(_) => text.to_string(),
    }
}

/// JSON with object keys sorted, whatever map order serde_json was built with.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(child) = map.get(*k) {
                    write_canonical(child, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T15:30:00.123Z`.
pub fn format_utc_ms(ms: i64) -> String {
    let (date, secs_of_day) = split_day(ms.div_euclid(1000));
    let (y, m, d) = civil_from_days(date);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        ms.rem_euclid(1000)
    )
}

/// A time-sortable run id: `rYYYYMMDD-HHMMSS-xxxx` (UTC, 4 random hex digits).
pub(crate) fn new_run_id(now_ms: i64) -> String {
    let (date, secs_of_day) = split_day(now_ms.div_euclid(1000));
    let (y, m, d) = civil_from_days(date);
    format!(
        "r{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        random_suffix()
    )
}

fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    hex::encode(&h.finalize()[..2])
}

fn split_day(secs: i64) -> (i64, i64) {
    (secs.div_euclid(86_400), secs.rem_euclid(86_400))
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_instants() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T12:34:56.789Z, a leap day.
        assert_eq!(format_utc_ms(951_827_696_789), "2000-02-29T12:34:56.789Z");
        assert_eq!(format_utc_ms(1_795_361_400_000), "2026-11-22T15:30:00.000Z");
    }

    #[test]
    fn run_id_has_the_documented_shape() {
        let id = new_run_id(1_795_361_400_000);
        assert!(id.starts_with("r20261122-153000-"), "{id}");
        assert_eq!(id.len(), "r20261122-153000-ab12".len());
    }

    #[test]
    fn cache_key_ignores_param_spelling_but_not_values() {
        let a = cache_key("openai:gpt", r#"{"temperature":0.7,"top_p":0.95}"#, "p", 0);
        let b = cache_key(
            "openai:gpt",
            r#"{ "top_p": 0.95, "temperature": 0.7 }"#,
            "p",
            0,
        );
        let c = cache_key("openai:gpt", r#"{"temperature":0.8,"top_p":0.95}"#, "p", 0);
        let d = cache_key("openai:gpt", r#"{"temperature":0.7,"top_p":0.95}"#, "p", 1);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert_eq!(a.len(), 64);
    }
}
