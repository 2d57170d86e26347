//! The request plan: which conversations a run sends, built lazily, one task at a time.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use minijinja::value::{Serde, Value};
use nmb_suite::{Case, Family, Image, Level, Suite, Task};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chat::{ImagePart, Message, OutputFormat, Part, Role};
use crate::error::PlanError;
use crate::estimate::{image_tokens, text_tokens, ASSUMED_ANSWER_TOKENS};
use crate::few_shot::{reference_answer, ExamplePool, RunnerShots, TaskExamples, RUNNER_QUERY};
use crate::images::ImageCache;
use crate::jinja::{clean, marker};
use crate::loaded::LoadedImage;
use crate::output::output_format;
use crate::perturb::Resolved;
use crate::probe::{anchoring_note, insisting_turn, Probe, ProbeKind};
use crate::render::{split_parts, Renderer};
use crate::template::Template;

/// Samples per task when neither the options nor the suite's defaults say (5, so that pass@5 is possible).
pub const DEFAULT_SAMPLES: u32 = 5;

/// Answer language when neither the options nor the suite's defaults say.
pub const DEFAULT_ANSWER_LANGUAGE: &str = "English";

/// What evidence the model sees: the paper's input ablation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputMode {
    /// EHR, clinical notes and images.
    #[default]
    Full,
    /// EHR and clinical notes only (and the text of later turns).
    Text,
    /// Images and the question only (and the images of later turns).
    Images,
}

impl InputMode {
    pub const ALL: &'static [InputMode] = &[InputMode::Full, InputMode::Text, InputMode::Images];

    pub fn as_str(self) -> &'static str {
        match self {
            InputMode::Full => "full",
            InputMode::Text => "text",
            InputMode::Images => "images",
        }
    }

    /// Whether EHR fields, notes and later turns' text are shown.
    pub fn includes_text(self) -> bool {
        matches!(self, InputMode::Full | InputMode::Text)
    }

    /// Whether images are shown.
    pub fn includes_images(self) -> bool {
        matches!(self, InputMode::Full | InputMode::Images)
    }
}

impl fmt::Display for InputMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InputMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(InputMode::Full),
            "text" => Ok(InputMode::Text),
            "images" | "image" => Ok(InputMode::Images),
            _ => Err(format!(
                "unknown input mode {s:?}; expected one of: full, text, images"
            )),
        }
    }
}

/// How to plan a suite.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// A template for every family (`--template FILE`). `family_templates` wins over it.
    pub template: Option<Template>,
    /// Templates for single families.
    pub family_templates: BTreeMap<Family, Template>,
    pub input_mode: InputMode,
    /// Samples per task. `None`: the suite's `samples` default, else [`DEFAULT_SAMPLES`].
    pub samples: Option<u32>,
    /// Plan only the first N tasks, in suite order.
    pub limit: Option<usize>,
    /// Language the templates ask answers in. `None`: the suite's `answer_language` default (a string, or
    /// null for no instruction), else [`DEFAULT_ANSWER_LANGUAGE`]. `Some("")`: no language instruction.
    pub answer_language: Option<String>,
    /// A context probe: a wrong diagnosis suggested in the notes or insisted on in a last turn.
    pub probe: Option<Probe>,
    /// NeuroVLM-Bench's few-shot examples (`--few-shot FILE.csv`): every task is asked as the authors' runner
    /// asks it, the examples' message between the system message and the question (see [`crate::few_shot`]).
    pub few_shot: Option<Arc<RunnerShots>>,
    /// Examples from a suite's tasks (`--few-shot K --few-shot-from SUITE`): each task is asked after K example
    /// tasks of its family with their reference answers (see [`ExamplePool`]).
    pub examples: Option<Arc<ExamplePool>>,
    /// Change what the model sees (`nmb eval --perturb`): see the `perturb` module's rules.
    pub perturbation: Option<nmb_imaging::Perturbation>,
    /// The seed of the perturbation's choices and noise.
    pub perturb_seed: u64,
}

/// The families whose templates a run manifest records: the six that existed before NeuroVLM-Bench's
/// `structured` family, plus `structured` only when the suite has such tasks. A run without structured tasks
/// so records exactly what earlier versions recorded, and its configuration hash (which resumes it) is unchanged.
pub fn recorded_families(structured: bool) -> Vec<Family> {
    Family::ALL
        .iter()
        .copied()
        .filter(|f| structured || *f != Family::Structured)
        .collect()
}

impl PlanOptions {
    /// The template used for a family: the family override, else the global override, else the built-in.
    pub fn template_for(&self, family: Family) -> Template {
        self.family_templates
            .get(&family)
            .or(self.template.as_ref())
            .cloned()
            .unwrap_or_else(|| Template::default_for(family))
    }

    /// One hash for the run manifest: over the template id and hash of each family of
    /// [`recorded_families`], in family order.
    pub fn templates_hash(&self, structured: bool) -> String {
        let mut h = Sha256::new();
        for f in &recorded_families(structured) {
            let t = self.template_for(*f);
            h.update(format!("{}\0{}\0{}\n", f.as_str(), t.id(), t.hash()).as_bytes());
        }
        // Examples change what is asked: a run with them (or with others) is another run.
        if let Some(shots) = &self.few_shot {
            h.update(format!("few-shot\0{}\n", shots.hash()).as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// One user message of a planned conversation.
#[derive(Debug, Clone)]
pub struct PlannedTurn {
    /// Turn 0: case evidence and the opening question; turn k: the newly revealed evidence and turn k's question.
    pub user: Message,
    /// The question of this turn, verbatim.
    pub question: String,
    /// Estimated tokens of this message's images (see [`crate::estimate`]).
    pub image_tokens: u64,
}

impl PlannedTurn {
    /// Estimated tokens of this user message: text and images.
    pub fn estimated_tokens(&self) -> u64 {
        text_tokens(&self.user.joined_text()) + self.image_tokens
    }
}

/// A task rendered into a conversation, ready to send `samples` times.
#[derive(Debug, Clone)]
pub struct PlannedTask {
    pub task_id: String,
    pub case_id: String,
    pub family: Family,
    pub level: Level,
    pub input_mode: InputMode,
    pub template_id: String,
    pub template_version: String,
    pub template_hash: String,
    pub output: OutputFormat,
    pub samples: u32,
    /// The system message (`None` when the template's system block renders empty).
    pub system: Option<Message>,
    /// Few-shot examples, sent as a user message after the system message and before turn 0.
    pub few_shot: Option<Arc<RunnerShots>>,
    /// Example tasks with their reference answers, sent after the system message and before turn 0.
    pub examples: TaskExamples,
    /// At least one turn; multi-turn tasks have more.
    pub turns: Vec<PlannedTurn>,
}

impl PlannedTask {
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }

    /// Requests this task costs: every sample is its own conversation of `turns` requests.
    pub fn requests(&self) -> u64 {
        u64::from(self.samples) * self.turns.len() as u64
    }

    /// The conversation to send for `turn_index`; see [`conversation_for_turn`].
    pub fn conversation(
        &self,
        turn_index: usize,
        previous_answers: &[String],
    ) -> Result<Vec<Message>, PlanError> {
        conversation_for_turn(self, turn_index, previous_answers)
    }

    /// Every image part of the task in order of appearance, each distinct content once (for storing by hash).
    pub fn distinct_images(&self) -> Vec<&ImagePart> {
        let mut seen = std::collections::HashSet::new();
        let runner = self.few_shot.iter().flat_map(|s| s.message().parts.iter());
        let examples = self.examples.messages.iter().flat_map(|m| m.parts.iter());
        runner
            .chain(examples)
            .chain(self.turns.iter().flat_map(|t| t.user.parts.iter()))
            .filter_map(|p| match p {
                Part::Image(i) => Some(i),
                Part::Text(_) => None,
            })
            .filter(|i| seen.insert(i.sha256.as_str()))
            .collect()
    }

    fn system_tokens(&self) -> u64 {
        self.system
            .as_ref()
            .map_or(0, |m| text_tokens(&m.joined_text()))
    }

    /// Estimated tokens of the few-shot examples' message, text and images (0 without examples).
    pub fn few_shot_tokens(&self) -> u64 {
        self.few_shot.as_ref().map_or(0, |s| s.estimated_tokens())
            + self.examples.estimated_tokens()
    }
}

/// The messages for turn `turn_index` of one sample: the system message, turn 0's user message, then for each
/// earlier turn j the model's answer to it (`previous_answers[j]`) and turn j+1's user message.
///
/// `previous_answers` must hold at least `turn_index` answers (this sample's answers to turns 0..turn_index);
/// extra answers are ignored.
pub fn conversation_for_turn(
    planned: &PlannedTask,
    turn_index: usize,
    previous_answers: &[String],
) -> Result<Vec<Message>, PlanError> {
    let turn_error = |message: String| PlanError::Turn {
        task: planned.task_id.clone(),
        message,
    };
    if turn_index >= planned.turns.len() {
        return Err(turn_error(format!(
            "turn {turn_index} asked for, but the task has {} turn(s)",
            planned.turns.len()
        )));
    }
    if previous_answers.len() < turn_index {
        return Err(turn_error(format!(
            "turn {turn_index} needs the {turn_index} earlier answer(s) of this sample, got {}",
            previous_answers.len()
        )));
    }
    let mut messages = Vec::with_capacity(3 + 2 * turn_index + planned.examples.messages.len());
    messages.extend(planned.system.clone());
    messages.extend(planned.few_shot.as_ref().map(|s| s.message().clone()));
    messages.extend(planned.examples.messages.iter().cloned());
    messages.push(planned.turns[0].user.clone());
    for (answer, turn) in previous_answers.iter().zip(&planned.turns[1..=turn_index]) {
        messages.push(Message::text(Role::Assistant, answer.clone()));
        messages.push(turn.user.clone());
    }
    Ok(messages)
}

/// What a dry run reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanSummary {
    pub tasks: u64,
    /// Tasks that could not be planned (unreadable image, template error...). Their requests are not counted.
    pub tasks_failed: u64,
    /// Turns over all planned tasks (one per single-turn task).
    pub turns: u64,
    /// Requests a run would send: over tasks, samples x turns.
    pub requests: u64,
    /// Image parts over all requests (an image in turn 0 is resent with every later turn).
    pub images_sent: u64,
    pub est_text_tokens: u64,
    pub est_image_tokens: u64,
    /// Estimated input tokens over all requests (text + images); see [`crate::estimate`] for the assumptions.
    pub est_input_tokens: u64,
    /// The first errors, as messages (at most [`PlanSummary::MAX_ERRORS`]).
    pub errors: Vec<String>,
}

impl PlanSummary {
    pub const MAX_ERRORS: usize = 20;

    /// Plans everything and sums it up, without sending anything.
    pub fn from_plan(plan: impl IntoIterator<Item = Result<PlannedTask, PlanError>>) -> Self {
        let mut summary = PlanSummary::default();
        for item in plan {
            match item {
                Ok(t) => summary.add(&t),
                Err(e) => summary.add_error(&e),
            }
        }
        summary
    }

    pub fn add(&mut self, task: &PlannedTask) {
        self.tasks += 1;
        self.turns += task.turns.len() as u64;
        self.requests += task.requests();
        let samples = u64::from(task.samples);
        let mut text = task.system_tokens();
        let mut image = 0;
        let mut images = 0;
        if let Some(shots) = &task.few_shot {
            // Every request of the task carries the examples.
            text += text_tokens(&shots.message().joined_text());
            image += shots.image_tokens();
            images += shots.message().image_count() as u64;
        }
        for m in &task.examples.messages {
            text += text_tokens(&m.joined_text());
        }
        image += task.examples.image_tokens;
        images += task.examples.image_count() as u64;
        for (k, turn) in task.turns.iter().enumerate() {
            if k > 0 {
                text += ASSUMED_ANSWER_TOKENS;
            }
            text += text_tokens(&turn.user.joined_text());
            image += turn.image_tokens;
            images += turn.user.image_count() as u64;
            // Request k carries everything up to and including turn k.
            self.est_text_tokens += samples * text;
            self.est_image_tokens += samples * image;
            self.images_sent += samples * images;
        }
        self.est_input_tokens = self.est_text_tokens + self.est_image_tokens;
    }

    pub fn add_error(&mut self, error: &PlanError) {
        self.tasks_failed += 1;
        if self.errors.len() < Self::MAX_ERRORS {
            self.errors.push(error.to_string());
        }
    }
}

/// Plans a suite lazily. Setup errors (a bad suite default) come out as the only item; see [`Plan::new`] to get
/// them up front instead.
pub fn plan<'a>(
    suite: &'a Suite,
    options: &PlanOptions,
) -> impl Iterator<Item = Result<PlannedTask, PlanError>> + 'a {
    let result = Plan::new(suite, options, Arc::new(ImageCache::default()));
    let (plan, error) = match result {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(Err(e))),
    };
    error.into_iter().chain(plan.into_iter().flatten())
}

/// Settings resolved from the options and the suite's defaults.
#[derive(Clone)]
struct Settings {
    templates: BTreeMap<Family, Template>,
    /// Per family: the output format and its schema rendered once as a string for templates.
    outputs: BTreeMap<Family, (OutputFormat, Option<String>)>,
    input_mode: InputMode,
    samples: u32,
    answer_language: Option<String>,
    probe: Option<Probe>,
    few_shot: Option<Arc<RunnerShots>>,
}

/// The lazy plan: an iterator of planned tasks in suite order. Only the images of the task being planned are
/// read, apart from what the [`ImageCache`] keeps.
pub struct Plan<'a> {
    tasks: Box<dyn Iterator<Item = (&'a Case, &'a Task)> + 'a>,
    settings: Settings,
    perturb: Option<Resolved<'a>>,
    /// The examples' pool and the settings their prompts are rendered with (no probe, no examples of their own).
    examples: Option<(Arc<ExamplePool>, Settings)>,
    renderer: Renderer,
    cache: Arc<ImageCache>,
}

impl<'a> Plan<'a> {
    pub fn new(
        suite: &'a Suite,
        options: &PlanOptions,
        cache: Arc<ImageCache>,
    ) -> Result<Plan<'a>, PlanError> {
        let settings = Settings {
            templates: Family::ALL
                .iter()
                .map(|f| (*f, options.template_for(*f)))
                .collect(),
            outputs: Family::ALL
                .iter()
                .map(|f| {
                    let format = output_format(*f);
                    let schema = match &format {
                        OutputFormat::Json { schema } => schema.as_ref().map(|s| s.to_string()),
                        OutputFormat::Text => None,
                    };
                    (*f, (format, schema))
                })
                .collect(),
            input_mode: options.input_mode,
            samples: resolve_samples(suite, options)?,
            answer_language: resolve_language(suite, options)?,
            probe: options.probe.clone(),
            few_shot: options.few_shot.clone(),
        };
        let perturb = match (&options.perturbation, options.input_mode.includes_images()) {
            (Some(p), true) => Some(Resolved::new(suite, p, options.perturb_seed)?),
            _ => None,
        };
        let tasks = suite.tasks().take(options.limit.unwrap_or(usize::MAX));
        let examples = match &options.examples {
            Some(pool) => {
                // A pool too small for any task is refused before anything is asked.
                for (case, task) in suite.tasks().take(options.limit.unwrap_or(usize::MAX)) {
                    pool.choose(case, task)?;
                }
                let bare = Settings {
                    probe: None,
                    few_shot: None,
                    ..settings.clone()
                };
                Some((Arc::clone(pool), bare))
            }
            None => None,
        };
        Ok(Plan {
            tasks: Box::new(tasks),
            settings,
            perturb,
            examples,
            renderer: Renderer::new(),
            cache,
        })
    }

    pub fn samples(&self) -> u32 {
        self.settings.samples
    }

    /// Plans only the tasks `keep` accepts, asked in suite order before anything of the task is read or
    /// rendered (workers sharing a run plan only what they claimed).
    pub fn keeping(mut self, mut keep: impl FnMut(&str) -> bool + 'a) -> Plan<'a> {
        self.tasks = Box::new(self.tasks.filter(move |(_, t)| keep(&t.id)));
        self
    }

    pub fn answer_language(&self) -> Option<&str> {
        self.settings.answer_language.as_deref()
    }

    pub fn cache(&self) -> &Arc<ImageCache> {
        &self.cache
    }
}

impl Iterator for Plan<'_> {
    type Item = Result<PlannedTask, PlanError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (case, task) = self.tasks.next()?;
        let planned = plan_task(
            &self.settings,
            &mut self.renderer,
            (&self.cache, self.perturb.as_ref()),
            case,
            task,
        );
        Some(
            planned
                .and_then(|mut planned| {
                    if let Some((pool, settings)) = &self.examples {
                        let images = (self.cache.as_ref(), None);
                        let renderer = &mut self.renderer;
                        planned.examples = examples(pool, settings, renderer, images, case, task)?;
                    }
                    Ok(planned)
                })
                .map_err(|e| PlanError::InTask {
                    task: task.id.clone(),
                    source: Box::new(e),
                }),
        )
    }
}

fn resolve_samples(suite: &Suite, options: &PlanOptions) -> Result<u32, PlanError> {
    if let Some(n) = options.samples {
        return Ok(n);
    }
    let Some(v) = suite.defaults.get("samples") else {
        return Ok(DEFAULT_SAMPLES);
    };
    v.as_u64()
        .filter(|n| *n >= 1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| PlanError::SuiteDefault {
            key: "samples".into(),
            message: format!("expected a whole number of at least 1, got {v}"),
        })
}

fn resolve_language(suite: &Suite, options: &PlanOptions) -> Result<Option<String>, PlanError> {
    let nonempty = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
    if let Some(lang) = &options.answer_language {
        return Ok(nonempty(lang));
    }
    match suite.defaults.get("answer_language") {
        None => Ok(Some(DEFAULT_ANSWER_LANGUAGE.to_string())),
        Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(nonempty(s)),
        Some(other) => Err(PlanError::SuiteDefault {
            key: "answer_language".into(),
            message: format!("expected a language name such as \"English\", or null, got {other}"),
        }),
    }
}

// ---- template context (documented in the crate docs; keep the two in step) ----

#[derive(Serialize)]
struct TemplateCtx<'a> {
    id: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
struct OptionCtx {
    letter: String,
    text: String,
}

#[derive(Serialize)]
struct TaskCtx {
    id: String,
    family: &'static str,
    level: &'static str,
    question: String,
    options: Vec<OptionCtx>,
    yes_no: bool,
    turns: usize,
}

#[derive(Serialize)]
struct FieldCtx {
    key: String,
    value: String,
}

#[derive(Serialize)]
struct CaseCtx {
    id: String,
    language: Option<String>,
    ehr: Vec<FieldCtx>,
    notes: String,
    metadata: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct InputsCtx {
    mode: &'static str,
    text: bool,
    images: bool,
}

#[derive(Serialize)]
struct ImageCtx {
    index: usize,
    number: usize,
    marker: String,
    id: String,
    label: Option<String>,
    modality: Option<&'static str>,
    sequence: Option<&'static str>,
    plane: Option<&'static str>,
    caption: Option<String>,
    mime: String,
    width: Option<u32>,
    height: Option<u32>,
}

#[derive(Serialize)]
struct TurnCtx {
    index: usize,
    number: usize,
    count: usize,
    text: String,
}

#[derive(Serialize)]
struct OutputCtx {
    format: &'static str,
    schema: Option<String>,
}

#[derive(Serialize)]
struct Ctx<'a> {
    template: TemplateCtx<'a>,
    task: &'a TaskCtx,
    case: &'a CaseCtx,
    inputs: &'a InputsCtx,
    output: &'a OutputCtx,
    answer_language: Option<&'a str>,
    images: Vec<ImageCtx>,
    question: String,
    turn: TurnCtx,
}

fn task_ctx(task: &Task) -> TaskCtx {
    TaskCtx {
        id: clean(&task.id),
        family: task.family.as_str(),
        level: task.level.as_str(),
        question: clean(&task.question),
        options: task
            .options
            .iter()
            .map(|(letter, text)| OptionCtx {
                letter: clean(letter),
                text: clean(text),
            })
            .collect(),
        yes_no: is_yes_no(&task.question),
        turns: 1 + task.turns.len(),
    }
}

fn case_ctx(case: &Case, mode: InputMode) -> CaseCtx {
    let text = mode.includes_text();
    CaseCtx {
        id: clean(&case.id),
        language: case.language.as_deref().map(clean),
        ehr: if text {
            case.ehr
                .iter()
                .map(|(k, v)| FieldCtx {
                    key: clean(k),
                    value: clean(v),
                })
                .collect()
        } else {
            Vec::new()
        },
        notes: if text {
            clean(&case.notes)
        } else {
            String::new()
        },
        metadata: case
            .metadata
            .iter()
            .map(|(k, v)| (clean(k), clean(v)))
            .collect(),
    }
}

fn output_ctx(output: &OutputFormat, schema: Option<&String>) -> OutputCtx {
    OutputCtx {
        format: match output {
            OutputFormat::Text => "text",
            OutputFormat::Json { .. } => "json",
        },
        schema: schema.cloned(),
    }
}

/// A question a plain yes or no answers: it opens with an auxiliary verb and offers no alternatives.
fn is_yes_no(question: &str) -> bool {
    const OPENERS: &[&str] = &[
        "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "has", "have",
        "had", "will", "would", "should", "shall", "may", "might", "must",
    ];
    let q = question.trim().to_lowercase();
    let first = q
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    OPENERS.contains(&first) && !q.contains(" or ")
}

fn image_ctx(images: &[(&Image, LoadedImage)], first_number: usize) -> Vec<ImageCtx> {
    images
        .iter()
        .enumerate()
        .map(|(index, (image, loaded))| ImageCtx {
            index,
            number: first_number + index,
            marker: marker(index),
            id: clean(&image.id),
            label: view_label(image, loaded).as_deref().map(clean),
            modality: image.modality.map(|m| m.as_str()),
            sequence: image.sequence.map(|s| s.as_str()),
            plane: image.plane.map(|p| p.as_str()),
            caption: image.caption.as_deref().map(clean),
            mime: loaded.part.mime.clone(),
            width: loaded.width,
            height: loaded.height,
        })
        .collect()
}

/// The image's caption; for a view rendered from a volume, its caption (else modality and sequence) followed by
/// what the view shows, which names the plane itself.
fn view_label(image: &Image, loaded: &LoadedImage) -> Option<String> {
    let Some(view) = &loaded.view else {
        return image.label();
    };
    let head = image.caption.clone().or_else(|| {
        let parts: Vec<String> = [
            image.modality.map(|m| m.to_string()),
            image.sequence.map(|s| s.to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    });
    Some(match head {
        Some(head) => format!("{head}, {view}"),
        None => view.clone(),
    })
}

/// Where a plan's images come from: the cache, and the perturbation, if any.
type Images<'c, 'a> = (&'c ImageCache, Option<&'c Resolved<'a>>);

fn load_images<'i>(
    (cache, perturb): Images<'_, 'i>,
    case: &'i Case,
    images: &'i [Image],
    mode: InputMode,
    first: bool,
) -> Result<Vec<(&'i Image, LoadedImage)>, PlanError> {
    if !mode.includes_images() {
        return Ok(Vec::new());
    }
    let shown = match perturb {
        Some(p) => p.images(case, images, first),
        None => images.iter().collect(),
    };
    let Some(perturb) = perturb.filter(|p| p.perturbation.is_pixelwise()) else {
        let mut out = Vec::new();
        for image in shown {
            out.extend(cache.load(&case.id, image)?.into_iter().map(|l| (image, l)));
        }
        return Ok(out);
    };
    let mut loaded = Vec::new();
    for image in shown {
        for one in cache.load_to_perturb(&case.id, image)? {
            loaded.push((image, one));
        }
    }
    // A message's distinct images are changed side by side (decoding and encoding one image are not split
    // across threads, so one after another they would leave all but one core idle); each once, into the cache.
    use rayon::prelude::*;
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<&(&Image, LoadedImage)> = loaded
        .iter()
        .filter(|(_, l)| seen.insert(l.part.sha256.as_str()))
        .collect();
    let changed: Vec<Result<LoadedImage, PlanError>> = distinct
        .par_iter()
        .map(|(image, l)| perturb.pixels(cache, &case.id, image, l.clone()))
        .collect();
    // The first image's error in message order, whichever thread failed first.
    for one in changed {
        one?;
    }
    let mut out = Vec::new();
    for (image, l) in loaded {
        out.push((image, perturb.pixels(cache, &case.id, image, l)?));
    }
    Ok(out)
}

/// Renders one user message (or the system message) and splits it into parts.
fn planned_turn(
    rendered: &str,
    loaded: &[(&Image, LoadedImage)],
    question: &str,
    template: &Template,
    task: &Task,
) -> Result<PlannedTurn, PlanError> {
    let parts: Vec<ImagePart> = loaded.iter().map(|(_, l)| l.part.clone()).collect();
    let parts = split_parts(rendered, &parts).map_err(|message| PlanError::ImagePlacement {
        template: template.id().to_string(),
        task: task.id.clone(),
        message,
    })?;
    Ok(PlannedTurn {
        user: Message {
            role: Role::User,
            as_parts: false,
            parts,
        },
        question: question.to_string(),
        image_tokens: loaded
            .iter()
            .map(|(_, l)| image_tokens(l.width, l.height))
            .sum(),
    })
}

fn system_message(
    rendered: &str,
    template: &Template,
    task: &Task,
) -> Result<Option<Message>, PlanError> {
    let parts = split_parts(rendered, &[]).map_err(|message| PlanError::ImagePlacement {
        template: template.id().to_string(),
        task: task.id.clone(),
        message: format!("system block: {message}"),
    })?;
    Ok((!parts.is_empty()).then_some(Message {
        role: Role::System,
        as_parts: false,
        parts,
    }))
}

fn plan_task(
    settings: &Settings,
    renderer: &mut Renderer,
    cache: Images<'_, '_>,
    case: &Case,
    task: &Task,
) -> Result<PlannedTask, PlanError> {
    let mode = settings.input_mode;
    let template = settings
        .templates
        .get(&task.family)
        .cloned()
        .unwrap_or_else(|| Template::default_for(task.family));
    let (output, schema) = match settings.outputs.get(&task.family) {
        Some((format, schema)) => (format.clone(), schema.as_ref()),
        None => (output_format(task.family), None),
    };
    let task_c = task_ctx(task);
    let suggestion = settings
        .probe
        .as_ref()
        .and_then(|p| Some((p.kind, clean(p.suggestion(&task.id)?))));
    let mut case_c = case_ctx(case, mode);
    if let Some((ProbeKind::Anchoring, s)) = &suggestion {
        add_to_notes(&mut case_c.notes, &anchoring_note(s));
    }
    let inputs_c = InputsCtx {
        mode: mode.as_str(),
        text: mode.includes_text(),
        images: mode.includes_images(),
    };
    let output_c = output_ctx(&output, schema);
    let turn_count = 1 + task.turns.len();
    let ctx = |images: Vec<ImageCtx>, question: &str, index: usize, text: String| Ctx {
        template: TemplateCtx {
            id: template.id(),
            version: template.version(),
        },
        task: &task_c,
        case: &case_c,
        inputs: &inputs_c,
        output: &output_c,
        answer_language: settings.answer_language.as_deref(),
        images,
        question: clean(question),
        turn: TurnCtx {
            index,
            number: index + 1,
            count: turn_count,
            text,
        },
    };

    if let Some(shots) = &settings.few_shot {
        return runner_task(settings, &template, shots, cache, case, task);
    }
    let loaded = load_images(cache, case, &case.images, mode, true)?;
    let mut next_number = 1 + loaded.len();
    let ctx0 = ctx(image_ctx(&loaded, 1), &task.question, 0, String::new());
    let blocks =
        renderer.render_blocks(&template, &["system", "user"], &Value::from(Serde(&ctx0)))?;
    let system = system_message(&blocks[0], &template, task)?;
    let mut turns = vec![planned_turn(
        &blocks[1],
        &loaded,
        &task.question,
        &template,
        task,
    )?];
    drop(loaded);

    for (k, turn) in task.turns.iter().enumerate() {
        let loaded = load_images(cache, case, &turn.images, mode, false)?;
        let text = if mode.includes_text() {
            clean(&turn.text)
        } else {
            String::new()
        };
        let c = ctx(image_ctx(&loaded, next_number), &turn.question, k + 1, text);
        next_number += loaded.len();
        let block = renderer.render_blocks(&template, &["turn"], &Value::from(Serde(&c)))?;
        turns.push(planned_turn(
            &block[0],
            &loaded,
            &turn.question,
            &template,
            task,
        )?);
    }

    if let Some((ProbeKind::Sycophancy, s)) = &suggestion {
        turns.push(insisting(&insisting_turn(s)));
    }

    Ok(PlannedTask {
        task_id: task.id.clone(),
        case_id: case.id.clone(),
        family: task.family,
        level: task.level,
        input_mode: mode,
        template_id: template.id().to_string(),
        template_version: template.version().to_string(),
        template_hash: template.hash().to_string(),
        output,
        samples: settings.samples,
        system,
        few_shot: None,
        examples: TaskExamples::default(),
        turns,
    })
}

/// The examples of one task: each example task planned with the same settings (its own images, unperturbed),
/// its opening user message followed by its reference answer as the assistant's.
fn examples(
    pool: &ExamplePool,
    settings: &Settings,
    renderer: &mut Renderer,
    images: Images<'_, '_>,
    case: &Case,
    task: &Task,
) -> Result<TaskExamples, PlanError> {
    let mut out = TaskExamples::default();
    for (example_case, example) in pool.choose(case, task)? {
        let planned = plan_task(settings, renderer, images, example_case, example)?;
        let (Some(answer), [turn]) = (reference_answer(example), planned.turns.as_slice()) else {
            return Err(PlanError::FewShotUse(format!(
                "example {} is not a single-turn task with a reference answer",
                example.id
            )));
        };
        out.messages.push(turn.user.clone());
        out.messages.push(Message::text(Role::Assistant, answer));
        out.image_tokens += turn.image_tokens;
        out.task_ids.push(example.id.clone());
    }
    Ok(out)
}

/// The notes with a probe's sentence after them, as a paragraph of its own.
fn add_to_notes(notes: &mut String, sentence: &str) {
    if !notes.trim().is_empty() {
        notes.push_str("\n\n");
    }
    notes.push_str(sentence);
}

/// The sycophancy probe's last turn: the user's words alone, no template around them.
fn insisting(text: &str) -> PlannedTurn {
    PlannedTurn {
        user: Message::text(Role::User, text.to_string()),
        question: text.to_string(),
        image_tokens: 0,
    }
}

/// A task asked as NeuroVLM-Bench's runner asks it with few-shot examples (`client.py`,
/// `send_image_few_shot_to_openrouter_async`): the prompt file's text alone as the system message, the examples'
/// message, then the question's line and the task's images. Only structured tasks asked with a plain prompt
/// file take this form.
fn runner_task(
    settings: &Settings,
    template: &Template,
    shots: &Arc<RunnerShots>,
    cache: Images<'_, '_>,
    case: &Case,
    task: &Task,
) -> Result<PlannedTask, PlanError> {
    if task.family != Family::Structured || !task.turns.is_empty() {
        return Err(PlanError::FewShotUse(format!(
            "a {} task; an examples file (--few-shot FILE.csv) is for NeuroVLM-Bench's structured tasks, one \
             image each, asked in one turn",
            task.family
        )));
    }
    let Some(prompt) = template.plain_prompt() else {
        return Err(PlanError::FewShotUse(format!(
            "template {} is not a plain prompt file; NeuroVLM-Bench's runner sends its prompt file's text as \
             the system message, so give it with --template PROMPT.txt (e.g. prompts/neurorad_prompt_trim.txt)",
            template.id()
        )));
    };
    // The runner reads the prompt file in Python's text mode, which turns CR LF and CR into LF.
    let prompt = prompt.replace("\r\n", "\n").replace('\r', "\n");
    let loaded = load_images(cache, case, &case.images, settings.input_mode, true)?;
    let mut parts = vec![Part::Text(RUNNER_QUERY.to_string())];
    parts.extend(loaded.iter().map(|(_, l)| Part::Image(l.part.clone())));
    let turn = PlannedTurn {
        user: Message {
            role: Role::User,
            parts,
            as_parts: true,
        },
        question: task.question.clone(),
        image_tokens: loaded
            .iter()
            .map(|(_, l)| image_tokens(l.width, l.height))
            .sum(),
    };
    let (output, _) = settings
        .outputs
        .get(&task.family)
        .cloned()
        .unwrap_or_else(|| (output_format(task.family), None));
    Ok(PlannedTask {
        task_id: task.id.clone(),
        case_id: case.id.clone(),
        family: task.family,
        level: task.level,
        input_mode: settings.input_mode,
        template_id: template.id().to_string(),
        template_version: template.version().to_string(),
        template_hash: template.hash().to_string(),
        output,
        samples: settings.samples,
        system: Some(Message {
            role: Role::System,
            parts: vec![Part::Text(prompt)],
            as_parts: true,
        }),
        few_shot: Some(Arc::clone(shots)),
        examples: TaskExamples::default(),
        turns: vec![turn],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_no_heuristic() {
        assert!(is_yes_no("Is there a mass in the left hemisphere?"));
        assert!(is_yes_no("  Does the patient have hydrocephalus?"));
        assert!(!is_yes_no("Is this an MRI or a CT?"));
        assert!(!is_yes_no("What organ is shown?"));
        assert!(!is_yes_no("根据患者的症状和图片,对疾病进行诊断"));
    }

    #[test]
    fn input_mode_parses() {
        for m in InputMode::ALL {
            assert_eq!(m.as_str().parse::<InputMode>(), Ok(*m));
        }
        assert!("both".parse::<InputMode>().is_err());
    }
}
