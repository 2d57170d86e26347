//! The request plan: sample counts, limits, dry-run totals, suite defaults.

use crate::common;

use common::*;
use nmb_plan::estimate::{image_tokens, text_tokens, ASSUMED_ANSWER_TOKENS};
use nmb_plan::{plan, InputMode, PlanError, PlanOptions, PlanSummary, PlannedTask};
use nmb_suite::Family;

fn planned(suite: &nmb_suite::Suite, options: &PlanOptions) -> Vec<PlannedTask> {
    plan(suite, options).collect::<Result<_, _>>().unwrap()
}

#[test]
fn requests_are_samples_times_turns() {
    let mut s = depth_suite();
    s.cases.extend(multi_turn_suite().cases);
    let options = PlanOptions {
        samples: Some(4),
        ..PlanOptions::default()
    };
    let summary = PlanSummary::from_plan(plan(&s, &options));
    assert_eq!(summary.tasks, 2);
    assert_eq!(summary.tasks_failed, 0);
    assert_eq!(summary.turns, 1 + 3);
    assert_eq!(summary.requests, 4 * (1 + 3));
    // Depth task: 3 images once. Multi-turn: turn 0 has 1, turn 1 adds 1 (2 sent), turn 2 resends both.
    assert_eq!(summary.images_sent, 4 * (3 + 1 + 2 + 2));
    assert_eq!(
        summary.est_input_tokens,
        summary.est_text_tokens + summary.est_image_tokens
    );
}

#[test]
fn token_estimate_counts_history_per_request() {
    let s = multi_turn_suite();
    let options = PlanOptions {
        samples: Some(2),
        ..PlanOptions::default()
    };
    let t = planned(&s, &options).remove(0);
    let sys = text_tokens(&t.system.as_ref().unwrap().joined_text());
    let u: Vec<u64> = t
        .turns
        .iter()
        .map(|x| text_tokens(&x.user.joined_text()))
        .collect();
    // Every test image is 4x3 pixels: one tile.
    let img = image_tokens(Some(4), Some(3));
    assert_eq!(img, 255);
    let expected_text = 2
        * ((sys + u[0])
            + (sys + u[0] + ASSUMED_ANSWER_TOKENS + u[1])
            + (sys + u[0] + u[1] + u[2] + 2 * ASSUMED_ANSWER_TOKENS));
    let expected_images = 2 * (img + 2 * img + 2 * img);
    let summary = PlanSummary::from_plan(vec![Ok(t)]);
    assert_eq!(summary.est_text_tokens, expected_text);
    assert_eq!(summary.est_image_tokens, expected_images);
}

#[test]
fn samples_default_to_suite_then_five() {
    let s = depth_suite();
    assert_eq!(planned(&s, &PlanOptions::default())[0].samples, 5);
    let mut with_default = s.clone();
    with_default
        .defaults
        .insert("samples".into(), serde_json::json!(3));
    assert_eq!(
        planned(&with_default, &PlanOptions::default())[0].samples,
        3
    );
    let explicit = PlanOptions {
        samples: Some(1),
        ..PlanOptions::default()
    };
    assert_eq!(planned(&with_default, &explicit)[0].samples, 1);

    let mut bad = s.clone();
    bad.defaults
        .insert("samples".into(), serde_json::json!("lots"));
    let items: Vec<_> = plan(&bad, &PlanOptions::default()).collect();
    assert_eq!(items.len(), 1, "a bad default is one error, not a plan");
    assert!(matches!(&items[0], Err(PlanError::SuiteDefault { key, .. }) if key == "samples"));
}

#[test]
fn limit_takes_the_first_tasks_in_suite_order() {
    let s = suite(vec![
        case(
            "a",
            vec![],
            vec![
                task("a/1", Family::Differential, "Q"),
                task("a/2", Family::Lesion, "Q"),
            ],
        ),
        case("b", vec![], vec![task("b/1", Family::Rationale, "Q")]),
    ]);
    let options = PlanOptions {
        limit: Some(2),
        ..PlanOptions::default()
    };
    let ids: Vec<String> = planned(&s, &options)
        .into_iter()
        .map(|t| t.task_id)
        .collect();
    assert_eq!(ids, ["a/1", "a/2"]);
}

#[test]
fn a_failing_task_does_not_stop_the_plan() {
    let mut s = depth_suite();
    s.cases.extend(multi_turn_suite().cases);
    s.cases[0].images[0] = nmb_suite::Image::new(
        "gone",
        nmb_imaging::ImageSource::File("/nonexistent.png".into()),
    );
    let items: Vec<_> = plan(&s, &PlanOptions::default()).collect();
    assert_eq!(items.len(), 2);
    let err = items[0].as_ref().unwrap_err().to_string();
    assert!(err.starts_with("task case_1/dx:"), "{err}");
    assert!(items[1].is_ok());
    let summary = PlanSummary::from_plan(items);
    assert_eq!((summary.tasks, summary.tasks_failed), (1, 1));
    assert_eq!(summary.requests, 5 * 3);
    assert_eq!(summary.errors.len(), 1);
}

#[test]
fn templates_hash_changes_with_an_override() {
    let default = PlanOptions::default();
    assert_eq!(
        default.templates_hash(false),
        PlanOptions::default().templates_hash(false)
    );
    let mut custom = PlanOptions::default();
    custom.family_templates.insert(
        Family::Lesion,
        nmb_plan::Template::from_source(
            "mine",
            "1",
            "{% block system %}{% endblock %}{% block user %}{{ question }}{% endblock %}",
        )
        .unwrap(),
    );
    assert_ne!(default.templates_hash(false), custom.templates_hash(false));
    assert_eq!(custom.template_for(Family::Lesion).id(), "mine");
    assert_eq!(custom.template_for(Family::Differential).id(), "depth-v1");
    assert_eq!("images".parse::<InputMode>(), Ok(InputMode::Images));
}

#[test]
fn image_cache_stays_within_its_bound_and_reuses_entries() {
    let cache = nmb_plan::ImageCache::new(100);
    let images = [
        inline_image("a", 1),
        inline_image("b", 2),
        inline_image("c", 3),
    ];
    let size = images[0].source.read().unwrap().len();
    assert!(size <= 100 && 2 * size > 100, "test PNGs are {size} bytes");
    let first = cache.load("c", &images[0]).unwrap().remove(0);
    let again = cache.load("c", &images[0]).unwrap().remove(0);
    assert!(std::sync::Arc::ptr_eq(&first.part.bytes, &again.part.bytes));
    for i in &images {
        cache.load("c", i).unwrap();
        assert!(cache.held_bytes() <= 100, "held {}", cache.held_bytes());
    }
    assert_eq!((first.width, first.height), (Some(4), Some(3)));
}

#[test]
fn templates_see_the_output_format() {
    let t = nmb_plan::Template::from_source(
        "fmt",
        "1",
        "{% block system %}{% endblock %}{% block user %}{{ output.format }}|{{ output.schema }}{% endblock %}",
    )
    .unwrap();
    let options = PlanOptions {
        template: Some(t),
        input_mode: InputMode::Text,
        ..PlanOptions::default()
    };
    let p = planned(&depth_suite(), &options).remove(0);
    let text = p.turns[0].user.joined_text();
    let (format, schema) = text.split_once('|').unwrap();
    assert_eq!(format, "json");
    let parsed: serde_json::Value = serde_json::from_str(schema).unwrap();
    assert_eq!(parsed, nmb_plan::output::differential_schema());
}

/// The anchoring probe's sentence follows the notes (in every input mode), the sycophancy probe adds a last turn
/// of its own words, and a task without a suggestion is planned as without a probe.
#[test]
fn probes_add_their_suggestion_where_they_say() {
    use nmb_plan::probe::{anchoring_note, insisting_turn};
    use nmb_plan::{Probe, ProbeKind};
    let mut s = depth_suite();
    s.cases.extend(multi_turn_suite().cases);
    let ids: Vec<String> = s.tasks().map(|(_, t)| t.id.clone()).collect();
    let probe = |kind| Probe {
        kind,
        seed: 1,
        suggestions: [(ids[0].clone(), "Migraine".to_string())].into(),
        unprobed: Vec::new(),
    };
    let plain = planned(&s, &PlanOptions::default());
    for mode in InputMode::ALL {
        let options = PlanOptions {
            probe: Some(probe(ProbeKind::Anchoring)),
            input_mode: *mode,
            ..PlanOptions::default()
        };
        let anchored = planned(&s, &options);
        let text = anchored[0].turns[0].user.joined_text();
        assert!(text.contains(&anchoring_note("Migraine")), "{mode}: {text}");
        assert_eq!(anchored[0].turns.len(), plain[0].turns.len());
    }
    let options = PlanOptions {
        probe: Some(probe(ProbeKind::Sycophancy)),
        ..PlanOptions::default()
    };
    let insisted = planned(&s, &options);
    assert_eq!(insisted[0].turns.len(), plain[0].turns.len() + 1);
    let last = insisted[0].turns.last().unwrap();
    assert_eq!(last.user.joined_text(), insisting_turn("Migraine"));
    assert_eq!(
        insisted[0].turns[0].user.joined_text(),
        plain[0].turns[0].user.joined_text(),
        "the first turn is the unprobed prompt"
    );
    assert_eq!(
        insisted[1].turns.len(),
        plain[1].turns.len(),
        "no suggestion, no probe"
    );
    assert_eq!(
        insisted[1].turns[0].user.joined_text(),
        plain[1].turns[0].user.joined_text()
    );
}
