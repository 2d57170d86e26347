//! The questions a person answers in the browser (`nmb review answer`): each task's opening turn exactly as the
//! models get it, planned as the person's run plans it ([`answer_plan`]), its images put into the store for the
//! pages to show.

use std::sync::Arc;

use nmb_plan::{Part, PlanError, PlanOptions, Role};
use nmb_store::{ImageInput, Store};
use nmb_suite::{Family, Suite};

use super::{answer_plan, opening, HumanError};

/// A task as the person sees it: its opening turn exactly as the models got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Never to be shown (it may give the answer away).
    pub task_id: String,
    /// A differential task is answered with a ranked list.
    pub family: Family,
    /// The task's number of turns; only the first is asked.
    pub turns: u32,
    /// The system message.
    pub instructions: Option<String>,
    /// The user message, part by part, in order.
    pub parts: Vec<QuestionPart>,
}

/// One part of a question's user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionPart {
    Text(String),
    /// An image in the store (`Store::put_image`), by the SHA-256 of its bytes.
    Image {
        sha256: String,
    },
}

/// The questions of a suite, and the tasks that could not be planned (each left out, with its reason).
#[derive(Debug, Default)]
pub struct Questions {
    pub questions: Vec<Question>,
    pub left_out: Vec<PlanError>,
}

/// Each task's opening turn as the models get it (one sample per task), its images put into `store`.
pub fn questions(store: &Arc<Store>, suite: &Suite) -> Result<Questions, HumanError> {
    let options = PlanOptions {
        samples: Some(1),
        ..PlanOptions::default()
    };
    let plan = answer_plan(store.clone(), suite, &options).map_err(HumanError::PlanSuite)?;
    let mut out = Questions::default();
    for planned in plan {
        let planned = match planned {
            Ok(p) => p,
            Err(e) => {
                out.left_out.push(e);
                continue;
            }
        };
        let messages = opening(&planned)?;
        let instructions = messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.joined_text());
        let mut parts = Vec::new();
        for part in messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| &m.parts)
        {
            parts.push(match part {
                Part::Text(t) => QuestionPart::Text(t.clone()),
                Part::Image(img) => {
                    store.put_image(&ImageInput {
                        sha256: &img.sha256,
                        mime: &img.mime,
                        bytes: &img.bytes,
                    })?;
                    QuestionPart::Image {
                        sha256: img.sha256.clone(),
                    }
                }
            });
        }
        out.questions.push(Question {
            task_id: planned.task_id.clone(),
            family: planned.family,
            turns: planned.turn_count() as u32,
            instructions,
            parts,
        });
    }
    Ok(out)
}
