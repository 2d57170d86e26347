//! Few-shot prompts: NeuroVLM-Bench's runner mode ([`RunnerShots`]) and examples drawn from a suite's own tasks
//! ([`ExamplePool`]).
//!
//! Few-shot prompts as NeuroVLM-Bench's runner builds them (`client.py`, `send_image_few_shot_to_openrouter_async`,
//! ChatMED/neurovlm-bench at 6e87ba4).
//!
//! The runner sends three messages: the system message, its prompt file's text alone; one user message with the
//! examples (an introduction, then for each example a header `Example N — class: CLASS` and its image, then a
//! closing line); and the question as a user message of its own (one line of text, then the image). Every
//! content is a list of parts, and every image is the file's bytes as they are, in a base64 data URL.
//! [`RunnerShots`] reproduces that word for word, so that a run made by nmb and one made by the runner send the
//! same messages, with one deliberate difference: the runner labels every image `image/jpeg`, whatever its
//! format, and nmb labels each with its real type (the same bytes for JPEG files; for a PNG only the data URL's
//! `data:image/png` differs), because an API that checks the label (Anthropic's) refuses a PNG labelled JPEG.

use std::collections::{BTreeMap, HashMap};

use nmb_imaging::ImageSource;
use nmb_suite::formats::few_shot::FewShotExample;
use nmb_suite::{Case, Family, Image, Suite, Task};
use sha2::{Digest, Sha256};

use crate::chat::{Message, Part, Role};
use crate::error::PlanError;
use crate::estimate::{image_tokens, text_tokens};
use crate::images::ImageCache;

/// The introduction of the examples' message, as the runner writes it.
pub const RUNNER_INTRO: &str = "### FEW-SHOT EXAMPLES\n\
Below are example images and ONLY their class label. Use them to calibrate class boundaries.\n\
Allowed classes: tumor | stroke | multiple sclerosis | normal | other abnormalities\n";

/// The closing line of the examples' message.
pub const RUNNER_OUTRO: &str = "### END OF FEW-SHOT EXAMPLES\n\
Now analyze the next image and output ONLY the JSON as per the schema.";

/// The text before the image in the question's message.
pub const RUNNER_QUERY: &str = "Analyze this image and output ONLY the JSON per the schema.";

/// The examples of a NeuroVLM-Bench few-shot run, read and ready to send.
#[derive(Clone)]
pub struct RunnerShots {
    message: Message,
    image_tokens: u64,
    hash: String,
    /// `(class, image SHA-256)` of each example, in order.
    examples: Vec<(String, String)>,
}

impl std::fmt::Debug for RunnerShots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RunnerShots({} examples, {})",
            self.examples.len(),
            &self.hash[..12]
        )
    }
}

impl RunnerShots {
    /// Reads each example's image (as the file's bytes, which the runner sends as they are) and builds the
    /// examples' message. An unreadable image is an error naming its row.
    pub fn load(examples: &[FewShotExample]) -> Result<RunnerShots, PlanError> {
        let cache = ImageCache::new(0);
        let mut parts = vec![Part::Text(RUNNER_INTRO.to_string())];
        let mut recorded = Vec::new();
        let mut tokens = 0;
        for (i, example) in examples.iter().enumerate() {
            let image = Image::new(
                example.file_path.clone(),
                ImageSource::File(example.image.clone()),
            );
            let loaded = cache
                .load(&example.at, &image)
                .map_err(|e| PlanError::FewShot {
                    at: example.at.clone(),
                    message: e.to_string(),
                })?;
            let [loaded] = loaded.as_slice() else {
                return Err(PlanError::FewShot {
                    at: example.at.clone(),
                    message: "a volume is not an example image; expected a PNG or JPEG file".into(),
                });
            };
            tokens += image_tokens(loaded.width, loaded.height);
            let header = format!("Example {} — class: {}", i + 1, example.class);
            parts.push(Part::Text(header));
            parts.push(Part::Image(loaded.part.clone()));
            recorded.push((example.class.clone(), loaded.part.sha256.clone()));
        }
        parts.push(Part::Text(RUNNER_OUTRO.to_string()));
        let mut h = Sha256::new();
        h.update(b"nmb-few-shot\0neurovlm-runner\0");
        for (class, sha) in &recorded {
            h.update(format!("{class}\0{sha}\n").as_bytes());
        }
        Ok(RunnerShots {
            message: Message {
                role: Role::User,
                parts,
                as_parts: true,
            },
            image_tokens: tokens,
            hash: hex::encode(h.finalize()),
            examples: recorded,
        })
    }

    /// The examples' user message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// SHA-256 over the examples' classes and image hashes, in order: part of the run's identity.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// `(class, image SHA-256)` of each example, in order.
    pub fn examples(&self) -> &[(String, String)] {
        &self.examples
    }

    /// Estimated input tokens of the examples' message, text and images (see [`crate::estimate`]).
    pub fn estimated_tokens(&self) -> u64 {
        text_tokens(&self.message.joined_text()) + self.image_tokens
    }

    /// Estimated tokens of the examples' images.
    pub fn image_tokens(&self) -> u64 {
        self.image_tokens
    }
}

/// Few-shot examples drawn from a suite's own tasks (`nmb eval --few-shot K --few-shot-from SUITE[:FILTER]`):
/// before each question, K example tasks of the same family, each its prompt as the task's template renders it
/// (images included) followed by an assistant turn holding its reference answer as the family's answer format
/// asks for it ([`reference_answer`]).
///
/// The examples of a task are chosen from the pool's single-turn tasks of its family that have a reference
/// answer, never from a case with the task's `case_id`: those of the task's level when there are at least K of
/// them, else those of every level. They are spread over distinct classes (the reference's diagnosis, lesion
/// type, answer or choice) before a class repeats, and ordered by the seed, so one seed gives one choice.
pub struct ExamplePool {
    k: usize,
    seed: u64,
    suite: Suite,
    /// How the pool suite was named (its spec and filters), as the run records it.
    from: serde_json::Value,
    suite_hash: String,
    /// [`nmb_suite::task_hash`] of every pool task, by task id.
    hashes: HashMap<String, String>,
    /// The ids of the pool tasks that can be examples: single-turn, with the reference their answer needs.
    usable: std::collections::HashSet<String>,
}

impl std::fmt::Debug for ExamplePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ExamplePool({} of {}, seed {})",
            self.k, self.from, self.seed
        )
    }
}

/// The examples planned before one task's question.
#[derive(Debug, Clone, Default)]
pub struct TaskExamples {
    /// For each example its user message, then an assistant message with its reference answer.
    pub messages: Vec<Message>,
    /// Estimated tokens of the examples' images.
    pub image_tokens: u64,
    /// The example tasks' ids, in the order they are shown.
    pub task_ids: Vec<String>,
}

impl TaskExamples {
    /// Estimated input tokens of the examples, text and images (see [`crate::estimate`]).
    pub fn estimated_tokens(&self) -> u64 {
        let text: u64 = self
            .messages
            .iter()
            .map(|m| text_tokens(&m.joined_text()))
            .sum();
        text + self.image_tokens
    }

    /// Image parts over the examples' messages.
    pub fn image_count(&self) -> usize {
        self.messages.iter().map(|m| m.image_count()).sum()
    }
}

impl ExamplePool {
    /// A pool of `k` examples per task from `suite` (named by `from`, recorded as given), chosen with `seed`.
    /// Hashes the pool suite and each of its tasks, reading their images.
    pub fn new(
        suite: Suite,
        k: usize,
        seed: u64,
        from: serde_json::Value,
    ) -> Result<ExamplePool, PlanError> {
        let hashing = |e: nmb_suite::SuiteError| PlanError::FewShot {
            at: format!("suite {}", suite.id),
            message: e.to_string(),
        };
        let suite_hash = nmb_suite::suite_hash(&suite).map_err(hashing)?;
        let mut hashes = HashMap::new();
        let usable = suite
            .tasks()
            .filter(|(_, t)| t.turns.is_empty() && reference_answer(t).is_some())
            .map(|(_, t)| t.id.clone())
            .collect();
        for (case, task) in suite.tasks() {
            let hash = nmb_suite::task_hash(case, task).map_err(hashing)?;
            hashes.insert(task.id.clone(), hash);
        }
        Ok(ExamplePool {
            k,
            seed,
            suite,
            from,
            suite_hash,
            hashes,
            usable,
        })
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// The examples of `task` (of `case`), in the order they are shown; a pool with fewer than K candidates for
    /// it is an error naming the task and the count.
    pub fn choose(&self, case: &Case, task: &Task) -> Result<Vec<(&Case, &Task)>, PlanError> {
        let candidates: Vec<(&Case, &Task)> = self
            .suite
            .tasks()
            .filter(|(c, t)| {
                c.id != case.id && t.family == task.family && self.usable.contains(&t.id)
            })
            .collect();
        if candidates.len() < self.k {
            return Err(PlanError::FewShotUse(format!(
                "task {}: --few-shot {} needs {} examples of its family ({}) from other cases, and \
                 --few-shot-from {} has {} candidate(s) (single-turn {} tasks with a reference answer, not of \
                 case {})",
                task.id,
                self.k,
                self.k,
                task.family,
                self.pool_text(),
                candidates.len(),
                task.family,
                case.id
            )));
        }
        let same_level: Vec<(&Case, &Task)> = candidates
            .iter()
            .copied()
            .filter(|(_, t)| t.level == task.level)
            .collect();
        let pool = if same_level.len() >= self.k {
            same_level
        } else {
            candidates
        };
        Ok(self.stratified(&task.id, pool))
    }

    /// `pool` ordered by the seed within each class, the classes in the seed's order, then taken a class at a
    /// time: the first of every class, then the second of every class, until K are taken.
    fn stratified<'p>(
        &self,
        task_id: &str,
        pool: Vec<(&'p Case, &'p Task)>,
    ) -> Vec<(&'p Case, &'p Task)> {
        let key = |what: &str, x: &str| {
            let text = format!("nmb-few-shot\0{}\0{task_id}\0{what}\0{x}", self.seed);
            Sha256::digest(text.as_bytes()).to_vec()
        };
        let mut classes: BTreeMap<String, Vec<Candidate<'p>>> = BTreeMap::new();
        for (c, t) in pool {
            classes
                .entry(class_of(t).unwrap_or_default())
                .or_default()
                .push((c, t));
        }
        let mut groups: Vec<(Vec<u8>, Vec<Candidate<'p>>)> = classes
            .into_iter()
            .map(|(class, mut members)| {
                members.sort_by_cached_key(|(_, t)| key("task", &t.id));
                (key("class", &class), members)
            })
            .collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let mut chosen = Vec::with_capacity(self.k);
        for round in 0.. {
            let before = chosen.len();
            for (_, members) in &groups {
                if chosen.len() == self.k {
                    return chosen;
                }
                chosen.extend(members.get(round).copied());
            }
            if chosen.len() == before {
                break;
            }
        }
        chosen
    }

    /// The pool's [`nmb_suite::task_hash`] of an example task.
    pub fn task_hash(&self, task_id: &str) -> Option<&str> {
        self.hashes.get(task_id).map(String::as_str)
    }

    /// What a run records of its examples, part of its identity: K, the seed, the pool suite as named and its
    /// hash, and for each task the example ids with their [`nmb_suite::task_hash`]es. Tasks the pool cannot
    /// serve are left out (planning refuses them first).
    pub fn record(&self, suite: &Suite, limit: Option<usize>) -> serde_json::Value {
        let mut examples = serde_json::Map::new();
        for (case, task) in suite.tasks().take(limit.unwrap_or(usize::MAX)) {
            let Ok(chosen) = self.choose(case, task) else {
                continue;
            };
            let shown: Vec<serde_json::Value> = chosen
                .iter()
                .map(|(_, t)| serde_json::json!({"task": t.id, "hash": self.task_hash(&t.id)}))
                .collect();
            examples.insert(task.id.clone(), shown.into());
        }
        serde_json::json!({
            "k": self.k,
            "seed": self.seed,
            "from": self.from,
            "suite_hash": self.suite_hash,
            "examples": examples,
        })
    }

    /// The pool as a user names it: `SUITE`, or `SUITE:FILTER`.
    fn pool_text(&self) -> String {
        let spec = self.from["spec"].as_str().unwrap_or("?");
        let filters = self.from["filters"].as_array().into_iter().flatten();
        let filters: Vec<&str> = filters.filter_map(|f| f.as_str()).collect();
        match filters.as_slice() {
            [] => spec.to_string(),
            some => format!("{spec}:{}", some.join(",")),
        }
    }
}

/// An example task of the pool, with its case.
type Candidate<'p> = (&'p Case, &'p Task);

/// The class a task's examples are spread over: the reference's diagnosis (differential, rationale,
/// structured), lesion type, answer (VQA) or choice (multiple choice), without case or surrounding space.
pub fn class_of(task: &Task) -> Option<String> {
    let r = task.reference.as_ref()?;
    let class = match task.family {
        Family::Differential | Family::Rationale | Family::Structured => r.diagnosis.as_ref(),
        Family::Lesion => r.lesion_type.as_ref(),
        Family::ClosedVqa | Family::OpenVqa => r.answer.as_ref(),
        Family::MultipleChoice => r.choice.as_ref(),
    }?;
    Some(class.trim().to_lowercase())
}

/// A task's reference as an answer in the form its family asks for, or `None` when the reference lacks what
/// that answer needs: the JSON of the family's schema for differential diagnosis (the reference's diagnosis
/// first, then the rest of its differential, evidence left empty), lesion recognition (the rationale as
/// findings) and NeuroVLM-Bench's structured answer (confidences null); for a rationale the diagnosis and the
/// rationale as text; the answer for VQA; `Answer: X` for multiple choice.
pub fn reference_answer(task: &Task) -> Option<String> {
    let r = task.reference.as_ref()?;
    let text = |v: &Option<String>| given(v).unwrap_or_default().to_string();
    let answer = match task.family {
        Family::Differential => {
            let dx = given(&r.diagnosis)?;
            let mut ranked = vec![dx.to_string()];
            for d in &r.differential {
                let d = d.trim();
                if !d.is_empty() && !ranked.iter().any(|x| x.eq_ignore_ascii_case(d)) {
                    ranked.push(d.to_string());
                }
            }
            ranked.truncate(5);
            let differential: Vec<serde_json::Value> = ranked
                .iter()
                .map(|d| serde_json::json!({"diagnosis": d, "evidence": ""}))
                .collect();
            serde_json::json!({
                "differential": differential,
                "final_diagnosis": dx,
                "rationale": text(&r.rationale),
            })
            .to_string()
        }
        Family::Lesion => serde_json::json!({
            "lesion_type": given(&r.lesion_type)?,
            "location": text(&r.lesion_location),
            "findings": text(&r.rationale),
        })
        .to_string(),
        Family::Structured => serde_json::json!({
            "modality": given(&r.modality),
            "specialized_sequence": given(&r.specialized_sequence),
            "plane": given(&r.plane),
            "diagnosis_name": given(&r.diagnosis)?,
            "diagnosis_detailed": given(&r.diagnosis_detailed),
            "icd10_code": given(&r.icd10_code),
            "severity_score": given(&r.severity).and_then(|s| s.parse::<f64>().ok()),
            "diagnosis_confidence": null,
            "severity_confidence": null,
        })
        .to_string(),
        Family::Rationale => {
            let rationale = given(&r.rationale)?;
            match given(&r.diagnosis) {
                Some(dx) => format!("Diagnosis: {dx}\n\n{rationale}"),
                None => rationale.to_string(),
            }
        }
        Family::ClosedVqa | Family::OpenVqa => given(&r.answer)?.to_string(),
        Family::MultipleChoice => format!("Answer: {}", given(&r.choice)?),
    };
    Some(answer)
}

/// A reference field, trimmed, where it holds anything.
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}
