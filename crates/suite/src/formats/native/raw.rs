//! The serde shape of one `cases.jsonl` line. Values that need checking (family, level, sequence, ...) stay
//! strings here and are parsed afterwards, so one bad value gives one problem instead of losing the whole line.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCase {
    pub case_id: String,
    pub language: Option<String>,
    #[serde(default)]
    pub images: Vec<RawImage>,
    #[serde(default)]
    pub ehr: Ehr,
    #[serde(default)]
    pub notes: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, Scalar>,
    #[serde(default)]
    pub tasks: Vec<RawTask>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawImage {
    pub path: String,
    pub id: Option<String>,
    pub modality: Option<String>,
    pub sequence: Option<String>,
    pub plane: Option<String>,
    pub caption: Option<String>,
    /// Render options for a volume (DICOM file or series directory, NIfTI file).
    pub render: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub id: Option<String>,
    pub family: String,
    pub level: Option<String>,
    pub question: String,
    #[serde(default)]
    pub options: Options,
    #[serde(default)]
    pub turns: Vec<RawTurn>,
    pub reference: Option<Map<String, Value>>,
    #[serde(default)]
    pub metadata: BTreeMap<String, Scalar>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTurn {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub images: Vec<RawImage>,
    pub question: String,
}

/// A string, number or boolean, kept as text (`"age": 77` is as good as `"age": "77"`).
#[derive(Debug)]
pub(super) struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        match value {
            Value::Null => Ok(Scalar(String::new())),
            Value::String(s) => Ok(Scalar(s)),
            Value::Number(n) => Ok(Scalar(n.to_string())),
            Value::Bool(b) => Ok(Scalar(b.to_string())),
            _ => Err(de::Error::custom("expected a string, number or boolean")),
        }
    }
}

/// EHR fields in document order. serde_json's own map sorts keys, so this visits the JSON object directly.
#[derive(Debug, Default)]
pub(super) struct Ehr(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for Ehr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EhrVisitor)
    }
}

struct EhrVisitor;

impl<'de> Visitor<'de> for EhrVisitor {
    type Value = Ehr;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of EHR fields {\"name\": value, ...} in display order")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ehr, A::Error> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        while let Some((key, Scalar(value))) = map.next_entry::<String, Scalar>()? {
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!("duplicate EHR field {key:?}")));
            }
            pairs.push((key, value));
        }
        Ok(Ehr(pairs))
    }
}

/// Multiple-choice options: `{"A": "...", "B": "..."}` in document order, or `["...", "..."]` lettered A, B, ...
#[derive(Debug, Default)]
pub(super) struct Options(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for Options {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OptionsVisitor)
    }
}

struct OptionsVisitor;

impl<'de> Visitor<'de> for OptionsVisitor {
    type Value = Options;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("options as {\"A\": text, ...} or [text, ...]")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Options, A::Error> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        while let Some((letter, Scalar(text))) = map.next_entry::<String, Scalar>()? {
            if pairs.iter().any(|(l, _)| *l == letter) {
                return Err(de::Error::custom(format!("duplicate option {letter:?}")));
            }
            pairs.push((letter, text));
        }
        Ok(Options(pairs))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Options, A::Error> {
        let mut pairs = Vec::new();
        while let Some(Scalar(text)) = seq.next_element::<Scalar>()? {
            if pairs.len() >= 26 {
                return Err(de::Error::custom(
                    "more than 26 options; expected at most A to Z",
                ));
            }
            let letter = (b'A' + pairs.len() as u8) as char;
            pairs.push((letter.to_string(), text));
        }
        Ok(Options(pairs))
    }
}
