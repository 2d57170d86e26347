//! The template dialect: minijinja configured as nmb's prompt templates expect (trimmed blocks, strict about
//! misspelt variables, no escaping) with `image(i)` placing an image marker, the markers themselves, and the
//! syntax check a template passes when it is loaded.

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use crate::error::PlanError;

/// Marker delimiters: Unicode private-use characters, removed from all case data (see [`clean`]) so that no
/// text in a case can forge a marker.
pub(crate) const MARK_OPEN: char = '\u{F8F0}';
pub(crate) const MARK_CLOSE: char = '\u{F8F1}';

/// The marker text that `image(i)` returns for the message's image at index `i`.
pub(crate) fn marker(index: usize) -> String {
    format!("{MARK_OPEN}{index}{MARK_CLOSE}")
}

/// Replaces marker delimiters in case data with U+FFFD so data can never place or hide an image.
pub(crate) fn clean(text: &str) -> String {
    if text.contains([MARK_OPEN, MARK_CLOSE]) {
        text.replace([MARK_OPEN, MARK_CLOSE], "\u{FFFD}")
    } else {
        text.to_string()
    }
}

pub(crate) fn new_env() -> Environment<'static> {
    let mut env = Environment::new();
    if let Ok(syntax) = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    // A misspelt variable in a user template should fail loudly, not render as an empty string.
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.add_function("image", |i: usize| marker(i));
    env
}

pub(crate) fn template_error(t: &str, e: &minijinja::Error) -> PlanError {
    PlanError::Template {
        template: t.to_string(),
        message: format!("{e:#}"),
    }
}

/// Compiles a source once to report syntax errors when a template is loaded, not when it is first used.
pub(crate) fn check_syntax(id: &str, source: &str) -> Result<(), PlanError> {
    let mut env = new_env();
    env.add_template_owned(id.to_string(), source.to_string())
        .map_err(|e| template_error(id, &e))
}
