//! `nmb compare RUN_A RUN_B`: paired bootstrap and McNemar's test between two scored runs.

use crate::store_at::StoreAt;

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use nmb_results::multiplicity::{adjust, Multiplicity};
use nmb_results::probe::{effect, is_unprobed_twin, ProbeEffect, RecordedProbe};
use nmb_results::{Comparison, ScoreReport};

use super::score::{open_store, BootstrapArgs};

pub const EXAMPLES: &str = "\
Examples:
  nmb compare r20260101-120000-ab12 r20260102-090000-cd34
  nmb compare RUN_A RUN_B --json

Both runs must have been scored (`nmb score`); the newest stored report of each is used. Items are the
(task, sample) pairs both runs answered and scored; errored samples are left out on either side. The
difference is accuracy(A) - accuracy(B) with a paired bootstrap 95% CI that resamples whole cases, and
McNemar's test on the discordant items: exact where every task has one paired answer, else cluster-adjusted
(Durkalski 2003) with cases as clusters, so the n samples of a task are not counted as independent pairs;
overall and per level and family. Each p-value names its test. Runs with structured (NeuroVLM-Bench)
answers are also compared field by field (modality, sequence, plane, class, subtype): correct on that field
or not, over the answers whose reference has it. When one run is the other with a context probe (`nmb eval
--probe`), the probe's switch rate and change in accuracy follow, with CIs that resample whole cases.

Every p-value of the table gets its Holm and Benjamini-Hochberg (BH) adjusted values beside it: the bootstrap
p-values of all rows are one family, the McNemar p-values another; the family is stated under the table, and
`*` marks an adjusted p-value at or below --alpha.

Where one run was asked with few-shot examples (--few-shot) and the other without, of the same model on the
same suite, the overall difference is also given as the few-shot gain: few-shot minus zero-shot, with its
paired bootstrap CI and p-value (`few_shot_gain` in --json).

Exit status: 0 when compared, 1 when a run is unknown or not scored, 2 on bad usage.";

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// First run (A)
    #[arg(value_name = "RUN_A")]
    pub run_a: String,
    /// Second run (B)
    #[arg(value_name = "RUN_B")]
    pub run_b: String,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    /// Level at which adjusted p-values are marked significant (two-sided)
    #[arg(long, value_name = "ALPHA", default_value_t = nmb_results::multiplicity::DEFAULT_ALPHA, value_parser = super::power::level)]
    pub alpha: f64,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CompareArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = open_store(at)?;
    let load = |run: &str| super::power::latest_scores(&store, run, "cannot compare");
    let (a, b) = (load(&args.run_a)?, load(&args.run_b)?);
    let cmp = nmb_results::compare::compare(&a, &b, &args.bootstrap.config())?;
    let multiplicity = adjust(std::slice::from_ref(&cmp), args.alpha)?;
    let probe = probe_effect(&store, &cmp, (&a, &b), &args.bootstrap.config())?;
    let gain = few_shot_gain(&store, &cmp);
    if args.json {
        let mut doc = serde_json::to_value(&cmp)?;
        doc["multiplicity"] = serde_json::to_value(&multiplicity)?;
        if let Some(probe) = &probe {
            doc["probe"] = serde_json::to_value(probe)?;
        }
        if let Some(g) = &gain {
            doc["few_shot_gain"] = serde_json::to_value(g)?;
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_table(&cmp, &multiplicity);
        if let Some(probe) = &probe {
            print_probe(probe);
        }
        if let Some(g) = &gain {
            print_few_shot_gain(g);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The overall difference read as few-shot minus zero-shot, where exactly one run had examples.
#[derive(Debug, serde::Serialize)]
struct FewShotGain {
    few_shot_run: String,
    zero_shot_run: String,
    /// Few-shot minus zero-shot accuracy, with the paired bootstrap CI of the comparison.
    gain: nmb_stats::Estimate,
    p_value: f64,
}

/// Whether the two runs are the same model on the same suite, one with few-shot examples and one without; then
/// the comparison's overall difference, oriented few-shot minus zero-shot.
fn few_shot_gain(store: &nmb_store::Store, c: &Comparison) -> Option<FewShotGain> {
    let manifest = |id: &str| store.run(id).ok().map(|r| r.manifest);
    let (a, b) = (manifest(&c.run_a)?, manifest(&c.run_b)?);
    let few_shot = |m: &nmb_store::Manifest| {
        m.eval_config
            .as_ref()
            .is_some_and(|c| !c["few_shot"].is_null())
    };
    if a.model != b.model || a.suite_hash != b.suite_hash || few_shot(&a) == few_shot(&b) {
        return None;
    }
    let paired = c.groups.first()?.paired.as_ref()?;
    let (few, zero, sign) = match few_shot(&a) {
        true => (&c.run_a, &c.run_b, 1.0),
        false => (&c.run_b, &c.run_a, -1.0),
    };
    let d = &paired.diff;
    let (low, high) = match sign > 0.0 {
        true => (d.ci_low, d.ci_high),
        false => (-d.ci_high, -d.ci_low),
    };
    Some(FewShotGain {
        few_shot_run: few.clone(),
        zero_shot_run: zero.clone(),
        gain: nmb_stats::Estimate {
            value: sign * d.value,
            ci_low: low,
            ci_high: high,
            ..d.clone()
        },
        p_value: paired.p_value,
    })
}

fn print_table(c: &Comparison, multiplicity: &Multiplicity) {
    println!("A  {}  {} ({})", c.run_a, c.name_a, c.model_a);
    println!("B  {}  {} ({})", c.run_b, c.name_b, c.model_b);
    println!(
        "paired bootstrap: {} resamples, seed {}",
        c.bootstrap.resamples, c.bootstrap.seed
    );
    println!();
    print!(
        "{}",
        nmb_report::paired_table(std::slice::from_ref(c), multiplicity).text()
    );
    print_subgroups(c);
    for n in &c.notes {
        println!("note  {n}");
    }
}

/// Per subgroup of each `--by` field both runs were scored with: items, cases, A, B and A − B with its CI and
/// bootstrap p; a subgroup under 10 cases is marked `*`.
fn print_subgroups(c: &Comparison) {
    for f in &c.subgroups {
        println!();
        println!("by {}", nmb_table::terminal::excerpt_of(&f.by, 80));
        println!(
            "{:<16} {:>6} {:>6} {:>7} {:>7}  {:<24} {:>8} {:>8} {:>8}",
            "subgroup", "cases", "items", "A", "B", "A - B [95% CI]", "p boot", "Holm", "BH"
        );
        for s in &f.subgroups {
            let mark = if s.few_cases { " *" } else { "" };
            let name = format!("{}{mark}", nmb_table::terminal::excerpt_of(&s.subgroup, 14));
            match &s.paired {
                Some(p) => println!(
                    "{name:<16} {:>6} {:>6} {:>6.1}% {:>6.1}%  {:<24} {:>8.4} {:>8} {:>8}",
                    s.cases,
                    s.items,
                    100.0 * p.mean_a,
                    100.0 * p.mean_b,
                    format!(
                        "{:+.1} [{:+.1}, {:+.1}] pts",
                        100.0 * p.diff.value,
                        100.0 * p.diff.ci_low,
                        100.0 * p.diff.ci_high
                    ),
                    p.p_value,
                    adjusted(s.p_adjusted.map(|a| a.holm)),
                    adjusted(s.p_adjusted.map(|a| a.bh)),
                ),
                None => println!("{name:<16} {:>6} {:>6}", s.cases, s.items),
            }
        }
        if let Some(g) = &f.gap {
            println!(
                "gap in A - B between {} and {}: {:+.1} [{:+.1}, {:+.1}] pts ({} subgroups of 10+ cases)",
                nmb_table::terminal::excerpt_of(&g.best, 40),
                nmb_table::terminal::excerpt_of(&g.worst, 40),
                100.0 * g.gap.value,
                100.0 * g.gap.ci_low,
                100.0 * g.gap.ci_high,
                g.compared
            );
        }
        if f.subgroups.iter().any(|s| s.few_cases) {
            println!("* under 10 cases: a wide interval, left out of the gap");
        }
        println!(
            "Holm and BH adjust the p-values of this field's subgroups as one family ({} p-values)",
            f.subgroups
                .iter()
                .filter(|s| s.p_adjusted.is_some())
                .count()
        );
    }
}

/// A context probe's effect, when one run of the pair is the other with a probe (`nmb eval --probe`).
#[derive(serde::Serialize)]
struct PairProbe {
    probed_run: String,
    unprobed_run: String,
    #[serde(flatten)]
    probe: RecordedProbe,
    effect: Option<ProbeEffect>,
}

fn probe_effect(
    store: &nmb_store::Store,
    cmp: &Comparison,
    (a, b): (&ScoreReport, &ScoreReport),
    cfg: &nmb_stats::BootstrapConfig,
) -> Result<Option<PairProbe>> {
    let (ma, mb) = (
        store.run(&cmp.run_a)?.manifest,
        store.run(&cmp.run_b)?.manifest,
    );
    let (probed, plain, run_probed, run_plain) = match () {
        _ if is_unprobed_twin(&ma, &mb) => (a, b, &cmp.run_a, &cmp.run_b),
        _ if is_unprobed_twin(&mb, &ma) => (b, a, &cmp.run_b, &cmp.run_a),
        _ => return Ok(None),
    };
    let manifest = if run_probed == &cmp.run_a { &ma } else { &mb };
    Ok(RecordedProbe::of(manifest).map(|probe| PairProbe {
        probed_run: run_probed.clone(),
        unprobed_run: run_plain.clone(),
        probe,
        effect: effect(&plain.samples, &probed.samples, cfg),
    }))
}

/// The probe's lines under the table: the switch rate and the change in accuracy, with their CIs.
fn print_probe(p: &PairProbe) {
    println!();
    println!(
        "context probe {} (seed {}) in {}, paired with {}: {} task(s) probed, {} without a suggestion",
        p.probe.kind,
        p.probe.seed,
        p.probed_run,
        p.unprobed_run,
        p.probe.probed_tasks,
        p.probe.unprobed_tasks.len()
    );
    let Some(e) = &p.effect else {
        println!("no probed sample was scored in both runs");
        return;
    };
    let ci = |x: &nmb_stats::Estimate, scale: f64| {
        format!(
            "{:.1} [{:.1}, {:.1}]",
            scale * x.value,
            scale * x.ci_low,
            scale * x.ci_high
        )
    };
    match &e.switch_rate {
        Some(r) => println!(
            "switch rate: {}% ({} of {} answers right without the probe took the suggestion)",
            ci(r, 100.0),
            e.switched,
            e.right_without
        ),
        None => println!("switch rate: - (no answer was right without the probe)"),
    }
    println!(
        "accuracy: {:.1}% without, {:.1}% with; change {} pts over {} pairs (CIs resample whole cases)",
        100.0 * e.accuracy_without,
        100.0 * e.accuracy_with,
        ci(&e.accuracy_change, 100.0),
        e.pairs
    );
}

fn adjusted(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |p| format!("{p:.4}"))
}

fn print_few_shot_gain(g: &FewShotGain) {
    let pts = |v: f64| 100.0 * v;
    println!(
        "few-shot gain ({} few-shot - {} zero-shot): {:+.1} [{:+.1}, {:+.1}] pts, p boot {:.4}",
        g.few_shot_run,
        g.zero_shot_run,
        pts(g.gain.value),
        pts(g.gain.ci_low),
        pts(g.gain.ci_high),
        g.p_value
    );
}
