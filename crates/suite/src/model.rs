//! The suite model: the one representation of benchmark content that every other crate works on.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use nmb_imaging::ImageSource;
use serde::{Deserialize, Serialize};

/// Free-form metadata (disease group, organ, source, `synthetic`, ...), used later for breakdowns.
pub type Metadata = BTreeMap<String, String>;

/// A loaded benchmark suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Short identifier, e.g. `sample`, `neural-medbench-site`, `vqa-rad`.
    pub id: String,
    pub version: String,
    pub description: String,
    /// The loader that produced it (`native`, `site`, `vqa-rad`, `mcq-jsonl`, `sample`).
    pub format: String,
    /// Defaults declared by the suite (e.g. samples, temperature), as raw key/values.
    pub defaults: BTreeMap<String, serde_json::Value>,
    /// Cases with content. Empty placeholder cases are not here; see `empty_cases`.
    pub cases: Vec<Case>,
    /// Ids of placeholder cases that had no content and were skipped.
    pub empty_cases: Vec<String>,
}

impl Suite {
    pub fn tasks(&self) -> impl Iterator<Item = (&Case, &Task)> {
        self.cases
            .iter()
            .flat_map(|c| c.tasks.iter().map(move |t| (c, t)))
    }

    pub fn task_count(&self) -> usize {
        self.cases.iter().map(|c| c.tasks.len()).sum()
    }

    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }

    /// Whether any task carries a reference answer.
    pub fn has_answers(&self) -> bool {
        self.tasks().any(|(_, t)| t.reference.is_some())
    }
}

/// One clinical case (or, for breadth suites, one image or one question stem).
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    /// BCP-47-ish language tag of the case text, e.g. `en`, `zh`.
    pub language: Option<String>,
    pub images: Vec<Image>,
    /// Structured EHR fields in their original order.
    pub ehr: Vec<(String, String)>,
    /// Free-text clinical notes.
    pub notes: String,
    pub metadata: Metadata,
    pub tasks: Vec<Task>,
}

/// One image of a case, with what is known about how it was acquired.
#[derive(Debug, Clone)]
pub struct Image {
    /// Stable id within the case (file name, or `img1`, ...).
    pub id: String,
    pub source: ImageSource,
    pub modality: Option<Modality>,
    pub sequence: Option<Sequence>,
    pub plane: Option<Plane>,
    pub caption: Option<String>,
    /// SHA-256 of the bytes, filled in when the bytes were read at load time (inline images), else lazily.
    pub sha256: Option<String>,
    /// The file an inline image was read from (a site file's data URL), so problems can name it.
    pub origin: Option<String>,
    /// Set for a volume (a DICOM file or series directory, or a NIfTI file): how it becomes the images a model
    /// sees. `None` for an ordinary image.
    pub render: Option<nmb_imaging::RenderOptions>,
}

impl Image {
    pub fn new(id: impl Into<String>, source: ImageSource) -> Self {
        Image {
            id: id.into(),
            source,
            modality: None,
            sequence: None,
            plane: None,
            caption: None,
            sha256: None,
            origin: None,
            render: None,
        }
    }

    /// A caption for prompts: the explicit caption, else sequence/plane/modality where known.
    pub fn label(&self) -> Option<String> {
        if let Some(c) = &self.caption {
            return Some(c.clone());
        }
        let parts: Vec<String> = [
            self.modality.as_ref().map(|m| m.to_string()),
            self.sequence.as_ref().map(|s| s.to_string()),
            self.plane.as_ref().map(|p| p.to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// A task asked about a case.
#[derive(Debug, Clone)]
pub struct Task {
    /// Unique within the suite, e.g. `case_1/dx`.
    pub id: String,
    pub family: Family,
    pub level: Level,
    pub question: String,
    /// For multiple choice: options as (letter, text) in order.
    pub options: Vec<(String, String)>,
    /// For multi-turn tasks: the turns after the opening question, in order.
    pub turns: Vec<Turn>,
    pub reference: Option<Reference>,
    pub metadata: Metadata,
}

/// One later turn of a multi-turn consult: new evidence, then a question.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub text: String,
    pub images: Vec<Image>,
    pub question: String,
}

/// The reference answer for a task. Every field is optional; scoring says which ones it needed and lacked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synonyms: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differential: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesion_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesion_location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Multiple-choice key, e.g. `C`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    /// Short answer for VQA-style tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// NeuroVLM-Bench (`structured`) fields; the class is `diagnosis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialized_sequence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis_detailed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icd10_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

impl Reference {
    pub fn is_empty(&self) -> bool {
        *self == Reference::default()
    }
}

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $text:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// The accepted spellings, for error messages.
            pub fn expected() -> String {
                [$($text),+].join(", ")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let norm = s.trim().to_ascii_lowercase().replace(['-', ' '], "_");
                $(
                    if norm == $text $(|| norm == $alias)* { return Ok($name::$variant); }
                )+
                Err(format!("unknown {} {:?}; expected one of: {}", stringify!($name).to_lowercase(), s, $name::expected()))
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> { s.serialize_str(self.as_str()) }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

string_enum!(
    /// What a task asks for. The first three are Neural-MedBench's depth families; the rest are breadth kinds.
    Family {
        Differential => "differential" | "differential_diagnosis" | "diagnosis" | "dx",
        Lesion => "lesion" | "lesion_recognition",
        Rationale => "rationale" | "rationale_generation",
        ClosedVqa => "closed_vqa" | "closed",
        OpenVqa => "open_vqa" | "open",
        MultipleChoice => "multiple_choice" | "mcq" | "mc",
        Structured => "structured" | "neurovlm",
    }
);

impl Family {
    /// The breadth datasets' short-answer families (VQA, multiple choice).
    pub fn is_breadth(self) -> bool {
        matches!(
            self,
            Family::ClosedVqa | Family::OpenVqa | Family::MultipleChoice
        )
    }

    pub fn is_depth(self) -> bool {
        matches!(
            self,
            Family::Differential | Family::Lesion | Family::Rationale
        )
    }
}

string_enum!(
    /// Difficulty level (Neural-MedBench's three splits).
    Level {
        Direct => "direct" | "l1" | "direct_diagnosis",
        Complex => "complex" | "l2" | "complex_diseases",
        MultiTurn => "multi_turn" | "l3" | "multiturn" | "multi_round" | "dialogue",
    }
);

string_enum!(
    /// Imaging modality.
    Modality {
        Mri => "MRI" | "mri" | "mr",
        Ct => "CT" | "ct",
        Xray => "X-ray" | "x_ray" | "xray" | "cr" | "dx",
        Ultrasound => "US" | "us" | "ultrasound",
        Pet => "PET" | "pet",
        Other => "other",
    }
);

string_enum!(
    /// MRI sequence or CT kind.
    Sequence {
        T1 => "T1" | "t1" | "t1w",
        T2 => "T2" | "t2" | "t2w",
        Flair => "FLAIR" | "flair" | "t2_flair",
        Dwi => "DWI" | "dwi",
        Adc => "ADC" | "adc",
        Swi => "SWI" | "swi",
        T1c => "T1C+" | "t1c+" | "t1c" | "t1_post" | "t1ce" | "t1+c" | "t1_gd",
        Ct => "CT" | "ct",
        Cta => "CTA" | "cta",
        Other => "other",
    }
);

string_enum!(
    /// Imaging plane.
    Plane {
        Axial => "axial" | "transverse" | "ax",
        Sagittal => "sagittal" | "sag",
        Coronal => "coronal" | "cor",
    }
);
