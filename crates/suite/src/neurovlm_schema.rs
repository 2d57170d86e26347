//! NeuroVLM-Bench's label schema, read from `data/neurovlm.toml` ([`crate::NEUROVLM_SCHEMA`]): the five
//! diagnosis classes with their spellings, subtypes and ICD-10 prefixes, the allowed values of the categorical
//! fields, abstention spellings and aliases. The `neurovlm:` loader checks a manifest's labels with it and
//! `nmb-score` reads model answers with it, so both agree on every spelling.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Raw {
    classes: BTreeMap<String, RawClass>,
    fields: BTreeMap<String, Vec<String>>,
    abstentions: Vec<String>,
    aliases: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct RawClass {
    names: Vec<String>,
    subtypes: Vec<String>,
    icd10: Vec<String>,
}

/// One diagnosis class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// Canonical id, e.g. `multiple_sclerosis`.
    pub id: String,
    pub names: Vec<String>,
    pub subtypes: Vec<String>,
    pub icd10: Vec<String>,
}

/// The whole schema.
#[derive(Debug, Clone)]
pub struct Schema {
    pub classes: Vec<Class>,
    /// Allowed values of `modality`, `specialized_sequence` and `plane`.
    pub fields: BTreeMap<String, Vec<String>>,
    abstentions: Vec<String>,
    aliases: BTreeMap<String, String>,
}

impl Schema {
    /// The bundled schema (parsed once).
    pub fn bundled() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            Schema::parse(crate::NEUROVLM_SCHEMA)
                .expect("data/neurovlm.toml is valid (checked by a test)")
        })
    }

    /// Parses a schema file; errors say what is wrong.
    pub fn parse(text: &str) -> Result<Schema, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
        let classes = raw
            .classes
            .into_iter()
            .map(|(id, c)| Class {
                id,
                names: c.names.iter().map(|n| norm(n)).collect(),
                subtypes: c.subtypes.iter().map(|s| norm(s)).collect(),
                icd10: c.icd10,
            })
            .collect();
        Ok(Schema {
            classes,
            fields: raw.fields,
            abstentions: raw.abstentions.iter().map(|a| abstention_form(a)).collect(),
            aliases: raw
                .aliases
                .into_iter()
                .map(|(k, v)| (norm(&k), v))
                .collect(),
        })
    }

    /// Whether a string is one of the abstention spellings.
    pub fn is_abstention(&self, text: &str) -> bool {
        self.abstentions.contains(&abstention_form(text))
    }

    /// The index of the class a diagnosis name means, if any.
    pub fn class_index(&self, text: &str) -> Option<usize> {
        let n = self.canonical(text);
        self.classes
            .iter()
            .position(|c| c.id == n || c.names.contains(&n))
    }

    /// The allowed value of a categorical field that `text` means (aliases and case forgiven).
    pub fn field_value(&self, field: &str, text: &str) -> Option<String> {
        let values = self.fields.get(field)?;
        let n = self.canonical(text);
        values.iter().find(|v| norm(v) == n).cloned()
    }

    /// The class whose subtype `detail` is, if it is a known subtype.
    pub fn subtype_class(&self, detail: &str) -> Option<usize> {
        self.classes
            .iter()
            .position(|c| c.subtypes.contains(&detail.to_string()))
    }

    /// Normalised text with aliases applied: `Pituitary adenoma` → `pituitary_tumor`.
    pub fn canonical(&self, text: &str) -> String {
        let n = norm(text);
        self.aliases.get(&n).map(|v| norm(v)).unwrap_or(n)
    }
}

/// Lower case, trimmed, inner spaces and hyphens as underscores.
pub fn norm(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

fn abstention_form(text: &str) -> String {
    text.trim().trim_end_matches('.').trim().to_lowercase()
}
