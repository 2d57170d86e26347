//! The sample suite's clinical content: fictional neurology cases, their image scenes and answer keys.
//!
//! Case text follows textbook presentations; it is written for exercising the harness, not for teaching or
//! clinical use. In multi-turn tasks the case itself holds only what is known at the first turn, and each later
//! turn reveals new evidence.

mod inflammatory;
mod progressive;
mod vascular;

use super::phantom::{Anatomy, Lesion, Scene, Template};
use crate::{Family, Level, Reference, Sequence};

pub struct CaseDef {
    pub id: &'static str,
    pub disease: &'static str,
    pub group: &'static str,
    /// Structured EHR fields, in order.
    pub ehr: &'static [(&'static str, &'static str)],
    pub notes: &'static str,
    pub scenes: Vec<Scene>,
    /// Images available from the start.
    pub images: Vec<Shot>,
    pub tasks: Vec<TaskDef>,
}

/// One image: a scene rendered with one sequence.
pub struct Shot {
    pub scene: usize,
    pub seq: Sequence,
}

pub struct TaskDef {
    pub suffix: &'static str,
    pub family: Family,
    pub level: Level,
    pub question: &'static str,
    pub turns: Vec<TurnDef>,
    pub reference: Reference,
}

pub struct TurnDef {
    pub text: &'static str,
    pub shots: Vec<Shot>,
    pub question: &'static str,
}

pub fn all() -> Vec<CaseDef> {
    vec![
        vascular::stroke_left_mca(),
        inflammatory::ms_relapsing(),
        progressive::alzheimers(),
        progressive::glioblastoma(),
        inflammatory::brain_abscess(),
        inflammatory::hsv_encephalitis(),
        progressive::cjd(),
        vascular::pres(),
        vascular::ich_hypertensive(),
        vascular::sah_aneurysmal(),
        inflammatory::lgi1_encephalitis(),
        vascular::sivd(),
        inflammatory::adem(),
    ]
}

// ---------------------------------------------------------------------------------------------------------------
// Builders shared by the case files.

pub const DX_QUESTION: &str = "Based on the clinical information and the images, what is the most likely \
diagnosis? Give a ranked differential diagnosis (up to 5), with the key supporting evidence for each.";

pub const LESION_QUESTION: &str =
    "Describe the main imaging abnormality: what type of lesion is it, and where \
exactly is it (side, lobe or structure)?";

pub const RATIONALE_QUESTION: &str =
    "What is the most likely diagnosis? Explain step by step how the clinical \
and imaging findings lead to it, and why the main alternatives are less likely.";

pub fn scene(template: Template, atrophy: f64, seed: u64, lesions: Vec<Lesion>) -> Scene {
    Scene {
        template,
        anatomy: Anatomy {
            atrophy,
            hippocampal_atrophy: 0.0,
            seed,
        },
        lesions,
    }
}

pub fn shot(scene: usize, seq: Sequence) -> Shot {
    Shot { scene, seq }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A differential-diagnosis task; `differential` is ranked, best first, the diagnosis itself included.
pub fn dx(level: Level, diagnosis: &str, synonyms: &[&str], differential: &[&str]) -> TaskDef {
    TaskDef {
        suffix: "dx",
        family: Family::Differential,
        level,
        question: DX_QUESTION,
        turns: Vec::new(),
        reference: Reference {
            diagnosis: Some(diagnosis.into()),
            synonyms: strings(synonyms),
            differential: strings(differential),
            ..Reference::default()
        },
    }
}

pub fn lesion_task(level: Level, lesion_type: &str, location: &str) -> TaskDef {
    TaskDef {
        suffix: "lesion",
        family: Family::Lesion,
        level,
        question: LESION_QUESTION,
        turns: Vec::new(),
        reference: Reference {
            lesion_type: Some(lesion_type.into()),
            lesion_location: Some(location.into()),
            ..Reference::default()
        },
    }
}

pub fn rationale_task(
    level: Level,
    diagnosis: &str,
    synonyms: &[&str],
    rationale: &str,
) -> TaskDef {
    TaskDef {
        suffix: "rationale",
        family: Family::Rationale,
        level,
        question: RATIONALE_QUESTION,
        turns: Vec::new(),
        reference: Reference {
            diagnosis: Some(diagnosis.into()),
            synonyms: strings(synonyms),
            rationale: Some(rationale.into()),
            ..Reference::default()
        },
    }
}

/// Turns a differential task into a multi-turn consult with its own opening question.
pub fn consult(
    mut task: TaskDef,
    opening: &'static str,
    turns: Vec<TurnDef>,
    rationale: &str,
) -> TaskDef {
    task.level = Level::MultiTurn;
    task.question = opening;
    task.turns = turns;
    task.reference.rationale = Some(rationale.into());
    task
}

pub fn turn(text: &'static str, shots: Vec<Shot>, question: &'static str) -> TurnDef {
    TurnDef {
        text,
        shots,
        question,
    }
}
