//! Revision in multi-turn consults (the table of [`crate::sections::revision::table`]).

pub(super) fn revision(h: &mut String, runs: &[crate::input::RunData]) {
    let Some(t) = crate::sections::revision::table(runs) else {
        return;
    };
    h.push_str("<h2 id=\"revision\">Revision in consults</h2>");
    h.push_str(&t.html());
}
