//! Perturbations while planning (`PlanOptions::perturbation`) on the bundled sample suite: pixel perturbations
//! change every image sent, once per distinct image, the same way for the same seed; `mismatch` never sends a case
//! its own images and takes another case's of the same modality; `drop:SEQUENCE` leaves that sequence out and
//! refuses a sequence no image has; text mode sends no images to perturb; a damaged image is refused by a
//! perturbation that decodes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nmb_plan::{ImageCache, InputMode, Part, Plan, PlanError, PlanOptions, PlannedTask};
use nmb_suite::Suite;

fn options(p: Option<&str>, seed: u64) -> PlanOptions {
    PlanOptions {
        samples: Some(1),
        perturbation: p.map(|p| p.parse().unwrap()),
        perturb_seed: seed,
        ..PlanOptions::default()
    }
}

fn planned(suite: &Suite, options: &PlanOptions) -> (Vec<PlannedTask>, u64) {
    let cache = Arc::new(ImageCache::default());
    let tasks = Plan::new(suite, options, cache.clone())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (tasks, cache.perturbed_count())
}

/// Per task: the content hashes of the images its conversation sends, in order.
fn sent(tasks: &[PlannedTask]) -> BTreeMap<String, Vec<String>> {
    tasks
        .iter()
        .map(|t| {
            let hashes = t
                .turns
                .iter()
                .flat_map(|turn| &turn.user.parts)
                .filter_map(|p| match p {
                    Part::Image(i) => Some(i.sha256.clone()),
                    _ => None,
                })
                .collect();
            (t.task_id.clone(), hashes)
        })
        .collect()
}

/// Per case: the content hashes of its own images (case-level and every turn's).
fn own(suite: &Suite) -> BTreeMap<String, BTreeSet<String>> {
    suite
        .cases
        .iter()
        .map(|c| {
            let all = c.images.iter().chain(
                c.tasks
                    .iter()
                    .flat_map(|t| t.turns.iter().flat_map(|u| &u.images)),
            );
            let hashes = all
                .map(|i| nmb_imaging::content_hash(&i.source.read().unwrap()))
                .collect();
            (c.id.clone(), hashes)
        })
        .collect()
}

#[test]
fn pixel_perturbations_change_each_distinct_image_once_and_the_same_way_per_seed() {
    let suite = nmb_suite::sample::build();
    let (plain, none_changed) = planned(&suite, &options(None, 0));
    assert_eq!(none_changed, 0);
    let originals: BTreeSet<String> = sent(&plain).into_values().flatten().collect();
    let (noisy, changed) = planned(&suite, &options(Some("noise:0.2"), 1));
    let noisy_sent: BTreeSet<String> = sent(&noisy).into_values().flatten().collect();
    assert!(
        noisy_sent.is_disjoint(&originals),
        "every image sent is changed"
    );
    assert_eq!(
        changed as usize,
        originals.len(),
        "each distinct image is changed once"
    );
    assert_eq!(
        sent(&planned(&suite, &options(Some("noise:0.2"), 1)).0),
        sent(&noisy)
    );
    assert_ne!(
        sent(&planned(&suite, &options(Some("noise:0.2"), 2)).0),
        sent(&noisy)
    );
    for (a, b) in plain.iter().zip(&noisy) {
        assert_eq!(a.turn_count(), b.turn_count(), "{}", a.task_id);
    }
}

#[test]
fn mismatch_sends_another_case_of_the_same_modality_never_the_case_itself() {
    let suite = nmb_suite::sample::build();
    let own = own(&suite);
    let modality: BTreeMap<String, Option<String>> = suite
        .cases
        .iter()
        .map(|c| {
            (
                c.id.clone(),
                c.images
                    .first()
                    .and_then(|i| i.modality.map(|m| m.to_string())),
            )
        })
        .collect();
    let (tasks, changed) = planned(&suite, &options(Some("mismatch"), 5));
    assert_eq!(changed, 0, "mismatch changes no pixels");
    let by_task: BTreeMap<&str, &str> = tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.case_id.as_str()))
        .collect();
    let mut with_images = 0;
    for (task, hashes) in sent(&tasks) {
        let case = by_task[task.as_str()];
        if hashes.is_empty() {
            continue;
        }
        with_images += 1;
        assert!(
            hashes.iter().all(|h| !own[case].contains(h)),
            "{task} got its own images"
        );
        let donors: Vec<&String> = own
            .iter()
            .filter(|(_, imgs)| hashes.iter().all(|h| imgs.contains(h)))
            .map(|(c, _)| c)
            .collect();
        assert!(
            !donors.is_empty(),
            "{task}: the images come from one other case"
        );
        assert!(
            donors.iter().any(|d| modality[*d] == modality[case]),
            "{task}: same modality"
        );
    }
    assert!(with_images > 0);
    let (again, _) = planned(&suite, &options(Some("mismatch"), 5));
    assert_eq!(sent(&again), sent(&tasks), "the donors come from the seed");
}

#[test]
fn drop_leaves_a_sequence_out_and_refuses_one_no_image_has() {
    let suite = nmb_suite::sample::build();
    let flair: BTreeSet<String> = suite
        .cases
        .iter()
        .flat_map(|c| &c.images)
        .filter(|i| i.sequence == Some(nmb_suite::Sequence::Flair))
        .map(|i| nmb_imaging::content_hash(&i.source.read().unwrap()))
        .collect();
    assert!(!flair.is_empty(), "the sample suite has FLAIR images");
    let (tasks, _) = planned(&suite, &options(Some("drop:flair"), 0));
    let sent: BTreeSet<String> = sent(&tasks).into_values().flatten().collect();
    assert!(sent.is_disjoint(&flair));
    assert!(!sent.is_empty(), "the other sequences are still sent");

    let mut no_swi = suite.clone();
    for c in &mut no_swi.cases {
        c.images
            .retain(|i| i.sequence != Some(nmb_suite::Sequence::Swi));
        for t in &mut c.tasks {
            for u in &mut t.turns {
                u.images
                    .retain(|i| i.sequence != Some(nmb_suite::Sequence::Swi));
            }
        }
    }
    let err = Plan::new(&no_swi, &options(Some("drop:swi"), 0), Arc::default())
        .err()
        .expect("refused");
    assert!(matches!(err, PlanError::Perturbation { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("no image of the suite has sequence SWI"),
        "{err}"
    );
    let err = Plan::new(&suite, &options(Some("drop:sharp"), 0), Arc::default())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("expected one of"), "{err}");
}

#[test]
fn text_mode_sends_nothing_to_perturb() {
    let suite = nmb_suite::sample::build();
    let mut o = options(Some("mismatch"), 0);
    o.input_mode = InputMode::Text;
    let (tasks, changed) = planned(&suite, &o);
    assert_eq!(changed, 0);
    assert!(sent(&tasks).values().all(Vec::is_empty));
}

#[test]
fn a_damaged_image_is_refused_by_the_perturbation_that_decodes_it_and_the_same_image_twice_is_changed_once(
) {
    let mut suite = nmb_suite::sample::build();
    let case = &mut suite.cases[0];
    let whole = case.images[0].source.read().unwrap();
    // The header and the start of the pixels, the rest cut off.
    let cut: Arc<[u8]> = Arc::from(&whole[..whole.len() / 2]);
    case.images[0].source = nmb_imaging::ImageSource::Bytes(cut);
    // As a suite loaded from damaged files would have it: no hash recorded from the whole bytes.
    case.images[0].sha256 = None;
    let (case_id, image_id) = (case.id.clone(), case.images[0].id.clone());
    let plan = |p: Option<&str>| -> Result<Vec<PlannedTask>, PlanError> {
        Plan::new(&suite, &options(p, 0), Arc::default())?.collect()
    };
    for p in ["noise:0.2", "blur:1.5", "jpeg:50", "contrast:0.5"] {
        let err = plan(Some(p)).expect_err(p);
        let text = err.to_string();
        assert!(
            text.contains(&case_id)
                && text.contains(&image_id)
                && text.contains(&format!("under {p}"))
                && text.contains("cannot decode png image"),
            "{p}: {text}"
        );
    }
    plan(None).expect_err("an unperturbed image is verified by a full decode");
    // Only the size is read for a grey image; the unperturbed run of a sweep refuses the original.
    plan(Some("blank")).expect("blank reads the header only");

    let mut twice = nmb_suite::sample::build();
    let first = twice.cases[0].images[0].clone();
    twice.cases[0].images.push(first);
    let (_, changed) = planned(&twice, &options(Some("noise:0.2"), 1));
    let (_, once) = planned(&nmb_suite::sample::build(), &options(Some("noise:0.2"), 1));
    assert_eq!(changed, once, "a repeated image is changed once");
}
