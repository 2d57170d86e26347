//! Criterion rubrics, as the scorer checks them: `nmb rubric lint`'s checks of a rubric's signs and points
//! ([`lint`]). The rubric file and HealthBench's scoring rule are `nmb_results::criteria`; the judges' question
//! for each answer is `nmb_judges::criteria`.

pub mod lint;
