//! The renderers: each turns the sections' data (`crate::sections`) into one format, HTML ([`html`], with its
//! charts from `svg`), Markdown, CSV and JSON. They compute no statistic; what they show is built once in the
//! sections. Escaping lives in one place, [`escape`], which every renderer of HTML and SVG uses.

pub(crate) mod csv;
pub mod html;
pub(crate) mod json;
pub(crate) mod markdown;
pub(crate) mod svg;

/// Escapes text for HTML element content and quoted attribute values (and SVG/XML); see [`nmb_table::escape`].
pub use nmb_table::escape;
