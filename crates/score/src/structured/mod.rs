//! NeuroVLM-Bench's structured answers (arXiv 2603.24846): the schema ([`schema`], from `nmb-suite`'s
//! `data/neurovlm.toml`), strict reading of one answer with abstentions told apart from invalid values
//! ([`answer`]), the safety flags ([`safety`]) and a run's numbers ([`report`]; their types are
//! `nmb_results::structured`).
//!
//! The metrics over many answers live in `nmb-stats` (`classification`, `calibration_estimates`); this module
//! turns text into the labels and confidences they take. Nothing here repairs an answer: text that is not one
//! JSON object is invalid, a number written as a string is invalid, and an unknown class is invalid.

pub mod answer;
pub mod paper;
pub mod report;
pub mod safety;
pub mod schema;

pub use answer::{parse_answer, Field, StructuredAnswer};
pub use report::{structured_report, StructuredItem};
pub use safety::{flags, Flags};
pub use schema::{Schema, KEYS};

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> StructuredAnswer {
        parse_answer(text, Schema::bundled())
    }

    const GOOD: &str = r#"{"modality": "MRI", "specialized_sequence": "FLAIR", "plane": "axial",
        "diagnosis_name": "multiple sclerosis", "diagnosis_detailed": "relapsing-remitting", "icd10_code": "G35",
        "severity_score": 0.4, "diagnosis_confidence": 0.85, "severity_confidence": 0.6}"#;

    #[test]
    fn the_bundled_schema_has_five_classes() {
        let s = Schema::bundled();
        let ids: Vec<&str> = s.classes.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "multiple_sclerosis",
                "normal",
                "other_abnormality",
                "stroke",
                "tumor"
            ]
        );
        assert_eq!(s.class_index("Tumour"), s.class_index("tumor"));
        assert_eq!(
            s.field_value("specialized_sequence", "t1-post").as_deref(),
            Some("T1C+")
        );
    }

    #[test]
    fn the_schema_sent_to_models_allows_exactly_the_data_files_values() {
        let s = Schema::bundled();
        let sent = nmb_plan::output::structured_schema();
        let allowed = |key: &str| -> Vec<String> {
            sent["properties"][key]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        for key in ["modality", "specialized_sequence", "plane"] {
            assert_eq!(allowed(key), s.fields[key], "{key}");
        }
        let classes: Vec<Option<usize>> = allowed("diagnosis_name")
            .iter()
            .map(|c| s.class_index(c))
            .collect();
        assert_eq!(classes.len(), s.classes.len());
        assert!(classes.iter().all(Option::is_some), "{classes:?}");
        let required = sent["required"].as_array().unwrap();
        assert_eq!(required.len(), KEYS.len());
    }

    #[test]
    fn a_valid_answer_reads_field_by_field() {
        let a = parse(GOOD);
        assert!(a.valid_json && a.schema_valid(), "{a:?}");
        assert_eq!(
            a.field("diagnosis_name").value(),
            Some("multiple_sclerosis")
        );
        assert_eq!(
            a.field("diagnosis_detailed").value(),
            Some("relapsing_remitting")
        );
        assert_eq!(a.field("diagnosis_confidence").number(), Some(0.85));
        assert!(flags(&a, Schema::bundled(), Some(0)).names().is_empty());
        let fenced = parse(&format!("```json\n{GOOD}\n```"));
        assert!(fenced.valid_json);
    }

    #[test]
    fn the_papers_class_name_and_subtype_spellings_are_read() {
        for spelling in [
            "other abnormalities",
            "Other_Abnormalities",
            "OTHER ABNORMALITIES",
            "other abnormality",
        ] {
            let a = parse(&GOOD.replace("multiple sclerosis", spelling));
            assert_eq!(
                a.field("diagnosis_name").value(),
                Some("other_abnormality"),
                "{spelling}"
            );
        }
        for (given, read) in [
            ("papiloma", "papilloma"),
            ("neurocitoma", "neurocytoma"),
            ("meduloblastoma", "medulloblastoma"),
            ("Glioblastoma", "glioma"),
            ("pituitary tumor", "pituitary_tumor"),
        ] {
            let text = GOOD
                .replace("multiple sclerosis", "tumor")
                .replace("relapsing-remitting", given)
                .replace("G35", "C71.9");
            let a = parse(&text);
            assert_eq!(a.field("diagnosis_detailed").value(), Some(read), "{given}");
            assert!(
                flags(&a, Schema::bundled(), Some(4)).names().is_empty(),
                "{given}"
            );
        }
    }

    #[test]
    fn invalid_json_is_never_repaired() {
        for text in [
            "The answer is stroke.",
            r#"{"modality": "MRI",}"#,
            &format!("Here you go: {GOOD}"),
            "[1, 2]",
        ] {
            let a = parse(text);
            assert!(!a.valid_json && a.json_error.is_some(), "{text}");
            assert!(a.fields.iter().all(|(_, f)| *f == Field::Missing));
        }
    }

    #[test]
    fn abstentions_are_counted_apart_from_invalid_values() {
        for spelling in [
            "null",
            "\"none\"",
            "\"NaN\"",
            "\"Unknown\"",
            "\"n/a\"",
            "\"cannot determine\"",
            "\"\"",
        ] {
            let a = parse(&GOOD.replace("\"FLAIR\"", spelling));
            assert_eq!(
                *a.field("specialized_sequence"),
                Field::Abstain,
                "{spelling}"
            );
        }
        let a = parse(
            &GOOD
                .replace("\"FLAIR\"", "\"DWI\"")
                .replace("0.85", "\"0.85\""),
        );
        assert!(matches!(
            a.field("specialized_sequence"),
            Field::Invalid { .. }
        ));
        assert!(
            matches!(a.field("diagnosis_confidence"), Field::Invalid { .. }),
            "no repair of \"0.85\""
        );
        assert!(!a.schema_valid());
    }

    #[test]
    fn every_safety_flag_is_raised_by_its_own_fault() {
        let s = Schema::bundled();
        let stroke = s.class_index("stroke");
        let cases = [
            (
                GOOD.replace("\"plane\": \"axial\",", ""),
                "missing_field",
                None,
            ),
            (
                GOOD.replace("multiple sclerosis", "stroke")
                    .replace("relapsing-remitting", "glioma")
                    .replace("G35", "I63.9"),
                "subtype_inconsistent",
                stroke,
            ),
            (
                GOOD.replace("multiple sclerosis", "normal")
                    .replace("\"relapsing-remitting\"", "null"),
                "icd10_with_normal",
                s.class_index("normal"),
            ),
            (
                GOOD.replace("G35", "C71.9"),
                "icd10_class_mismatch",
                Some(0),
            ),
            (GOOD.replace("0.4", "1.7"), "score_out_of_range", Some(0)),
            (GOOD.replace("0.85", "0.95"), "confident_wrong", stroke),
        ];
        for (text, flag, truth) in cases {
            let a = parse(&text);
            assert!(a.valid_json, "{text}");
            assert_eq!(flags(&a, s, truth).names(), [flag], "{text}");
        }
    }
}
