//! The stability section in HTML (built in [`crate::sections::stability`]).

use super::escape;
use crate::input::RunData;
use crate::sections::stability::{sentences, table, unstable_table};
use crate::sections::summary::ScoredRun;

/// The section in HTML, empty when no run was scored with repeats.
pub(super) fn html(runs: &[RunData]) -> String {
    let scored = ScoredRun::of(runs);
    let Some(t) = table(&scored) else {
        return String::new();
    };
    let mut h = String::from("<h2 id=\"stability\">Judge stability</h2>");
    for s in sentences(&scored) {
        h.push_str(&format!("<p>{}</p>", escape(&s)));
    }
    h.push_str(&t.html());
    if let Some(u) = unstable_table(&scored) {
        h.push_str(&u.html());
    }
    h
}
