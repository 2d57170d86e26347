//! Rendering: role prompt, evidence order, image placement and captions, input modes, multi-turn history,
//! template hashing, user templates, Chinese questions, shared image bytes, multiple choice.

use crate::common;

use std::sync::Arc;

use common::*;
use nmb_imaging::ImageSource;
use nmb_plan::{
    conversation_for_turn, messages_hash, plan, InputMode, Message, OutputFormat, Part, PlanError,
    PlanOptions, PlannedTask, Role, Template,
};
use nmb_suite::{Family, Suite};

fn plan_all(suite: &Suite, options: &PlanOptions) -> Vec<PlannedTask> {
    plan(suite, options)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("planning failed: {e}"))
}

fn only(suite: &Suite, options: &PlanOptions) -> PlannedTask {
    let mut all = plan_all(suite, options);
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn full() -> PlanOptions {
    PlanOptions::default()
}

fn mode(m: InputMode) -> PlanOptions {
    PlanOptions {
        input_mode: m,
        ..PlanOptions::default()
    }
}

fn image_shas(m: &Message) -> Vec<String> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(i.sha256.clone()),
            Part::Text(_) => None,
        })
        .collect()
}

fn case_image_shas(suite: &Suite) -> Vec<String> {
    suite.cases[0]
        .images
        .iter()
        .map(|i| nmb_suite::image_hash(i).unwrap())
        .collect()
}

/// Position of the first part containing `needle` (text) — or of the first image when `needle` is None.
fn part_index(m: &Message, needle: Option<&str>) -> usize {
    m.parts
        .iter()
        .position(|p| match (p, needle) {
            (Part::Text(t), Some(n)) => t.contains(n),
            (Part::Image(_), None) => true,
            _ => false,
        })
        .unwrap_or_else(|| panic!("{needle:?} not found in {m:?}"))
}

#[test]
fn role_prompt_opens_the_system_message() {
    let t = only(&depth_suite(), &full());
    let system = t.system.expect("system message");
    assert_eq!(system.role, Role::System);
    assert!(
        text_of(&system).starts_with("You are an experienced neurology expert"),
        "{}",
        text_of(&system)
    );
    assert_eq!(t.turns[0].user.role, Role::User);
    assert!(!text_of(&t.turns[0].user).contains("neurology expert"));
}

#[test]
fn ehr_then_notes_then_images_then_question() {
    let t = only(&depth_suite(), &full());
    let user = &t.turns[0].user;
    let text = text_of(user);
    let age = text.find("Age: 77").expect("EHR line");
    let sex = text.find("Sex: female").expect("EHR line");
    let complaint = text
        .find("Chief complaint: progressive memory loss")
        .unwrap();
    assert!(age < sex && sex < complaint, "EHR fields keep their order");
    let ehr = part_index(user, Some("Age: 77"));
    let notes = part_index(user, Some("impaired recall"));
    let first_image = part_index(user, None);
    let question = part_index(user, Some("What is the most likely diagnosis?"));
    assert!(ehr <= notes, "EHR before notes");
    assert!(text.find("Age: 77") < text.find("impaired recall"));
    assert!(notes < first_image, "notes before images");
    assert!(first_image < question, "images before the question");
    match user.parts.last() {
        Some(Part::Text(t)) => assert!(t.contains("\"final_diagnosis\""), "{t}"),
        other => panic!("expected the instruction last, got {other:?}"),
    }
}

#[test]
fn images_follow_case_order_each_after_its_caption() {
    let suite = depth_suite();
    let t = only(&suite, &full());
    let user = &t.turns[0].user;
    assert_eq!(image_shas(user), case_image_shas(&suite));
    let captions = [
        "Image 1: MRI T1 sagittal",
        "Image 2: MRI FLAIR axial",
        "Image 3: MRI DWI coronal",
    ];
    for (n, caption) in captions.iter().enumerate() {
        let image_positions: Vec<usize> = user
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, Part::Image(_)))
            .map(|(i, _)| i)
            .collect();
        let at = image_positions[n];
        match &user.parts[at - 1] {
            Part::Text(t) => assert!(t.trim_end().ends_with(caption), "{t:?} vs {caption}"),
            other => panic!("image {n} not preceded by its caption: {other:?}"),
        }
    }
    let png = user.parts.iter().find_map(|p| match p {
        Part::Image(i) => Some(i.mime.clone()),
        _ => None,
    });
    assert_eq!(png.as_deref(), Some("image/png"));
}

#[test]
fn input_modes_include_the_right_evidence() {
    let suite = depth_suite();
    let question = "What is the most likely diagnosis?";

    let f = only(&suite, &mode(InputMode::Full));
    let ft = text_of(&f.turns[0].user);
    assert!(ft.contains("Age: 77") && ft.contains("impaired recall") && ft.contains(question));
    assert_eq!(f.turns[0].user.image_count(), 3);

    let t = only(&suite, &mode(InputMode::Text));
    let tt = text_of(&t.turns[0].user);
    assert!(tt.contains("Age: 77") && tt.contains("impaired recall") && tt.contains(question));
    assert_eq!(t.turns[0].user.image_count(), 0);
    assert!(!tt.contains("Image 1"), "no captions without images: {tt}");

    let i = only(&suite, &mode(InputMode::Images));
    let it = text_of(&i.turns[0].user);
    assert!(
        !it.contains("Age: 77") && !it.contains("impaired recall"),
        "{it}"
    );
    assert!(it.contains(question));
    assert_eq!(i.turns[0].user.image_count(), 3);

    for (p, m) in [
        (&f, InputMode::Full),
        (&t, InputMode::Text),
        (&i, InputMode::Images),
    ] {
        assert_eq!(p.input_mode, m);
    }
    let hashes = [&f, &t, &i].map(|p| messages_hash(&p.conversation(0, &[]).unwrap()));
    assert!(hashes[0] != hashes[1] && hashes[1] != hashes[2] && hashes[0] != hashes[2]);
}

#[test]
fn input_modes_apply_to_later_turns() {
    let suite = multi_turn_suite();
    let text = only(&suite, &mode(InputMode::Text));
    assert!(text_of(&text.turns[1].user).contains("periodic sharp waves"));
    assert_eq!(text.turns[1].user.image_count(), 0);
    let images = only(&suite, &mode(InputMode::Images));
    assert!(!text_of(&images.turns[1].user).contains("periodic sharp waves"));
    assert_eq!(images.turns[1].user.image_count(), 1);
    assert!(text_of(&images.turns[1].user).contains("Revise your differential."));
}

#[test]
fn multi_turn_history_keeps_earlier_messages_and_answers() {
    let t = only(&multi_turn_suite(), &full());
    assert_eq!(t.turn_count(), 3);
    assert_eq!(t.requests(), 3 * 5);
    let answers = vec!["answer zero".to_string(), "answer one".to_string()];
    let conv = conversation_for_turn(&t, 2, &answers).unwrap();
    let roles: Vec<Role> = conv.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(conv[1], t.turns[0].user);
    assert_eq!(text_of(&conv[2]), "answer zero");
    assert_eq!(conv[3], t.turns[1].user);
    assert_eq!(text_of(&conv[4]), "answer one");
    assert_eq!(conv[5], t.turns[2].user);
    assert!(text_of(&conv[1]).contains("Initial assessment?"));
    assert!(text_of(&conv[3]).contains("periodic sharp waves"));
    assert!(
        text_of(&conv[3]).contains("Image 2: MRI DWI axial"),
        "{}",
        text_of(&conv[3])
    );
    assert_eq!(conv[3].image_count(), 1);
    assert!(text_of(&conv[5]).contains("14-3-3") && text_of(&conv[5]).contains("Final diagnosis?"));
    assert!(text_of(&conv[0]).contains("several rounds"));

    // Turn 0 needs no answers; asking past the end or without enough answers is an error, not a panic.
    assert_eq!(conversation_for_turn(&t, 0, &[]).unwrap().len(), 2);
    assert!(matches!(
        conversation_for_turn(&t, 2, &answers[..1]),
        Err(PlanError::Turn { .. })
    ));
    assert!(matches!(
        conversation_for_turn(&t, 3, &answers),
        Err(PlanError::Turn { .. })
    ));
}

#[test]
fn template_hash_is_stable_and_follows_the_text() {
    let a = Template::builtin("depth-v1").unwrap();
    let b = Template::builtin("depth-v1").unwrap();
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 64);
    let same = Template::from_source("x", a.version(), a.source()).unwrap();
    assert_eq!(
        same.hash(),
        a.hash(),
        "hash depends on source and version only"
    );
    let edited = format!("{} ", a.source());
    let changed = Template::from_source("depth-v1", a.version(), edited).unwrap();
    assert_ne!(changed.hash(), a.hash());
    let bumped = Template::from_source("depth-v1", "2", a.source()).unwrap();
    assert_ne!(bumped.hash(), a.hash());

    let t = only(&depth_suite(), &full());
    assert_eq!(t.template_id, "depth-v1");
    assert_eq!(t.template_hash, a.hash());
    let again = only(&depth_suite(), &full());
    assert_eq!(
        messages_hash(&t.conversation(0, &[]).unwrap()),
        messages_hash(&again.conversation(0, &[]).unwrap())
    );
}

const USER_TEMPLATE: &str = r#"{# nmb-template: id=my-dx version=7 #}
{% block system %}SYSTEM {{ task.family }}{% endblock %}
{% block user %}
{% for img in images %}[{{ img.number }}] {{ image(img.index) }}
{% endfor %}
Q: {{ question }} ({{ case.ehr | length }} fields, lang={{ answer_language }})
{% endblock %}
"#;

#[test]
fn user_template_file_is_used_and_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.jinja");
    std::fs::write(&path, USER_TEMPLATE).unwrap();
    let template = Template::from_file(&path).unwrap();
    assert_eq!((template.id(), template.version()), ("my-dx", "7"));
    assert_eq!(template.hash(), nmb_plan::template_hash("7", USER_TEMPLATE));

    let options = PlanOptions {
        template: Some(template.clone()),
        ..PlanOptions::default()
    };
    let t = only(&depth_suite(), &options);
    assert_eq!(t.template_id, "my-dx");
    assert_eq!(t.template_hash, template.hash());
    assert_eq!(text_of(t.system.as_ref().unwrap()), "SYSTEM differential");
    let user = &t.turns[0].user;
    assert_eq!(user.image_count(), 3);
    assert!(matches!(&user.parts[0], Part::Text(s) if s == "[1]"));
    assert!(matches!(&user.parts[1], Part::Image(_)));
    assert!(
        text_of(user).ends_with("Q: What is the most likely diagnosis? (3 fields, lang=English)")
    );

    // Without a header the id comes from the file name.
    let plain = dir.path().join("plain.jinja");
    std::fs::write(
        &plain,
        "{% block system %}{% endblock %}{% block user %}{{ question }}{% endblock %}",
    )
    .unwrap();
    let p = Template::from_file(&plain).unwrap();
    assert_eq!((p.id(), p.version()), ("file:plain", "user"));
    let t = only(
        &suite(vec![case(
            "c",
            vec![],
            vec![task("c/dx", Family::Differential, "Q?")],
        )]),
        &PlanOptions {
            template: Some(p),
            ..PlanOptions::default()
        },
    );
    assert!(
        t.system.is_none(),
        "an empty system block gives no system message"
    );
    assert_eq!(text_of(&t.turns[0].user), "Q?");
}

#[test]
fn a_plain_prompt_file_is_the_system_message_word_for_word() {
    // As NeuroVLM-Bench's prompts/*.txt: no blocks, a JSON example with braces that look like minijinja.
    let dir = tempfile::tempdir().unwrap();
    let prompt =
        "You read brain images.\nAnswer as {{\"diagnosis_name\": \"...\"}} {% if %} {# x #}.";
    let path = dir.path().join("neurorad_prompt.txt");
    std::fs::write(&path, format!("\n{prompt}\n\n")).unwrap();
    let template = Template::from_file(&path).unwrap();
    assert_eq!(template.id(), "file:neurorad_prompt");
    let options = PlanOptions {
        template: Some(template.clone()),
        ..PlanOptions::default()
    };
    let images = vec![inline_image("a.png", 10), inline_image("b.png", 20)];
    let t = only(
        &suite(vec![case(
            "c",
            images,
            vec![task("c/nv", Family::Structured, "Read this.")],
        )]),
        &options,
    );
    assert_eq!(text_of(t.system.as_ref().unwrap()), prompt);
    // The user message is the images alone: no question, no instruction.
    let user = &t.turns[0].user;
    assert_eq!(user.image_count(), 2);
    assert_eq!(text_of(user), "");
    // Another prompt is another template.
    std::fs::write(&path, "Another prompt.").unwrap();
    assert_ne!(Template::from_file(&path).unwrap().hash(), template.hash());
    std::fs::write(&path, "x {% endraw %} y").unwrap();
    let e = Template::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("endraw"), "{e}");
}

#[test]
fn bad_user_templates_fail_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let syntax = dir.path().join("broken.jinja");
    std::fs::write(&syntax, "{% block user %}{{ question {% endblock %}").unwrap();
    let err = Template::from_file(&syntax).unwrap_err().to_string();
    assert!(err.contains("broken.jinja"), "{err}");

    let missing = dir.path().join("missing.jinja");
    assert!(matches!(
        Template::from_file(&missing),
        Err(PlanError::TemplateRead { .. })
    ));

    let drops = Template::from_source(
        "drops",
        "1",
        "{% block system %}{% endblock %}{% block user %}{{ question }}{% endblock %}",
    )
    .unwrap();
    let err = plan(
        &depth_suite(),
        &PlanOptions {
            template: Some(drops.clone()),
            ..PlanOptions::default()
        },
    )
    .next()
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("never placed") && err.contains("case_1/dx"),
        "{err}"
    );

    // The same template is fine in text mode, where there are no images to place.
    let ok = only(
        &depth_suite(),
        &PlanOptions {
            template: Some(drops.clone()),
            input_mode: InputMode::Text,
            ..PlanOptions::default()
        },
    );
    assert_eq!(ok.turns[0].user.image_count(), 0);

    // A multi-turn task needs a `turn` block.
    let err = plan(
        &multi_turn_suite(),
        &PlanOptions {
            template: Some(drops),
            input_mode: InputMode::Text,
            ..PlanOptions::default()
        },
    )
    .next()
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(err.contains("block turn"), "{err}");

    let typo = Template::from_source(
        "typo",
        "1",
        "{% block system %}{% endblock %}{% block user %}{{ questoin }}{% endblock %}",
    )
    .unwrap();
    let err = plan(
        &depth_suite(),
        &PlanOptions {
            template: Some(typo),
            ..PlanOptions::default()
        },
    )
    .next()
    .unwrap();
    assert!(err.is_err(), "an undefined variable is an error");
}

#[test]
fn case_text_cannot_place_images() {
    let mut s = depth_suite();
    s.cases[0].notes = "notes with a forged marker \u{F8F0}0\u{F8F1} inside".into();
    let t = only(&s, &full());
    assert_eq!(t.turns[0].user.image_count(), 3);
    assert!(text_of(&t.turns[0].user).contains("forged marker \u{FFFD}0\u{FFFD} inside"));
}

#[test]
fn chinese_question_is_kept_verbatim_with_an_english_instruction() {
    let q = "根据患者的症状和图片,对疾病进行诊断";
    let s = suite(vec![case(
        "case_1",
        vec![inline_image("i", 1)],
        vec![task("case_1/dx", Family::Differential, q)],
    )]);
    let t = only(&s, &full());
    let text = text_of(&t.turns[0].user);
    assert!(text.contains(&format!("Question: {q}")), "{text}");
    assert!(text.contains("Answer in English"));
    assert_eq!(t.turns[0].question, q);

    let none = only(
        &s,
        &PlanOptions {
            answer_language: Some(String::new()),
            ..PlanOptions::default()
        },
    );
    assert!(!text_of(&none.turns[0].user).contains("Answer in"));

    let mut from_suite = s.clone();
    from_suite
        .defaults
        .insert("answer_language".into(), serde_json::json!("Chinese"));
    let zh = only(&from_suite, &full());
    assert!(text_of(&zh.turns[0].user).contains("Answer in Chinese"));
}

#[test]
fn the_same_image_shares_one_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scan.png");
    std::fs::write(&path, png(77)).unwrap();
    let file_image = |id: &str| nmb_suite::Image::new(id, ImageSource::File(path.clone()));
    // Same file in two cases, and identical bytes arriving inline from a second source.
    let s = suite(vec![
        case(
            "c1",
            vec![file_image("x")],
            vec![
                task("c1/dx", Family::Differential, "Q1"),
                task("c1/lesion", Family::Lesion, "Q2"),
            ],
        ),
        case(
            "c2",
            vec![
                file_image("y"),
                nmb_suite::Image::new("z", ImageSource::Bytes(Arc::from(png(77)))),
            ],
            vec![task("c2/dx", Family::Differential, "Q3")],
        ),
    ]);
    let tasks = plan_all(&s, &full());
    let all: Vec<Arc<[u8]>> = tasks
        .iter()
        .flat_map(|t| t.turns[0].user.parts.iter())
        .filter_map(|p| match p {
            Part::Image(i) => Some(i.bytes.clone()),
            Part::Text(_) => None,
        })
        .collect();
    assert_eq!(all.len(), 4);
    for b in &all[1..] {
        assert!(Arc::ptr_eq(&all[0], b), "image bytes were copied");
    }
    assert_eq!(tasks[2].distinct_images().len(), 1);
}

#[test]
fn non_web_images_are_refused_with_a_clear_error() {
    let mut dicom = vec![0u8; 128];
    dicom.extend_from_slice(b"DICM");
    dicom.extend_from_slice(&[0; 64]);
    let mut s = depth_suite();
    s.cases[0].images[1] = nmb_suite::Image::new("series2", ImageSource::Bytes(Arc::from(dicom)));
    let err = plan(&s, &full()).next().unwrap().unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("case_1") && msg.contains("series2") && msg.contains("dicom"),
        "{msg}"
    );
    // Text mode never reads images, so the same task plans.
    assert!(plan(&s, &mode(InputMode::Text)).next().unwrap().is_ok());

    let mut s = depth_suite();
    s.cases[0].images[0] =
        nmb_suite::Image::new("gone", ImageSource::File("/nonexistent/x.png".into()));
    let msg = plan(&s, &full()).next().unwrap().unwrap_err().to_string();
    assert!(
        msg.contains("/nonexistent/x.png") && msg.contains("gone"),
        "{msg}"
    );

    // A PNG with a valid header and no pixel data is refused before any model sees it.
    let mut png = std::io::Cursor::new(Vec::new());
    image::GrayImage::from_pixel(16, 16, image::Luma([9]))
        .write_to(&mut png, image::ImageFormat::Png)
        .unwrap();
    let header_only = png.into_inner()[..33].to_vec();
    let mut s = depth_suite();
    s.cases[0].images[0] = nmb_suite::Image::new("cut", ImageSource::Bytes(Arc::from(header_only)));
    let msg = plan(&s, &full()).next().unwrap().unwrap_err().to_string();
    assert!(
        msg.contains("case_1") && msg.contains("cut") && msg.contains("cannot decode png"),
        "{msg}"
    );
}

#[test]
fn changed_image_bytes_are_detected() {
    let mut s = depth_suite();
    s.cases[0].images[0].sha256 = Some("0".repeat(64));
    let err = plan(&s, &full()).next().unwrap().unwrap_err();
    assert!(
        err.to_string()
            .contains("changed since the suite was loaded"),
        "{err}"
    );
}

#[test]
fn multiple_choice_lists_options_and_asks_for_a_letter() {
    let mut t = task("q1", Family::MultipleChoice, "Which nerve is affected?");
    t.options = ["Facial", "Trigeminal", "Abducens", "Oculomotor"]
        .iter()
        .zip(["A", "B", "C", "D"])
        .map(|(text, l)| (l.to_string(), text.to_string()))
        .collect();
    let mut c = case("q1", vec![], vec![t]);
    c.ehr.clear();
    c.notes.clear();
    let p = only(&suite(vec![c]), &full());
    assert_eq!(p.template_id, "breadth-mcq-v1");
    assert_eq!(p.output, OutputFormat::Text);
    let text = text_of(&p.turns[0].user);
    let positions: Vec<usize> = ["A. Facial", "B. Trigeminal", "C. Abducens", "D. Oculomotor"]
        .iter()
        .map(|o| {
            text.find(o)
                .unwrap_or_else(|| panic!("{o} missing in {text}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]));
    assert!(text.contains("Answer: X"));
}

#[test]
fn closed_vqa_asks_yes_no_only_for_yes_no_questions() {
    let yes_no = task("v1", Family::ClosedVqa, "Is there a midline shift?");
    let choice = task("v2", Family::ClosedVqa, "Is this a T1 or a T2 image?");
    let open = task("v3", Family::OpenVqa, "Where is the lesion?");
    let s = suite(vec![case(
        "v",
        vec![inline_image("i", 3)],
        vec![yes_no, choice, open],
    )]);
    let planned = plan_all(&s, &full());
    let texts: Vec<String> = planned.iter().map(|p| text_of(&p.turns[0].user)).collect();
    assert!(texts[0].contains("yes or no"), "{}", texts[0]);
    assert!(!texts[1].contains("yes or no") && texts[1].contains("single word"));
    assert_eq!(planned[2].template_id, "breadth-open-v1");
    assert!(texts[2].contains("short phrase"));
    for p in &planned {
        assert_eq!(p.turns[0].user.image_count(), 1);
        assert!(
            matches!(p.turns[0].user.parts[0], Part::Image(_)),
            "image first"
        );
    }
}

#[test]
fn output_formats_follow_the_family() {
    let schema_for = |f: Family| match nmb_plan::output::output_format(f) {
        OutputFormat::Json { schema: Some(s) } => s,
        other => panic!("{f}: {other:?}"),
    };
    let dx = schema_for(Family::Differential);
    assert_eq!(
        dx["required"],
        serde_json::json!(["differential", "final_diagnosis", "rationale"])
    );
    assert_eq!(
        dx["properties"]["differential"]["items"]["required"],
        serde_json::json!(["diagnosis", "evidence"])
    );
    let lesion = schema_for(Family::Lesion);
    assert_eq!(
        lesion["required"],
        serde_json::json!(["lesion_type", "location", "findings"])
    );
    for f in [
        Family::Rationale,
        Family::ClosedVqa,
        Family::OpenVqa,
        Family::MultipleChoice,
    ] {
        assert_eq!(nmb_plan::output::output_format(f), OutputFormat::Text);
    }
    let t = only(&depth_suite(), &full());
    assert_eq!(
        t.output,
        nmb_plan::output::output_format(Family::Differential)
    );
}

#[test]
fn lesion_and_rationale_instructions() {
    let s = suite(vec![case(
        "c",
        vec![inline_image("i", 9)],
        vec![
            task("c/lesion", Family::Lesion, "Describe the lesion."),
            task("c/why", Family::Rationale, "Why?"),
        ],
    )]);
    let p = plan_all(&s, &full());
    let lesion = text_of(&p[0].turns[0].user);
    assert!(
        lesion.contains("\"lesion_type\"") && lesion.contains("\"location\""),
        "{lesion}"
    );
    let why = text_of(&p[1].turns[0].user);
    assert!(
        why.contains("\"rationale\"") && why.contains("plain text"),
        "{why}"
    );
}
