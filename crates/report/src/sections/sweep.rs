//! Prompt sensitivity: the same model on the same suite under several prompt templates (a prompt sweep: `nmb
//! eval --template-variants`, or a run file's `templates`). Per suite and score, each model's score under each
//! template variant, the spread (max − min and SD), and across models whether the ranking holds (rank flips
//! and Kendall's W). Built once as data ([`build`], carried in `report.json`) and rendered as tables
//! ([`tables`]) for HTML and Markdown, and as rows for `sweep.csv` ([`rows`]).
//!
//! A variant is a run's template hash (the manifest's `template_hash`, over every family's template), so two
//! runs are under the same variant exactly when every task was rendered with the same templates. Scores are
//! those of the two-axis view: accuracy over the scored samples of breadth tasks, and per-task pass@1 reading (a)
//! averaged over depth tasks. Intervals resample cases jointly across variants and models (`nmb-stats`,
//! [`nmb_stats::variant_spread`], [`nmb_stats::concordance`]): the same cases are answered under every variant.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{
    bootstrap_mean, concordance, variant_spread, BootstrapConfig, CaseScores, Design, Estimate,
};
use serde::Serialize;

use crate::input::RunData;
use crate::table::{percent, Cell, Table};

/// The template ids of nmb's built-in templates. A run without `--template` records these, one per family; it
/// shows as the variant `default`. (A unit test keeps this list in step with `nmb_plan::builtin_ids`.)
const BUILTIN_IDS: [&str; 5] = [
    "depth-v1",
    "breadth-closed-v1",
    "breadth-open-v1",
    "breadth-mcq-v1",
    "neurovlm-v1",
];

/// Which score a sweep compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepMetric {
    /// Breadth tasks: the share of scored samples answered right.
    Accuracy,
    /// Depth tasks: per-task pass@1 reading (a), the unbiased estimator, averaged over tasks.
    #[serde(rename = "pass_at_1_a")]
    PassAt1,
}

impl SweepMetric {
    pub fn label(self) -> &'static str {
        match self {
            SweepMetric::Accuracy => "accuracy",
            SweepMetric::PassAt1 => "pass@1 (a)",
        }
    }
}

/// One prompt variant of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepVariant {
    /// The name shown: the template id without `variant-` or `file:` (`paraphrase-1`, `my-prompt`), `default`
    /// for nmb's built-in templates, with the hash's first characters added where two variants share a name.
    pub label: String,
    /// The run manifest's `template_hash`.
    pub template_hash: String,
    /// The distinct template ids the runs recorded for their families.
    pub template_ids: Vec<String>,
}

/// One model across the variants of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepModel {
    /// The model spec without base URL.
    pub model: String,
    /// The name shown: the run's name without a trailing ` [variant]`.
    pub name: String,
    /// Per variant, in the group's order: the run behind the score, if the model was run under it.
    pub runs: Vec<Option<String>>,
    /// Per variant: the score with a 95% CI over cases (resampled jointly with the other variants when the
    /// model has several).
    pub scores: Vec<Option<Estimate>>,
    /// max − min of the model's per-variant scores; `None` with fewer than two variants.
    pub range: Option<Estimate>,
    /// Sample standard deviation (n − 1) of the per-variant scores; `None` with fewer than two variants.
    pub sd: Option<Estimate>,
}

/// Two models whose order reverses between variants: `a` is strictly ahead under `a_ahead` and strictly
/// behind under `b_ahead` (variant labels).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SweepFlip {
    pub a: String,
    pub b: String,
    pub a_ahead: Vec<String>,
    pub b_ahead: Vec<String>,
}

/// The prompt sweep of one suite and one score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepGroup {
    pub suite_id: String,
    pub suite_hash: String,
    pub metric: SweepMetric,
    pub variants: Vec<SweepVariant>,
    pub models: Vec<SweepModel>,
    /// Cases behind the scores (the clusters resampled).
    pub cases: usize,
    /// The models that have a score under every variant: the ones ranked for W and the flips.
    pub ranked_models: Vec<String>,
    /// Kendall's W of the variants ranking the ranked models, with a 95% CI over cases; `None` with fewer than
    /// two such models (see `notes`).
    pub kendall_w: Option<Estimate>,
    /// Pairs of ranked models whose order reverses between two variants.
    pub rank_flips: Vec<SweepFlip>,
    pub notes: Vec<String>,
}

/// The name a run shows, without the ` [variant]` a sweep appends.
fn base_name(run: &RunData) -> String {
    let name = run.name();
    match name.rsplit_once(" [") {
        Some((base, tail)) if tail.ends_with(']') && !base.trim().is_empty() => base.to_string(),
        _ => name,
    }
}

fn template_ids(run: &RunData) -> Vec<String> {
    let ids: BTreeSet<&str> = run
        .manifest
        .templates
        .iter()
        .flat_map(|m| m.values().map(|t| t.id.as_str()))
        .collect();
    ids.into_iter().map(str::to_string).collect()
}

fn label_of(ids: &[String], hash: &str) -> String {
    let short = || format!("template {}", &hash[..hash.len().min(8)]);
    match ids {
        [] => short(),
        [one] => one
            .strip_prefix("variant-")
            .or_else(|| one.strip_prefix("file:"))
            .unwrap_or(one)
            .to_string(),
        many if many.iter().all(|id| BUILTIN_IDS.contains(&id.as_str())) => "default".into(),
        many => many.join(" + "),
    }
}

/// Item scores of a run for one metric, each with its case.
fn items(run: &RunData, metric: SweepMetric) -> Vec<(String, f64)> {
    let Some(scores) = &run.scores else {
        return Vec::new();
    };
    match metric {
        SweepMetric::Accuracy => scores
            .samples
            .iter()
            .filter(|s| s.family.is_breadth() && s.status.is_scored())
            .map(|s| {
                (
                    s.case_id.clone(),
                    f64::from(u8::from(s.correct == Some(true))),
                )
            })
            .collect(),
        SweepMetric::PassAt1 => scores
            .tasks
            .iter()
            .filter(|t| t.family.is_depth())
            .filter_map(|t| task_pass(t, 1).map(|p| (t.case_id.clone(), p)))
            .collect(),
    }
}

/// Every prompt sweep among `runs`: a group per suite and score where some model was run under two or more
/// template variants. Empty when there is none.
pub fn build(runs: &[RunData], cfg: &BootstrapConfig, notes: &mut Vec<String>) -> Vec<SweepGroup> {
    let scored: Vec<&RunData> = runs.iter().filter(|r| r.scores.is_some()).collect();
    let mut suites: Vec<&str> = Vec::new();
    let mut templates: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for r in &scored {
        let suite = r.manifest.suite_hash.as_str();
        if !suites.contains(&suite) {
            suites.push(suite);
        }
        templates
            .entry((suite, r.model()))
            .or_default()
            .insert(r.manifest.template_hash.as_str());
    }
    let mut groups = Vec::new();
    for suite in suites {
        let swept = templates
            .iter()
            .any(|((s, _), t)| *s == suite && t.len() >= 2);
        if !swept {
            continue;
        }
        let of_suite: Vec<&RunData> = scored
            .iter()
            .copied()
            .filter(|r| r.manifest.suite_hash == suite)
            .collect();
        for metric in [SweepMetric::Accuracy, SweepMetric::PassAt1] {
            if let Some(g) = group(&of_suite, metric, cfg) {
                groups.push(g);
            }
        }
    }
    for g in &groups {
        notes.extend(g.notes.iter().map(|n| {
            format!(
                "prompt sensitivity, {} ({}): {n}",
                g.suite_id,
                g.metric.label()
            )
        }));
    }
    groups
}

/// A model's first run under a variant, and its item scores with their cases.
struct Found<'a> {
    run: &'a RunData,
    items: Vec<(String, f64)>,
}

/// Per model and variant: the run and its item scores by case index.
type Grid<'a> = Vec<Vec<Option<(&'a RunData, CaseScores)>>>;

/// The sweep of one suite's runs for one metric, or `None` when no run has items for it or no model has two
/// variants with items.
fn group(runs: &[&RunData], metric: SweepMetric, cfg: &BootstrapConfig) -> Option<SweepGroup> {
    let mut notes = Vec::new();
    // (model, variant) -> the first run with items; the variants and models in order of first appearance.
    let mut cells: BTreeMap<(String, String), Found> = BTreeMap::new();
    let mut variant_order: Vec<&RunData> = Vec::new();
    let mut model_order: Vec<(String, String)> = Vec::new();
    for r in runs {
        let found = items(r, metric);
        if found.is_empty() {
            continue;
        }
        let hash = r.manifest.template_hash.clone();
        let key = (r.model().to_string(), hash.clone());
        if let Some(Found { run: first, .. }) = cells.get(&key) {
            notes.push(format!(
                "runs {} and {} are the same model under the same template; {} is used",
                first.info.run_id, r.info.run_id, first.info.run_id
            ));
            continue;
        }
        if !variant_order
            .iter()
            .any(|v| v.manifest.template_hash == hash)
        {
            variant_order.push(*r);
        }
        if !model_order.iter().any(|(m, _)| m == r.model()) {
            model_order.push((r.model().to_string(), base_name(r)));
        }
        cells.insert(
            key,
            Found {
                run: r,
                items: found,
            },
        );
    }
    let per_model = |m: &str| {
        variant_order
            .iter()
            .filter(|v| cells.contains_key(&(m.to_string(), v.manifest.template_hash.clone())))
            .count()
    };
    if !model_order.iter().any(|(m, _)| per_model(m) >= 2) {
        return None;
    }
    let first = variant_order[0];
    let mut variants: Vec<SweepVariant> = variant_order
        .iter()
        .map(|r| {
            let ids = template_ids(r);
            SweepVariant {
                label: label_of(&ids, &r.manifest.template_hash),
                template_hash: r.manifest.template_hash.clone(),
                template_ids: ids,
            }
        })
        .collect();
    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    for v in &mut variants {
        if labels.iter().filter(|l| **l == v.label).count() > 1 {
            v.label = format!(
                "{} #{}",
                v.label,
                &v.template_hash[..v.template_hash.len().min(8)]
            );
        }
    }
    let case_index: BTreeMap<&str, usize> = cells
        .values()
        .flat_map(|f| f.items.iter().map(|(c, _)| c.as_str()))
        .collect::<BTreeSet<&str>>()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c, i))
        .collect();
    let n_cases = case_index.len();
    let case_scores = |items: &[(String, f64)]| {
        let mut s = CaseScores::default();
        for (c, v) in items {
            s.push(case_index[c.as_str()], *v);
        }
        s
    };
    // cell[model][variant]
    let grid: Grid = model_order
        .iter()
        .map(|(m, _)| {
            variants
                .iter()
                .map(|v| {
                    cells
                        .get(&(m.clone(), v.template_hash.clone()))
                        .map(|f| (f.run, case_scores(&f.items)))
                })
                .collect()
        })
        .collect();
    let mut models = Vec::new();
    for ((model, name), row) in model_order.iter().zip(&grid) {
        let present: Vec<&CaseScores> = row.iter().flatten().map(|(_, s)| s).collect();
        let mut scores: Vec<Option<Estimate>> = vec![None; variants.len()];
        let (mut range, mut sd) = (None, None);
        if present.len() >= 2 {
            let owned: Vec<CaseScores> = present.iter().map(|s| (*s).clone()).collect();
            match variant_spread(&owned, n_cases, cfg) {
                Ok(spread) => {
                    let mut it = spread.scores.into_iter();
                    for (slot, cell) in scores.iter_mut().zip(row) {
                        if cell.is_some() {
                            *slot = it.next();
                        }
                    }
                    range = Some(spread.range);
                    sd = Some(spread.sd);
                }
                Err(e) => notes.push(format!("{name}: no spread: {e}")),
            }
        } else {
            for (slot, cell) in scores.iter_mut().zip(row) {
                if let Some((_, s)) = cell {
                    *slot = bootstrap_mean(&s.values, &Design::clusters_by(&s.cases), cfg).ok();
                }
            }
        }
        models.push(SweepModel {
            model: model.clone(),
            name: name.clone(),
            runs: row
                .iter()
                .map(|c| c.as_ref().map(|(r, _)| r.info.run_id.clone()))
                .collect(),
            scores,
            range,
            sd,
        });
    }
    let complete: Vec<usize> = grid
        .iter()
        .enumerate()
        .filter(|(_, row)| row.iter().all(Option::is_some))
        .map(|(i, _)| i)
        .collect();
    for (i, m) in models.iter().enumerate() {
        if !complete.contains(&i) {
            notes.push(format!(
                "{} was not run under every variant; it is left out of the ranking",
                m.name
            ));
        }
    }
    let ranked_models: Vec<String> = complete.iter().map(|&i| models[i].name.clone()).collect();
    let (mut kendall_w, mut rank_flips) = (None, Vec::new());
    if complete.len() >= 2 {
        let cells: Vec<Vec<CaseScores>> = complete
            .iter()
            .map(|&i| grid[i].iter().flatten().map(|(_, s)| s.clone()).collect())
            .collect();
        match concordance(&cells, n_cases, cfg) {
            Ok(c) => {
                kendall_w = Some(c.w);
                let labels = |v: &[usize]| -> Vec<String> {
                    v.iter().map(|&j| variants[j].label.clone()).collect()
                };
                rank_flips = c
                    .flips
                    .iter()
                    .map(|f| SweepFlip {
                        a: ranked_models[f.a].clone(),
                        b: ranked_models[f.b].clone(),
                        a_ahead: labels(&f.a_ahead),
                        b_ahead: labels(&f.b_ahead),
                    })
                    .collect();
            }
            Err(e) => notes.push(format!("no Kendall's W: {e}")),
        }
    } else {
        notes.push(format!(
            "no ranking across variants: it needs two models run under every variant, there are {}",
            complete.len()
        ));
    }
    Some(SweepGroup {
        suite_id: first.manifest.suite_id.clone(),
        suite_hash: first.manifest.suite_hash.clone(),
        metric,
        variants,
        models,
        cases: n_cases,
        ranked_models,
        kendall_w,
        rank_flips,
        notes,
    })
}

/// How to read the per-variant table; the same words in every rendering.
pub const SCORES_CAPTION: &str = "The same model on the same suite under each prompt variant (a variant is one \
set of templates, by hash). Scores: accuracy over scored breadth samples, or per-task pass@1 reading (a) over \
depth tasks, with 95% CIs. max − min and SD (sample standard deviation across the model's variants) are in \
percentage points (pp), with 95% bootstrap CIs that resample cases jointly across variants, since the same cases \
are answered under every variant.";

/// How to read the ranking table.
pub const RANKING_CAPTION: &str = "Whether the models' order survives a change of prompt. Kendall's W: the \
concordance of the variants' rankings of the models (1: every variant orders them alike; 0: no agreement; ties \
corrected), with a 95% CI that resamples cases jointly for every model and variant. Rank flips: pairs of models \
whose order reverses between two variants, with the variants under which each is ahead. Only models run under \
every variant are ranked.";

fn pp(e: Option<&Estimate>) -> Cell {
    match e {
        Some(e) => Cell::with_detail(
            format!("{:.1} pp", e.value * 100.0),
            format!("[{:.1}–{:.1}]", e.ci_low * 100.0, e.ci_high * 100.0),
        ),
        None => Cell::undefined("needs scores under two variants"),
    }
}

/// Per group: a heading (`suite · metric`) and its per-variant table; then one ranking table for every group.
pub fn tables(groups: &[SweepGroup]) -> (Vec<(String, Table)>, Option<Table>) {
    let mut per_group = Vec::new();
    let mut ranking = Table::new(
        RANKING_CAPTION,
        &[
            ("suite", false),
            ("score", false),
            ("models ranked", true),
            ("variants", true),
            ("Kendall's W [95% CI]", true),
            ("rank flips", false),
        ],
    );
    for g in groups {
        let mut columns: Vec<(&str, bool)> = vec![("model", false)];
        columns.extend(g.variants.iter().map(|v| (v.label.as_str(), true)));
        columns.extend([("max − min", true), ("SD", true)]);
        let mut t = Table::new(SCORES_CAPTION, &columns);
        for m in &g.models {
            let mut row = vec![Cell::new(m.name.as_str())];
            row.extend(m.scores.iter().map(|s| percent(s.as_ref())));
            row.push(pp(m.range.as_ref()));
            row.push(pp(m.sd.as_ref()));
            t.push(row);
        }
        per_group.push((format!("{} · {}", g.suite_id, g.metric.label()), t));
        let w = match &g.kendall_w {
            Some(w) => Cell::with_detail(
                format!("{:.3}", w.value),
                format!("[{:.3}–{:.3}]", w.ci_low, w.ci_high),
            ),
            None => Cell::undefined("needs two models run under every variant"),
        };
        let flips = if g.rank_flips.is_empty() {
            if g.kendall_w.is_some() {
                "none".to_string()
            } else {
                "–".to_string()
            }
        } else {
            g.rank_flips
                .iter()
                .map(|f| {
                    format!(
                        "{} vs {}: {} ahead under {}; {} ahead under {}",
                        f.a,
                        f.b,
                        f.a,
                        f.a_ahead.join(", "),
                        f.b,
                        f.b_ahead.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join(" · ")
        };
        ranking.push(vec![
            Cell::new(g.suite_id.as_str()),
            Cell::new(g.metric.label()),
            Cell::new(g.ranked_models.len().to_string()),
            Cell::new(g.variants.len().to_string()),
            w,
            Cell::new(flips),
        ]);
    }
    let ranking = (!ranking.rows.is_empty()).then_some(ranking);
    (per_group, ranking)
}

/// One row of `sweep.csv`.
pub struct SweepRow {
    pub suite_id: String,
    pub suite_hash: String,
    pub metric: &'static str,
    /// `score`, `range`, `sd`, `kendall_w` or `rank_flip`.
    pub statistic: &'static str,
    pub model: String,
    pub model_spec: String,
    pub variant: String,
    pub template_hash: String,
    pub run_id: String,
    pub estimate: Option<Estimate>,
    pub detail: String,
}

/// Every number of every group as rows: per model and variant its score, per model its range and SD, per
/// group its Kendall's W and each rank flip.
pub fn rows(groups: &[SweepGroup]) -> Vec<SweepRow> {
    let mut out = Vec::new();
    for g in groups {
        let row = |statistic: &'static str| SweepRow {
            suite_id: g.suite_id.clone(),
            suite_hash: g.suite_hash.clone(),
            metric: match g.metric {
                SweepMetric::Accuracy => "accuracy",
                SweepMetric::PassAt1 => "pass_at_1_a",
            },
            statistic,
            model: String::new(),
            model_spec: String::new(),
            variant: String::new(),
            template_hash: String::new(),
            run_id: String::new(),
            estimate: None,
            detail: String::new(),
        };
        for m in &g.models {
            for ((v, s), run) in g.variants.iter().zip(&m.scores).zip(&m.runs) {
                if let (Some(s), Some(run)) = (s, run) {
                    out.push(SweepRow {
                        model: m.name.clone(),
                        model_spec: m.model.clone(),
                        variant: v.label.clone(),
                        template_hash: v.template_hash.clone(),
                        run_id: run.clone(),
                        estimate: Some(s.clone()),
                        ..row("score")
                    });
                }
            }
            for (statistic, e) in [("range", &m.range), ("sd", &m.sd)] {
                if let Some(e) = e {
                    out.push(SweepRow {
                        model: m.name.clone(),
                        model_spec: m.model.clone(),
                        estimate: Some(e.clone()),
                        ..row(statistic)
                    });
                }
            }
        }
        if let Some(w) = &g.kendall_w {
            out.push(SweepRow {
                estimate: Some(w.clone()),
                detail: format!(
                    "{} models x {} variants",
                    g.ranked_models.len(),
                    g.variants.len()
                ),
                ..row("kendall_w")
            });
        }
        for f in &g.rank_flips {
            out.push(SweepRow {
                model: format!("{} vs {}", f.a, f.b),
                detail: format!(
                    "{} ahead under {}; {} ahead under {}",
                    f.a,
                    f.a_ahead.join(";"),
                    f.b,
                    f.b_ahead.join(";")
                ),
                ..row("rank_flip")
            });
        }
    }
    out
}

/// Per-task pass@k reading (a) as the score report holds it.
pub(crate) fn task_pass(t: &nmb_results::TaskScore, k: usize) -> Option<f64> {
    let keys = [k.to_string(), format!("pass@{k}"), format!("pass_at_{k}")];
    keys.iter()
        .find_map(|key| t.pass_at_k_unbiased.get(key))
        .copied()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_variants_files_and_the_builtin_set() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(label_of(&ids(&["variant-order"]), "abc"), "order");
        assert_eq!(label_of(&ids(&["file:mine"]), "abc"), "mine");
        assert_eq!(label_of(&ids(&["my-dx"]), "abc"), "my-dx");
        assert_eq!(
            label_of(&ids(&["breadth-mcq-v1", "depth-v1"]), "abc"),
            "default"
        );
        assert_eq!(label_of(&ids(&["a", "b"]), "abc"), "a + b");
        assert_eq!(label_of(&[], "0123456789"), "template 01234567");
    }

    #[test]
    fn the_builtin_ids_are_nmb_plans() {
        let plan: BTreeSet<&str> = nmb_plan::builtin_ids().collect();
        let here: BTreeSet<&str> = BUILTIN_IDS.into_iter().collect();
        assert_eq!(plan, here);
    }
}
