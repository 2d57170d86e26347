//! Context probes: per model and probe, its probed run (`nmb eval --probe`) paired sample by sample with the
//! same evaluation without the probe, among the report's runs. The switch rate is the share of answers right
//! without the probe whose first diagnosis is the suggested wrong one with it; the accuracy change is accuracy
//! with the probe minus without, over the same pairs. Both have case-clustered bootstrap CIs
//! (`nmb_results::probe::effect`). Shown when the report holds a scored probed run.

use nmb_results::probe::{effect, is_unprobed_twin, ProbeEffect, RecordedProbe};
use serde::Serialize;

use super::analysis::Analysis;
use super::TableSection;
use crate::input::RunData;
use crate::table::{number, percent, Cell, Table};

/// One probed run and what its probe did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProbeRow {
    /// The unprobed run's name.
    pub model: String,
    pub run_id: String,
    pub unprobed_run_id: Option<String>,
    pub probe: RecordedProbe,
    /// `None` when the report holds no scored run of the same evaluation without the probe.
    pub effect: Option<ProbeEffect>,
}

pub(crate) fn rows(runs: &[RunData], analysis: &Analysis) -> Vec<ProbeRow> {
    let mut out = Vec::new();
    for r in runs {
        let (Some(probe), Some(scores)) = (RecordedProbe::of(&r.manifest), &r.scores) else {
            continue;
        };
        let twin = runs
            .iter()
            .find(|o| o.scores.is_some() && is_unprobed_twin(&r.manifest, &o.manifest));
        let effect = twin.and_then(|t| {
            let plain = t.scores.as_ref()?;
            effect(&plain.samples, &scores.samples, &analysis.bootstrap)
        });
        out.push(ProbeRow {
            model: twin.map_or_else(|| r.name(), RunData::name),
            run_id: r.info.run_id.clone(),
            unprobed_run_id: twin.map(|t| t.info.run_id.clone()),
            probe,
            effect,
        });
    }
    out
}

/// The section, or `None` when no scored run of the report has a probe.
pub(crate) fn section(runs: &[RunData], analysis: &Analysis) -> Option<TableSection> {
    let rows = rows(runs, analysis);
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(
        "",
        &[
            ("model", false),
            ("probe", false),
            ("seed", true),
            ("tasks probed", true),
            ("no suggestion", true),
            ("right without", true),
            ("switched", true),
            ("switch rate", true),
            ("accuracy without", true),
            ("accuracy with", true),
            ("change", true),
        ],
    );
    table.footnote = "Each probed run is paired, task and sample, with the same evaluation without the probe. \
                      The switch rate is the share of answers right without the probe whose first diagnosis is \
                      the suggested wrong one with it; the change is accuracy with the probe minus without, in \
                      percentage points, over the same pairs. Both CIs resample whole cases. \"No suggestion\": \
                      tasks for which no wrong diagnosis could be chosen (asked without the probe, not counted)."
        .into();
    for r in &rows {
        let e = r.effect.as_ref();
        let plain = |v: Option<String>| v.map_or_else(|| Cell::muted("–"), Cell::new);
        table.push(vec![
            Cell::new(&r.model),
            Cell::new(&r.probe.kind),
            Cell::new(r.probe.seed.to_string()),
            Cell::new(r.probe.probed_tasks.to_string()),
            Cell::new(r.probe.unprobed_tasks.len().to_string()),
            plain(e.map(|e| e.right_without.to_string())),
            plain(e.map(|e| e.switched.to_string())),
            percent(e.and_then(|e| e.switch_rate.as_ref())),
            plain(e.map(|e| format!("{:.1}%", 100.0 * e.accuracy_without))),
            plain(e.map(|e| format!("{:.1}%", 100.0 * e.accuracy_with))),
            number(e.map(|e| &e.accuracy_change), 100.0, 1, " pp"),
        ]);
    }
    Some(TableSection {
        id: "context-probes",
        title: "Context probes",
        table,
        json: serde_json::to_value(&rows).unwrap_or_default(),
    })
}
