//! Criterion rubrics, as the scorer uses them: `nmb rubric lint`'s checks of a rubric's signs and points
//! ([`lint`]) and the judges' question for each answer ([`judge`]). The rubric file and HealthBench's scoring
//! rule are `nmb_results::criteria`.

pub mod judge;
pub mod lint;
