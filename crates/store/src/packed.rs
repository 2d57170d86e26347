//! Large text columns (prompt bodies, raw responses) stored zlib-compressed as BLOBs. A TEXT value is read as
//! it is, so rows written before compression still read back.

use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;

/// The bytes to store for `text`.
pub(crate) fn pack(text: &str) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(Vec::with_capacity(text.len() / 2), Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(text.as_bytes());
    enc.finish().unwrap_or_default()
}

/// The text `pack` stored as `bytes`.
pub(crate) fn inflate(bytes: &[u8]) -> Result<String, String> {
    let mut out = String::new();
    ZlibDecoder::new(bytes)
        .read_to_string(&mut out)
        .map_err(|e| format!("stored compressed text does not inflate: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Value;

    #[test]
    fn round_trip_and_plain_text() {
        let text = r#"{"messages":[{"role":"user","parts":[{"text":"é and the same text again and again"}]}]}"#;
        let packed = pack(text);
        let unpack = |v: Value| v.unpacked();
        assert_eq!(unpack(Value::Blob(packed)).unwrap().as_deref(), Some(text));
        assert_eq!(
            unpack(Value::Text(text.into())).unwrap().as_deref(),
            Some(text)
        );
        assert_eq!(unpack(Value::Null).unwrap(), None);
        assert!(unpack(Value::Blob(b"not zlib".to_vec())).is_err());
    }
}
