//! A review set's progress per reviewer, as `nmb review status` prints it.

use nmb_store::{ReviewSet, ReviewerStatus};

/// Whether a set's reviewers see the models' thinking, as `nmb review create` and `status` say it.
pub fn thinking_line(shown: bool) -> &'static str {
    if shown {
        "reviewers see each answer's thinking, collapsed above it (--show-thinking)"
    } else {
        "the models' thinking is hidden from reviewers: they grade the answer alone"
    }
}

/// The set's progress as one JSON object {set_id, runs, show_thinking, reviewers: [...]}.
pub fn status_json(set: &ReviewSet, rows: &[ReviewerStatus]) -> serde_json::Value {
    let people: Vec<_> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "reviewer": r.reviewer, "assigned": r.assigned, "graded": r.graded,
                "skipped": r.skipped, "grade_rows": r.grade_rows, "revoked": r.revoked_ms.is_some(),
            })
        })
        .collect();
    serde_json::json!({
        "set_id": set.set_id, "runs": set.runs, "show_thinking": set.show_thinking, "reviewers": people
    })
}

/// The set's progress as text lines, each ending in a newline: the set and its runs, whether reviewers see the
/// thinking, then one row per reviewer (graded / assigned, skipped, grade rows written, active or revoked).
pub fn status_text(set: &ReviewSet, rows: &[ReviewerStatus]) -> String {
    let mut out = format!(
        "review set {} over run(s) {}\n",
        set.set_id,
        set.runs.join(", ")
    );
    out.push_str(&format!("  {}\n", thinking_line(set.show_thinking)));
    out.push_str(&format!(
        "  {:<16} {:>9} {:>8} {:>11}  state\n",
        "reviewer", "graded", "skipped", "grade rows"
    ));
    for r in rows {
        let state = if r.revoked_ms.is_some() {
            "revoked"
        } else {
            "active"
        };
        out.push_str(&format!(
            "  {:<16} {:>4} / {:<3} {:>8} {:>11}  {state}\n",
            r.reviewer, r.graded, r.assigned, r.skipped, r.grade_rows
        ));
    }
    out
}
