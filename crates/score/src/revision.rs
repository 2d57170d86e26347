//! Revision in multi-turn consults: how an answer moves as evidence arrives turn by turn.
//!
//! A consult is a task with later turns (level `multi_turn`) of a family whose answer has a top diagnosis
//! (differential, rationale). Accuracy scores only its last turn; here every answered turn of every consult
//! sample is read and matched:
//!
//! - **Per turn** ([`TurnScore`]): the answer is parsed as the final answer is ([`crate::parse`]), its
//!   top-ranked diagnosis taken, and matched to the reference diagnosis and its synonyms by the same rules
//!   ([`crate::matching::match_diagnosis`]). The outcome is `correct`, `wrong`, `unparseable` (no diagnosis
//!   could be read) or `unresolved` (the rules cannot decide). No judge is asked about an intermediate turn:
//!   a pair the rules leave open takes the verdict the judges already gave on the same candidate (equal after
//!   normalisation) for the same task's final answers, when they gave one — so the last turn agrees with the
//!   sample's own verdict — and otherwise stays `unresolved`.
//! - **Per consult** ([`consult`]): first- and last-turn correctness, whether the top diagnosis changed between
//!   the first and the last turn, and whether some consecutive pair of turns went wrong → right or right →
//!   wrong (anchoring).
//! - **Aggregates** ([`RevisionReport`]), overall and per level, each a mean over consult samples with a
//!   seeded bootstrap interval that resamples whole cases.
//!
//! Conventions:
//! - An **unparseable** turn counts as wrong, as a parse failure does in accuracy (and is counted apart).
//! - An **unresolved** turn is never counted wrong or right: it is left out of that turn's accuracy, and a
//!   consult whose transition cannot be decided without it is left out of that rate; both are counted
//!   (`unresolved`, `undecided`). (Accuracy, by contrast, counts an unresolved final answer as wrong.)
//! - **Changed top diagnosis** compares the matched concept, not the text: the first and last top diagnoses
//!   are the same when the matching rules say they match (equal after normalisation — case, punctuation,
//!   spelling, abbreviations, leading hedges such as "probable" — or the same lexicon diagnosis); anything
//!   else, a broader or narrower term included, is a change. A consult without a top diagnosis at its first or
//!   last turn is left out of this share and counted as `undecided`.
//! - **Transitions**: a consult counts towards wrong → right when at least one pair of consecutive turns goes
//!   from wrong (or unparseable) to correct, likewise right → wrong; a pair with an unresolved turn is
//!   undecided, and a consult with no such transition but an undecided pair is left out of the rate.
//! - Errored and pending consult samples, and those of tasks without a reference diagnosis, are left out and
//!   counted (`left_out`). Lesion consults have no top diagnosis and are not part of this report (a note says
//!   how many there were).

use std::collections::{BTreeSet, HashMap};

use nmb_results::revision::{Rate, RevisionGroup, RevisionReport, TurnAccuracy};
use nmb_results::{MatchMethod, MatchOutcome, SampleScore, TurnOutcome, TurnScore};
use nmb_stats::BootstrapConfig;
use nmb_store::SampleRecord;
use nmb_suite::{Family, Level, Task};

use crate::aggregate::{estimate, has_ranked_answer};
use crate::lexicon::{builtin, Lexicon};
use crate::matching::match_diagnosis;
use crate::parse::{parse_answer, ranked_diagnoses};
use crate::ScoreError;

/// What one consult sample did across its turns; `None` where it cannot be decided (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consult {
    pub first: TurnOutcome,
    pub last: TurnOutcome,
    /// The top diagnosis of the last turn is not the first turn's (by the matching rules).
    pub changed: Option<bool>,
    /// Some consecutive pair of turns went from wrong (or unparseable) to correct.
    pub wrong_to_right: Option<bool>,
    /// Some consecutive pair of turns went from correct to wrong (or unparseable).
    pub right_to_wrong: Option<bool>,
}

/// Whether `task` is a consult this report covers: later turns, and a family with a top diagnosis.
pub fn is_consult(task: &Task) -> bool {
    !task.turns.is_empty() && has_ranked_answer(task.family)
}

/// Scores every turn of every consult sample of `samples` (setting their `turns`) and aggregates; `None` when
/// the run has no consult task at all, so runs without consults keep their report unchanged.
pub fn revision_report(
    samples: &mut [SampleScore],
    records: &[SampleRecord],
    tasks: &HashMap<&str, &Task>,
    cfg: &BootstrapConfig,
) -> Result<Option<RevisionReport>, ScoreError> {
    let texts: TurnTexts = records
        .iter()
        .map(|r| {
            let turns = r
                .turns
                .iter()
                .map(|t| (t.turn_index, t.text.as_deref().unwrap_or("")))
                .collect();
            ((r.task_id.as_str(), r.sample_index), turns)
        })
        .collect();
    report_from_texts(samples, &texts, tasks, cfg)
}

/// Each sample's turns as (turn index, stored text), by (task id, sample index).
type TurnTexts<'a> = HashMap<(&'a str, u32), Vec<(u32, &'a str)>>;

fn report_from_texts(
    samples: &mut [SampleScore],
    texts: &TurnTexts,
    tasks: &HashMap<&str, &Task>,
    cfg: &BootstrapConfig,
) -> Result<Option<RevisionReport>, ScoreError> {
    let lex = builtin();
    let judged = judged_candidates(samples);
    let mut consult_tasks: BTreeSet<String> = BTreeSet::new();
    let mut lesion_consults = 0usize;
    for s in samples.iter_mut() {
        let Some(task) = tasks.get(s.task_id.as_str()) else {
            continue;
        };
        if !task.turns.is_empty() && task.family == Family::Lesion {
            lesion_consults += 1;
        }
        if !is_consult(task) {
            continue;
        }
        consult_tasks.insert(s.task_id.clone());
        let reference = task.reference.as_ref();
        let Some(dx) = reference.and_then(|r| r.diagnosis.as_deref()) else {
            continue;
        };
        let synonyms = reference.map_or(&[][..], |r| r.synonyms.as_slice());
        let Some(turns) = texts.get(&(s.task_id.as_str(), s.sample_index)) else {
            continue;
        };
        if !s.status.is_scored() {
            continue;
        }
        let judged = judged.get(&s.task_id);
        s.turns = Some(
            turns
                .iter()
                .map(|(i, text)| score_turn(lex, task.family, *i, text, dx, synonyms, judged))
                .collect(),
        );
    }
    if consult_tasks.is_empty() && lesion_consults == 0 {
        return Ok(None);
    }
    let mut report = aggregate(samples, &consult_tasks, cfg)?;
    if lesion_consults > 0 {
        report.notes.push(format!(
            "{lesion_consults} lesion consult samples are not in the revision numbers: a lesion answer has no top \
             diagnosis"
        ));
    }
    Ok(Some(report))
}

/// Per task: the judges' verdicts on the (normalised) candidates of its final answers.
fn judged_candidates(samples: &[SampleScore]) -> HashMap<String, HashMap<String, bool>> {
    let mut out: HashMap<String, HashMap<String, bool>> = HashMap::new();
    for s in samples {
        let Some(d) = &s.diagnosis else { continue };
        for c in &d.candidates {
            let verdict = match c.outcome {
                MatchOutcome::Match => true,
                MatchOutcome::NoMatch => false,
                MatchOutcome::Inconclusive => continue,
            };
            if c.method == Some(MatchMethod::Judge) {
                out.entry(s.task_id.clone())
                    .or_default()
                    .insert(c.normalised.clone(), verdict);
            }
        }
    }
    out
}

/// Reads and matches one turn's answer.
pub fn score_turn(
    lex: &Lexicon,
    family: Family,
    turn_index: u32,
    text: &str,
    reference: &str,
    synonyms: &[String],
    judged: Option<&HashMap<String, bool>>,
) -> TurnScore {
    let parsed = parse_answer(family, text);
    let top = match &parsed.error {
        None => ranked_diagnoses(&parsed.answer).into_iter().next(),
        Some(_) => None,
    };
    let Some(top) = top else {
        return TurnScore {
            turn_index,
            outcome: TurnOutcome::Unparseable,
            top_diagnosis: None,
            normalised: None,
            method: None,
            note: Some(
                parsed
                    .error
                    .map_or("no diagnosis found".into(), |e| e.to_string()),
            ),
        };
    };
    let normalised = lex.normalise(&top.diagnosis);
    let v = match_diagnosis(lex, &top.diagnosis, reference, synonyms);
    let (outcome, method) = match v.outcome {
        MatchOutcome::Match => (TurnOutcome::Correct, v.method),
        MatchOutcome::NoMatch => (TurnOutcome::Wrong, v.method),
        MatchOutcome::Inconclusive => match judged.and_then(|j| j.get(&normalised)) {
            Some(true) => (TurnOutcome::Correct, Some(MatchMethod::Judge)),
            Some(false) => (TurnOutcome::Wrong, Some(MatchMethod::Judge)),
            None => (TurnOutcome::Unresolved, None),
        },
    };
    TurnScore {
        turn_index,
        outcome,
        top_diagnosis: Some(top.diagnosis),
        normalised: Some(normalised),
        method,
        note: v.note,
    }
}

/// What one consult did across its turns; `None` without any turn.
pub fn consult(lex: &Lexicon, turns: &[TurnScore]) -> Option<Consult> {
    let (first, last) = (turns.first()?, turns.last()?);
    let changed = match (&first.top_diagnosis, &last.top_diagnosis) {
        (Some(a), Some(b)) => Some(match_diagnosis(lex, b, a, &[]).outcome != MatchOutcome::Match),
        _ => None,
    };
    let step = |from: bool, to: bool| {
        let mut undecided = false;
        for pair in turns.windows(2) {
            match (pair[0].outcome.correct(), pair[1].outcome.correct()) {
                (Some(a), Some(b)) if a == from && b == to => return Some(true),
                (Some(_), Some(_)) => {}
                _ => undecided = true,
            }
        }
        (!undecided).then_some(false)
    };
    Some(Consult {
        first: first.outcome,
        last: last.outcome,
        changed,
        wrong_to_right: step(false, true),
        right_to_wrong: step(true, false),
    })
}

/// Aggregates the scored consult samples of `samples` (the tasks in `consult_tasks`), overall and per level.
pub fn aggregate(
    samples: &[SampleScore],
    consult_tasks: &BTreeSet<String>,
    cfg: &BootstrapConfig,
) -> Result<RevisionReport, ScoreError> {
    let lex = builtin();
    let ours: Vec<&SampleScore> = samples
        .iter()
        .filter(|s| consult_tasks.contains(&s.task_id))
        .collect();
    let levels: BTreeSet<Level> = ours.iter().map(|s| s.level).collect();
    let overall = group(lex, None, &ours, cfg)?;
    let mut by_level = Vec::new();
    for l in levels {
        let these: Vec<&SampleScore> = ours.iter().copied().filter(|s| s.level == l).collect();
        by_level.push(group(lex, Some(l), &these, cfg)?);
    }
    let mut notes = Vec::new();
    if overall.unresolved_turns > 0 {
        notes.push(format!(
            "{} consult turns have a top diagnosis the rules cannot match to the reference (and no judge verdict on \
             the same candidate): they are left out of turn accuracy and of any transition they decide",
            overall.unresolved_turns
        ));
    }
    Ok(RevisionReport {
        overall,
        by_level,
        notes,
    })
}

fn group(
    lex: &Lexicon,
    level: Option<Level>,
    samples: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<RevisionGroup, ScoreError> {
    let scored: Vec<(&SampleScore, &[TurnScore], Consult)> = samples
        .iter()
        .filter_map(|s| {
            let turns = s.turns.as_deref()?;
            Some((*s, turns, consult(lex, turns)?))
        })
        .collect();
    let all_turns = || scored.iter().flat_map(|(_, t, _)| t.iter());
    let count_turns = |o: TurnOutcome| all_turns().filter(|t| t.outcome == o).count();
    let cases: BTreeSet<&str> = scored.iter().map(|(s, _, _)| s.case_id.as_str()).collect();
    let at = |pick: fn(&Consult) -> TurnOutcome| -> Result<TurnAccuracy, ScoreError> {
        let outcomes: Vec<(&str, TurnOutcome)> = scored
            .iter()
            .map(|(s, _, c)| (s.case_id.as_str(), pick(c)))
            .collect();
        let pairs: Vec<(&str, f64)> = outcomes
            .iter()
            .filter_map(|(case, o)| o.correct().map(|c| (*case, f64::from(u8::from(c)))))
            .collect();
        Ok(TurnAccuracy {
            n: pairs.len(),
            correct: pairs.iter().filter(|p| p.1 > 0.5).count(),
            unparseable: outcomes
                .iter()
                .filter(|o| o.1 == TurnOutcome::Unparseable)
                .count(),
            unresolved: outcomes
                .iter()
                .filter(|o| o.1 == TurnOutcome::Unresolved)
                .count(),
            accuracy: estimate(&pairs, cfg)?,
        })
    };
    let rate = |pick: fn(&Consult) -> Option<bool>| -> Result<Rate, ScoreError> {
        let pairs: Vec<(&str, f64)> = scored
            .iter()
            .filter_map(|(s, _, c)| pick(c).map(|v| (s.case_id.as_str(), f64::from(u8::from(v)))))
            .collect();
        Ok(Rate {
            n: pairs.len(),
            count: pairs.iter().filter(|p| p.1 > 0.5).count(),
            undecided: scored.len() - pairs.len(),
            share: estimate(&pairs, cfg)?,
        })
    };
    Ok(RevisionGroup {
        level,
        consults: scored.len(),
        cases: cases.len(),
        left_out: samples.len() - scored.len(),
        turns: all_turns().count(),
        unparseable_turns: count_turns(TurnOutcome::Unparseable),
        unresolved_turns: count_turns(TurnOutcome::Unresolved),
        first_turn: at(|c| c.first)?,
        last_turn: at(|c| c.last)?,
        changed_top_diagnosis: rate(|c| c.changed)?,
        wrong_to_right: rate(|c| c.wrong_to_right)?,
        right_to_wrong: rate(|c| c.right_to_wrong)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_results::SampleStatus;
    use nmb_stats::Estimate;
    use nmb_suite::{Reference, Turn};

    const REFERENCE: &str = "Multiple sclerosis";

    fn json(dx: &str) -> String {
        serde_json::json!({"differential": [{"rank": 1, "diagnosis": dx}, {"rank": 2, "diagnosis": "Migraine"}]})
            .to_string()
    }

    /// A turn's text: `R` right, `W` wrong, `X` a second wrong diagnosis, `P` unparseable, `U` unresolved.
    fn answer(code: char) -> String {
        match code {
            'R' => json("MS"),
            'r' => json("Multiple sclerosis"),
            'W' => json("ADEM"),
            'X' => json("Glioblastoma"),
            'P' => "I would like to see more imaging before committing to anything.".into(),
            'U' => json("Susac syndrome"),
            other => panic!("no answer for {other}"),
        }
    }

    fn turn(i: u32, code: char) -> TurnScore {
        score_turn(
            builtin(),
            Family::Differential,
            i,
            &answer(code),
            REFERENCE,
            &[],
            None,
        )
    }

    fn turns(codes: &str) -> Vec<TurnScore> {
        codes
            .chars()
            .enumerate()
            .map(|(i, c)| turn(i as u32, c))
            .collect()
    }

    #[test]
    fn each_turn_is_read_and_matched_by_the_rules() {
        let t = turn(0, 'R');
        assert_eq!(t.outcome, TurnOutcome::Correct);
        assert_eq!(t.top_diagnosis.as_deref(), Some("MS"));
        assert_eq!(t.method, Some(MatchMethod::Normalisation));
        assert_eq!(turn(1, 'W').outcome, TurnOutcome::Wrong);
        let p = turn(2, 'P');
        assert_eq!(p.outcome, TurnOutcome::Unparseable);
        assert_eq!((p.top_diagnosis, p.turn_index), (None, 2));
        assert!(p.note.unwrap().contains("no diagnosis"));
        let u = turn(3, 'U');
        assert_eq!(u.outcome, TurnOutcome::Unresolved);
        assert_eq!(u.method, None);
        assert!(u.note.is_some(), "the rules say why they could not decide");
        // A synonym from the answer key counts, as for the final answer.
        let s = score_turn(
            builtin(),
            Family::Differential,
            0,
            &answer('U'),
            REFERENCE,
            &["Susac syndrome".into()],
            None,
        );
        assert_eq!(
            (s.outcome, s.method),
            (TurnOutcome::Correct, Some(MatchMethod::Synonym))
        );
        // A rationale's stated diagnosis is its top diagnosis.
        let r = score_turn(
            builtin(),
            Family::Rationale,
            0,
            "Diagnosis: multiple sclerosis\nRationale: periventricular lesions.",
            REFERENCE,
            &[],
            None,
        );
        assert_eq!(r.outcome, TurnOutcome::Correct);
    }

    #[test]
    fn an_undecided_pair_takes_a_verdict_the_judges_already_gave_and_nothing_else() {
        let mut judged = HashMap::new();
        judged.insert(builtin().normalise("Susac syndrome"), false);
        let t = score_turn(
            builtin(),
            Family::Differential,
            1,
            &answer('U'),
            REFERENCE,
            &[],
            Some(&judged),
        );
        assert_eq!(
            (t.outcome, t.method),
            (TurnOutcome::Wrong, Some(MatchMethod::Judge))
        );
        judged.insert(builtin().normalise("Susac syndrome"), true);
        let t = score_turn(
            builtin(),
            Family::Differential,
            1,
            &answer('U'),
            REFERENCE,
            &[],
            Some(&judged),
        );
        assert_eq!(t.outcome, TurnOutcome::Correct);
        // A verdict never overrides a rule: a rule match stays a rule match.
        judged.insert(builtin().normalise("MS"), false);
        let t = score_turn(
            builtin(),
            Family::Differential,
            1,
            &answer('R'),
            REFERENCE,
            &[],
            Some(&judged),
        );
        assert_eq!(
            (t.outcome, t.method),
            (TurnOutcome::Correct, Some(MatchMethod::Normalisation))
        );
    }

    fn summary(codes: &str) -> Consult {
        consult(builtin(), &turns(codes)).unwrap()
    }

    #[test]
    fn a_consult_records_first_last_change_and_transitions() {
        let c = summary("WRR");
        assert_eq!(
            (c.first, c.last),
            (TurnOutcome::Wrong, TurnOutcome::Correct)
        );
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (Some(true), Some(true), Some(false))
        );
        let c = summary("RWW");
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (Some(true), Some(false), Some(true))
        );
        let c = summary("RWR");
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (Some(false), Some(true), Some(true))
        );
        // "MS" then "Multiple sclerosis": the same diagnosis, not a change.
        assert_eq!(summary("Rrr").changed, Some(false));
        assert_eq!(summary("WWW").changed, Some(false));
        // A different wrong diagnosis is a change without any transition.
        let c = summary("WXX");
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (Some(true), Some(false), Some(false))
        );
        // Unparseable counts as wrong for transitions; without a top diagnosis, the change is undecided.
        let c = summary("PWR");
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (None, Some(true), Some(false))
        );
        // An unresolved turn leaves its pairs undecided, but a decided transition elsewhere still counts.
        let c = summary("URR");
        assert_eq!(c.first, TurnOutcome::Unresolved);
        assert_eq!(
            (c.changed, c.wrong_to_right, c.right_to_wrong),
            (Some(true), None, None)
        );
        let c = summary("WRUW");
        assert_eq!((c.wrong_to_right, c.right_to_wrong), (Some(true), None));
        assert!(consult(builtin(), &[]).is_none());
    }

    fn task(id: &str, family: Family, level: Level, later_turns: usize) -> Task {
        Task {
            id: id.into(),
            family,
            level,
            question: "What is the diagnosis?".into(),
            options: Vec::new(),
            turns: (0..later_turns)
                .map(|i| Turn {
                    text: format!("new evidence {i}"),
                    images: Vec::new(),
                    question: "Does this change your differential?".into(),
                })
                .collect(),
            reference: Some(Reference {
                diagnosis: Some(REFERENCE.into()),
                lesion_type: Some("demyelination".into()),
                lesion_location: Some("periventricular white matter".into()),
                ..Reference::default()
            }),
            metadata: Default::default(),
        }
    }

    /// The stored turns of one sample, from each turn's letter.
    /// One sample's stored turns: (task id, sample index) and (turn index, text) per turn.
    type Stored = ((String, u32), Vec<(u32, String)>);

    fn stored(task: &str, sample: u32, codes: &str) -> Stored {
        let turns = codes
            .chars()
            .enumerate()
            .map(|(i, c)| (i as u32, answer(c)))
            .collect();
        ((task.to_string(), sample), turns)
    }

    fn texts(stored: &[Stored]) -> TurnTexts<'_> {
        stored
            .iter()
            .map(|((task, sample), turns)| {
                let turns = turns.iter().map(|(i, t)| (*i, t.as_str())).collect();
                ((task.as_str(), *sample), turns)
            })
            .collect()
    }

    fn score(t: &Task, sample: u32, status: SampleStatus) -> SampleScore {
        SampleScore {
            modality: "MRI".into(),
            status,
            correct: status.is_scored().then_some(false),
            ..SampleScore::new(
                t.id.clone(),
                sample,
                t.id.split('/').next().unwrap(),
                t.family,
                t.level,
            )
        }
    }

    fn close(e: &Option<Estimate>, want: f64) {
        let e = e.as_ref().expect("an estimate");
        assert!((e.value - want).abs() < 1e-12, "{} vs {want}", e.value);
        assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
    }

    #[test]
    fn the_report_counts_every_consult_and_leaves_out_what_is_not_an_answer() {
        // Three consults on two cases (two samples of case a), a single-turn task, an errored consult sample, a
        // lesion consult.
        let a = task("a/dx", Family::Differential, Level::MultiTurn, 2);
        let b = task("b/dx", Family::Differential, Level::MultiTurn, 2);
        let c = task("c/dx", Family::Differential, Level::MultiTurn, 2);
        let single = task("d/dx", Family::Differential, Level::Direct, 0);
        let lesion = task("e/lesion", Family::Lesion, Level::MultiTurn, 1);
        let tasks: HashMap<&str, &Task> = [&a, &b, &c, &single, &lesion]
            .into_iter()
            .map(|t| (t.id.as_str(), t))
            .collect();
        let plan = [
            (&a, 0, "WRR", SampleStatus::Ok),
            (&a, 1, "RWW", SampleStatus::Ok),
            (&b, 0, "URR", SampleStatus::Ok),
            (&c, 0, "RRP", SampleStatus::ParseFailed),
            (&c, 1, "R", SampleStatus::Errored),
            (&single, 0, "W", SampleStatus::Ok),
        ];
        let mut samples: Vec<SampleScore> = plan.iter().map(|p| score(p.0, p.1, p.3)).collect();
        samples.push(score(&lesion, 0, SampleStatus::Ok));
        let stored: Vec<_> = plan.iter().map(|p| stored(&p.0.id, p.1, p.2)).collect();
        let records = texts(&stored);
        let cfg = BootstrapConfig::default();
        let report = report_from_texts(&mut samples, &records, &tasks, &cfg)
            .unwrap()
            .expect("the run has consults");
        let outcomes = |i: usize| -> Vec<TurnOutcome> {
            samples[i]
                .turns
                .as_ref()
                .unwrap()
                .iter()
                .map(|t| t.outcome)
                .collect()
        };
        use TurnOutcome::*;
        assert_eq!(outcomes(0), [Wrong, Correct, Correct]);
        assert_eq!(outcomes(3), [Correct, Correct, Unparseable]);
        assert!(samples[4].turns.is_none(), "errored: no turns scored");
        assert!(samples[5].turns.is_none(), "single-turn task");
        assert!(samples[6].turns.is_none(), "lesion consult");

        let g = &report.overall;
        assert_eq!(g.level, None);
        assert_eq!((g.consults, g.cases, g.left_out), (4, 3, 1));
        assert_eq!(
            (g.turns, g.unparseable_turns, g.unresolved_turns),
            (12, 1, 1)
        );
        // First turns W R U R: the unresolved one is left out.
        assert_eq!(
            (
                g.first_turn.n,
                g.first_turn.correct,
                g.first_turn.unresolved
            ),
            (3, 2, 1)
        );
        close(&g.first_turn.accuracy, 2.0 / 3.0);
        // Last turns R W R P: the unparseable one is wrong.
        assert_eq!(
            (g.last_turn.n, g.last_turn.correct, g.last_turn.unparseable),
            (4, 2, 1)
        );
        close(&g.last_turn.accuracy, 0.5);
        // Changed: WRR yes, RWW yes, URR yes (Susac → MS), RRP undecided (no last top diagnosis).
        let ch = &g.changed_top_diagnosis;
        assert_eq!((ch.n, ch.count, ch.undecided), (3, 3, 1));
        close(&ch.share, 1.0);
        // wrong → right: WRR yes, RWW no, URR undecided, RRP no.
        let wr = &g.wrong_to_right;
        assert_eq!((wr.n, wr.count, wr.undecided), (3, 1, 1));
        close(&wr.share, 1.0 / 3.0);
        // right → wrong: WRR no, RWW yes, URR undecided, RRP yes (R → unparseable).
        let rw = &g.right_to_wrong;
        assert_eq!((rw.n, rw.count, rw.undecided), (3, 2, 1));
        close(&rw.share, 2.0 / 3.0);
        // One level: the same numbers under it.
        assert_eq!(report.by_level.len(), 1);
        assert_eq!(report.by_level[0].level, Some(Level::MultiTurn));
        assert_eq!(
            RevisionGroup {
                level: None,
                ..report.by_level[0].clone()
            },
            *g
        );
        assert!(report.notes.iter().any(|n| n.contains("1 lesion consult")));
        assert!(report
            .notes
            .iter()
            .any(|n| n.starts_with("1 consult turns")));

        // The same inputs give the same report (seeded bootstrap).
        let mut again: Vec<SampleScore> = plan.iter().map(|p| score(p.0, p.1, p.3)).collect();
        again.push(score(&lesion, 0, SampleStatus::Ok));
        assert_eq!(
            report_from_texts(&mut again, &records, &tasks, &cfg).unwrap(),
            Some(report)
        );
    }

    #[test]
    fn a_run_without_consults_gets_no_report_and_no_new_bytes() {
        let single = task("d/dx", Family::Differential, Level::Direct, 0);
        let tasks: HashMap<&str, &Task> = [(single.id.as_str(), &single)].into_iter().collect();
        let mut samples = vec![score(&single, 0, SampleStatus::Ok)];
        let before = serde_json::to_string(&samples[0]).unwrap();
        let stored = [stored("d/dx", 0, "W")];
        let got = report_from_texts(
            &mut samples,
            &texts(&stored),
            &tasks,
            &BootstrapConfig::default(),
        )
        .unwrap();
        assert_eq!(got, None);
        let after = serde_json::to_string(&samples[0]).unwrap();
        assert_eq!(before, after);
        assert!(!after.contains("\"turns\""), "{after}");
        // And a stored sample score without `turns` reads back.
        let back: SampleScore = serde_json::from_str(&after).unwrap();
        assert_eq!(back.turns, None);
    }

    #[test]
    fn judge_verdicts_on_final_answers_decide_the_same_candidate_at_any_turn_of_the_task() {
        use nmb_results::{CandidateMatch, DiagnosisScore};
        let a = task("a/dx", Family::Differential, Level::MultiTurn, 2);
        let tasks: HashMap<&str, &Task> = [(a.id.as_str(), &a)].into_iter().collect();
        // Sample 0 ended on "Susac syndrome" and the judges said it is not MS; sample 1 opened with it.
        let mut samples = vec![
            score(&a, 0, SampleStatus::Ok),
            score(&a, 1, SampleStatus::Ok),
        ];
        samples[0].diagnosis = Some(DiagnosisScore {
            reference: REFERENCE.into(),
            matched_rank: None,
            method: None,
            top_1: false,
            top_5: false,
            candidates: vec![CandidateMatch {
                rank: 1,
                diagnosis: "Susac syndrome".into(),
                normalised: builtin().normalise("Susac syndrome"),
                outcome: MatchOutcome::NoMatch,
                method: Some(MatchMethod::Judge),
                matched: None,
                rule_note: None,
                judge: None,
            }],
        });
        let stored = [stored("a/dx", 0, "RRU"), stored("a/dx", 1, "URR")];
        let report = report_from_texts(
            &mut samples,
            &texts(&stored),
            &tasks,
            &BootstrapConfig::default(),
        )
        .unwrap()
        .unwrap();
        for (s, turn) in [(0, 2), (1, 0)] {
            let t = &samples[s].turns.as_ref().unwrap()[turn];
            assert_eq!(
                (t.outcome, t.method),
                (TurnOutcome::Wrong, Some(MatchMethod::Judge)),
                "sample {s} turn {turn}"
            );
        }
        let g = &report.overall;
        assert_eq!(g.unresolved_turns, 0);
        assert_eq!((g.first_turn.n, g.first_turn.correct), (2, 1));
        assert_eq!((g.last_turn.n, g.last_turn.correct), (2, 1));
        assert_eq!((g.wrong_to_right.count, g.right_to_wrong.count), (1, 1));
        assert!(report.notes.is_empty(), "{:?}", report.notes);
    }

    #[test]
    fn turn_scores_round_trip_through_json() {
        let t = turns("WPU");
        let text = serde_json::to_string(&t).unwrap();
        assert!(text.contains("\"outcome\":\"unparseable\""), "{text}");
        let back: Vec<TurnScore> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, t);
    }
}
