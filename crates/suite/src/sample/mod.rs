//! The bundled `sample` suite: synthetic neurology cases with procedurally generated images and answer keys.

use crate::Suite;

/// Builds the sample suite in memory. Deterministic: the same bytes on every machine.
pub fn build() -> Suite {
    Suite {
        id: "sample".into(),
        version: "0.0.0".into(),
        description: "placeholder".into(),
        format: "sample".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}
