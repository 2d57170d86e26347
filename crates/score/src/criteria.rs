//! Criterion rubrics, as the scorer checks them: `nmb rubric lint`'s checks of a rubric's signs and points
//! ([`lint`]), and the judges' reading of which way each criterion points ([`direction`], `--judge`). The rubric file and HealthBench's scoring rule are `nmb_results::criteria`; the judges' question
//! for each answer is `nmb_judges::criteria`.

pub mod direction;
pub mod lint;
