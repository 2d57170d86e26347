//! The Neural-MedBench site's leaderboard shape (`js/data.js`): per split a list of
//! `{ id, name, resolved, pass5, bertscore, date }`, with `verified` = L1 Direct, `lite` = L2 Complex and
//! `multimodal` = L3 Multi-round. `resolved` and `pass5` are percentages with one decimal, from pass@k reading
//! (a) (the unbiased estimator) of the differential-diagnosis family at that level (all depth families of the
//! level when it has no differential tasks); `bertscore` is the level's mean raw BERTScore F1, or null.

use nmb_score::results::{GroupAggregate, ScoreReport};
use nmb_suite::{Family, Level};
use serde::Serialize;

use crate::input::RunData;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderboardEntry {
    pub id: usize,
    pub name: String,
    /// pass@1 in percent, reading (a).
    pub resolved: Option<f64>,
    /// pass@5 in percent, reading (a).
    pub pass5: Option<f64>,
    pub bertscore: Option<f64>,
    /// The run's creation date, `YYYY-MM-DD`.
    pub date: String,
    /// Not in the site's records: where the numbers came from.
    pub run_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Leaderboard {
    pub verified: Vec<LeaderboardEntry>,
    pub lite: Vec<LeaderboardEntry>,
    pub multimodal: Vec<LeaderboardEntry>,
}

pub fn leaderboard(runs: &[RunData]) -> Leaderboard {
    let mut board = Leaderboard::default();
    for r in runs {
        let Some(s) = &r.scores else { continue };
        for (level, list) in [
            (Level::Direct, &mut board.verified),
            (Level::Complex, &mut board.lite),
            (Level::MultiTurn, &mut board.multimodal),
        ] {
            if let Some(entry) = entry(r, s, level, list.len() + 1) {
                list.push(entry);
            }
        }
    }
    for list in [&mut board.verified, &mut board.lite, &mut board.multimodal] {
        list.sort_by(|a, b| {
            b.resolved
                .unwrap_or(-1.0)
                .total_cmp(&a.resolved.unwrap_or(-1.0))
        });
        for (i, e) in list.iter_mut().enumerate() {
            e.id = i + 1;
        }
    }
    board
}

fn entry(r: &RunData, s: &ScoreReport, level: Level, id: usize) -> Option<LeaderboardEntry> {
    let cell = s
        .by_level_family
        .iter()
        .find(|g| g.level == Some(level) && g.family == Some(Family::Differential) && g.n > 0);
    let depth_level = s
        .by_level
        .iter()
        .find(|g| g.level == Some(level) && g.n > 0 && r.has_depth());
    let g: &GroupAggregate = cell.or(depth_level)?;
    let percent = |e: Option<&nmb_stats::Estimate>| e.map(|e| (e.value * 1000.0).round() / 10.0);
    let bert = depth_level
        .and_then(|l| l.bertscore.as_ref())
        .and_then(|b| b.f.as_ref())
        .map(|f| (f.value * 100.0).round() / 100.0);
    Some(LeaderboardEntry {
        id,
        name: r.name(),
        resolved: percent(g.pass_at_1.unbiased_estimator.as_ref()),
        pass5: percent(g.pass_at_5.unbiased_estimator.as_ref()),
        bertscore: bert,
        date: nmb_store::format_utc_ms(r.info.created_ms)
            .chars()
            .take(10)
            .collect(),
        run_id: r.info.run_id.clone(),
    })
}

pub fn to_json(board: &Leaderboard) -> String {
    serde_json::to_string_pretty(board).unwrap_or_default()
}

/// A `js/data.js` in the site's layout: `const modelData = { "nmb": { verified: [...], lite, multimodal } };`.
/// JSON is valid JavaScript, and serde_json escapes `<`-free strings safely for a `.js` file; `</` is escaped
/// anyway in case the file is ever inlined into a page.
pub fn to_data_js(board: &Leaderboard) -> String {
    let body = serde_json::to_string_pretty(board)
        .unwrap_or_default()
        .replace("</", "<\\/");
    format!(
        "// Neural-MedBench leaderboard records exported by nmb {}.\n\
         // resolved = pass@1 %, pass5 = pass@5 % (reading (a): unbiased estimator over n samples per task);\n\
         // verified = L1 Direct Diagnosis, lite = L2 Complex Diseases, multimodal = L3 Multi-round Dialogue.\n\
         const modelData = {{\n  \"nmb\": {body}\n}};\n",
        env!("CARGO_PKG_VERSION")
    )
}
