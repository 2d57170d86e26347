//! The pages where a clinician answers a suite's cases for a human baseline (`nmb review answer`).
//!
//! The server is a session of one person, `human:NAME`: it is handed the suite's tasks as the models got them
//! (each task's opening turn: the instructions, the text and the images by hash, already in the store), shows
//! them one at a time, never with a reference, and appends each answer to the store's `human_answers` (source
//! [`SOURCE`]; the newest answer to a task counts). A person answers in free text or as a ranked differential
//! (written into the answer in the JSON form the scorer reads, [`differential_answer`]), sees their progress and
//! can go back. "Finish" calls the [`Finish`] the command line gave, which builds or resumes the person's run
//! from the stored answers, and the page then shows the run id.
//!
//! Every response carries the viewer's security headers and strict CSP (no script), and a token when listening
//! beyond loopback, through the viewer's own guard. Posts carry a per-session form key in a hidden field and are
//! refused from another origin. This module knows nothing of plans or suites: the command line renders them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::header::{self, HeaderMap};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use nmb_store::{now_ms, HumanAnswer, Store};
use serde_json::Value;

use crate::common::PageError;
use crate::forms::{field, same_origin, CROSS_SITE};
use crate::html::escape;
use crate::{App, Bound, ServeError};

/// The `source` of an answer saved on these pages.
pub const SOURCE: &str = "review-answer";
/// Request bodies of these routes: room for a long answer, percent-encoded.
const BODY_LIMIT: usize = 64 * 1024;
/// Diagnoses a ranked differential can hold on the page.
const DIFFERENTIAL_INPUTS: usize = 5;

/// Builds or resumes the person's run from their stored answers; `Ok` holds the run id, `Err` what went wrong.
pub type Finish = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// One part of a task's opening message, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptPart {
    Text(String),
    /// An image already in the store (`Store::put_image`), by the SHA-256 of its bytes.
    Image {
        sha256: String,
    },
}

/// A task as the person sees it: its opening turn exactly as the models got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerTask {
    /// Never shown (it may give the answer away); pages number the tasks instead.
    pub task_id: String,
    /// `differential`, `lesion`, `rationale`, ...: a differential is offered a ranked list.
    pub family: String,
    /// The task's number of turns; only the first is asked here.
    pub turns: u32,
    /// The system message, shown folded.
    pub instructions: Option<String>,
    pub parts: Vec<PromptPart>,
}

/// Everything a session serves.
pub struct AnswerSession {
    /// `NAME` of `human:NAME`.
    pub human: String,
    pub suite_id: String,
    pub suite_hash: String,
    pub tasks: Vec<AnswerTask>,
    /// A random secret of this session; every form carries it back.
    pub form_key: String,
    pub finish: Finish,
}

/// The handlers' state: the session and the last finish's outcome.
struct Answering {
    store: Arc<Store>,
    session: AnswerSession,
    images: HashSet<String>,
    finished: Mutex<Option<Result<String, String>>>,
}

type Shared = Arc<Answering>;

/// The answer pages' routes; with a token, every request must carry it (as `nmb serve`'s).
pub fn answer_router(store: Arc<Store>, session: AnswerSession, token: Option<String>) -> Router {
    answers(store, session, crate::Gate::open(token))
}

fn answers(store: Arc<Store>, session: AnswerSession, gate: crate::Gate) -> Router {
    let images = session
        .tasks
        .iter()
        .flat_map(|t| &t.parts)
        .filter_map(|p| match p {
            PromptPart::Image { sha256 } => Some(sha256.clone()),
            PromptPart::Text(_) => None,
        })
        .collect();
    let guard = App {
        store: store.clone(),
        gate,
    };
    let state = Arc::new(Answering {
        store,
        session,
        images,
        finished: Mutex::new(None),
    });
    Router::new()
        .route("/", get(index))
        .route("/style.css", get(style))
        .route("/tasks/{n}", get(task_page).post(save))
        .route("/finish", post(finish))
        .route("/images/{sha256}", get(image))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(guard, crate::guard))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

impl Bound {
    /// Answers the answer pages' requests until `shutdown` completes, then lets requests in flight end.
    pub async fn run_answers(
        self,
        store: Arc<Store>,
        session: AnswerSession,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let app = answers(store, session, self.gate);
        crate::listen::serve(self.listener, app, self.limits, shutdown)
            .await
            .map_err(ServeError::Serve)
    }
}

pub use nmb_plan::output::differential_answer;

/// The diagnoses of an answer [`differential_answer`] wrote, to show it again in the form.
fn differential_of(text: &str) -> Option<Vec<String>> {
    let v: Value = serde_json::from_str(text).ok()?;
    let list = v.get("differential")?.as_array()?;
    let dx: Option<Vec<String>> = list
        .iter()
        .map(|d| d.get("diagnosis")?.as_str().map(str::to_string))
        .collect();
    dx.filter(|d| differential_answer(d) == text)
}

/// Why a request is answered with an error page.
enum Refused {
    Forbidden(&'static str),
    NotFound,
    Page(PageError),
}

impl From<nmb_store::StoreError> for Refused {
    fn from(e: nmb_store::StoreError) -> Self {
        Refused::Page(PageError::Store(e))
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Forbidden(why) => {
                (StatusCode::FORBIDDEN, message_page("403 Forbidden", why)).into_response()
            }
            Refused::NotFound => PageError::NotFound("no such page".into()).into_response(),
            Refused::Page(e) => e.into_response(),
        }
    }
}

/// Runs a handler's store work off the async threads.
async fn blocking<F>(state: &Shared, f: F) -> Response
where
    F: FnOnce(&Answering) -> Result<Response, Refused> + Send + 'static,
{
    let state = state.clone();
    match tokio::task::spawn_blocking(move || f(&state)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.into_response(),
        Err(_) => PageError::Internal.into_response(),
    }
}

impl Answering {
    /// The newest answer to turn 0 of each task, by task id.
    fn answers(&self) -> Result<HashMap<String, String>, Refused> {
        let s = &self.session;
        Ok(self
            .store
            .human_answers(&s.human, &s.suite_hash)?
            .into_iter()
            .filter(|a| a.turn_index == 0)
            .map(|a| (a.task_id, a.text))
            .collect())
    }

    /// `n` (1-based) as a task.
    fn task(&self, n: &str) -> Result<(usize, &AnswerTask), Refused> {
        let n: usize = n.parse().map_err(|_| Refused::NotFound)?;
        let task = n
            .checked_sub(1)
            .and_then(|i| self.session.tasks.get(i))
            .ok_or(Refused::NotFound)?;
        Ok((n, task))
    }

    fn progress(&self, answers: &HashMap<String, String>) -> String {
        let total = self.session.tasks.len();
        let done = self
            .session
            .tasks
            .iter()
            .filter(|t| answers.contains_key(&t.task_id))
            .count();
        format!("<p id=\"progress\">{done} of {total} answered</p>")
    }
}

/// Refuses a post without this session's form key, or one another site's page made.
fn check_post(
    state: &Answering,
    headers: &HeaderMap,
    form: &[(String, String)],
) -> Result<(), Refused> {
    if !same_origin(headers) {
        return Err(Refused::Forbidden(CROSS_SITE));
    }
    match field(form, "form_key") {
        Some(k) if crate::same(k, &state.session.form_key) => Ok(()),
        _ => Err(Refused::Forbidden(
            "This form is out of date (the server was restarted?). Go back, reload the page and save again.",
        )),
    }
}

async fn style() -> Response {
    let css = format!("{}{STYLE}", crate::html::STYLE);
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], css).into_response()
}

async fn not_found() -> Response {
    Refused::NotFound.into_response()
}

/// `GET /`: progress, every task with whether it has an answer, and the finish button.
async fn index(State(state): State<Shared>) -> Response {
    blocking(&state, |s| {
        let answers = s.answers()?;
        let mut body = format!(
            "<h1>Answer the cases</h1><p class=\"muted\">{} · suite {} · {} questions. Each question is shown \
             exactly as the models got it; the reference answer is never shown. Every answer is stored when \
             you save it, and you can come back to change it.</p>",
            escape(&format!("human:{}", s.session.human)),
            escape(&s.session.suite_id),
            s.session.tasks.len()
        );
        body.push_str(&s.progress(&answers));
        finished_note(s, &mut body);
        body.push_str("<table id=\"tasks\"><tr><th>question</th><th>kind</th><th>answered</th></tr>");
        for (i, t) in s.session.tasks.iter().enumerate() {
            let answered = answers.contains_key(&t.task_id);
            let _ = write!(
                body,
                "<tr><td><a href=\"/tasks/{n}\">Question {n}</a></td><td>{}</td><td class=\"{}\">{}</td></tr>",
                escape(&kind(t)),
                if answered { "ok" } else { "pending" },
                if answered { "answered" } else { "not yet" },
                n = i + 1
            );
        }
        body.push_str("</table>");
        let next = s
            .session
            .tasks
            .iter()
            .position(|t| !answers.contains_key(&t.task_id))
            .unwrap_or(0);
        if !s.session.tasks.is_empty() {
            let _ = write!(
                body,
                "<p><a id=\"continue\" href=\"/tasks/{}\">Continue answering</a></p>",
                next + 1
            );
        }
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/finish\" class=\"finish\">{}<button id=\"finish\">Finish: build \
             the run from my answers</button> <span class=\"muted\">Unanswered questions stay open (recorded \
             as \"no answer\"); you can answer them later and finish again.</span></form>",
            key_input(s)
        );
        Ok(answer_page("Answer the cases", &body).into_response())
    })
    .await
}

/// The last finish's outcome, if any.
fn finished_note(s: &Answering, body: &mut String) {
    let finished = s.finished.lock().unwrap_or_else(|p| p.into_inner());
    match finished.as_ref() {
        Some(Ok(run_id)) => {
            let _ = write!(
                body,
                "<p class=\"done\">Your answers are recorded as run <code id=\"run-id\">{}</code>.</p>",
                escape(run_id)
            );
        }
        Some(Err(why)) => {
            let _ = write!(
                body,
                "<p class=\"problem\" id=\"finish-error\">The run could not be built: {}</p>",
                escape(why)
            );
        }
        None => {}
    }
}

fn key_input(s: &Answering) -> String {
    format!(
        "<input type=\"hidden\" name=\"form_key\" value=\"{}\">",
        escape(&s.session.form_key)
    )
}

/// What kind of question a task is, in words.
fn kind(t: &AnswerTask) -> String {
    let family = match t.family.as_str() {
        "differential" => "Differential diagnosis",
        "lesion" => "Lesion",
        "rationale" => "Diagnosis with rationale",
        "closed_vqa" => "Yes / no",
        "open_vqa" => "Short answer",
        "multiple_choice" => "Multiple choice",
        other => other,
    };
    if t.turns > 1 {
        format!("{family} (consult, step 1 of {})", t.turns)
    } else {
        family.to_string()
    }
}

/// `GET /tasks/{n}`: one question with its images and the answer form.
async fn task_page(State(state): State<Shared>, Path(n): Path<String>) -> Response {
    blocking(&state, move |s| {
        let (n, task) = s.task(&n)?;
        let answers = s.answers()?;
        let draft = Draft::of_saved(task, answers.get(&task.task_id).map(String::as_str));
        Ok(question_page(s, n, task, &answers, &draft, None).into_response())
    })
    .await
}

/// The question page: the prompt, `problem` (why a post was refused) and the form filled with `draft`, then the
/// saved answer.
fn question_page(
    s: &Answering,
    n: usize,
    task: &AnswerTask,
    answers: &HashMap<String, String>,
    draft: &Draft,
    problem: Option<&str>,
) -> Html<String> {
    let total = s.session.tasks.len();
    let mut body = String::new();
    let _ = write!(body, "<nav class=\"pager\">");
    if n > 1 {
        let _ = write!(
            body,
            "<a id=\"prev\" href=\"/tasks/{}\">← Previous</a>",
            n - 1
        );
    }
    let _ = write!(body, "<a href=\"/\">All questions</a>");
    if n < total {
        let _ = write!(body, "<a id=\"next\" href=\"/tasks/{}\">Next →</a>", n + 1);
    }
    body.push_str("</nav>");
    body.push_str(&s.progress(answers));
    let _ = write!(
        body,
        "<h1>Question {n} of {total}</h1><p class=\"muted\">{}</p>",
        escape(&kind(task))
    );
    if task.turns > 1 {
        body.push_str(
            "<p class=\"note\">This is the first step of a consult; only this step is asked here.</p>",
        );
    }
    prompt_html(task, &mut body);
    if let Some(p) = problem {
        let _ = write!(
            body,
            "<p class=\"problem\" id=\"problem\">{}</p>",
            escape(p)
        );
    }
    form_html(s, n, task, draft, &mut body);
    if let Some(saved) = answers.get(&task.task_id) {
        let _ = write!(
            body,
            "<h2>Saved answer</h2><pre class=\"answer\" id=\"saved\">{}</pre>",
            escape(saved)
        );
    }
    answer_page(&format!("Question {n} of {total}"), &body)
}

fn prompt_html(task: &AnswerTask, body: &mut String) {
    if let Some(i) = &task.instructions {
        let _ = write!(
            body,
            "<details class=\"instructions\"><summary>Instructions the models were given</summary><pre>{}</pre>\
             </details>",
            escape(i)
        );
    }
    body.push_str("<section class=\"prompt\" id=\"prompt\">");
    for part in &task.parts {
        match part {
            PromptPart::Text(t) => {
                let _ = write!(body, "<pre class=\"prompt-text\">{}</pre>", escape(t));
            }
            PromptPart::Image { sha256 } => {
                let _ = write!(
                    body,
                    "<img class=\"case\" src=\"/images/{0}\" alt=\"case image {0:.12}\">",
                    escape(sha256)
                );
            }
        }
    }
    body.push_str("</section>");
}

/// What the answer form shows: the ranked diagnoses and the free text.
struct Draft {
    dx: Vec<String>,
    text: String,
}

impl Draft {
    /// The saved answer, in the form it was given; a lesion task without one gets its labelled lines.
    fn of_saved(task: &AnswerTask, saved: Option<&str>) -> Draft {
        match saved.map(|t| (differential_of(t), t)) {
            Some((Some(dx), _)) => Draft {
                dx,
                text: String::new(),
            },
            Some((None, t)) => Draft {
                dx: Vec::new(),
                text: t.to_string(),
            },
            None if task.family == "lesion" => Draft {
                dx: Vec::new(),
                text: LESION_LINES.to_string(),
            },
            None => Draft {
                dx: Vec::new(),
                text: String::new(),
            },
        }
    }

    /// What a refused post held, to show it again.
    fn of_form(form: &[(String, String)]) -> Draft {
        Draft {
            dx: form
                .iter()
                .filter(|(k, _)| k == "dx")
                .map(|(_, v)| v.clone())
                .collect(),
            text: field(form, "answer").unwrap_or("").to_string(),
        }
    }
}

/// The labelled lines a lesion answer needs, offered in an empty form.
const LESION_LINES: &str = "Lesion type: \nLocation: \n";

fn form_html(s: &Answering, n: usize, task: &AnswerTask, draft: &Draft, body: &mut String) {
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/tasks/{n}\" class=\"answer\" id=\"answer-form\">{}",
        key_input(s)
    );
    if task.family == "differential" {
        body.push_str(
            "<fieldset id=\"differential\"><legend>Ranked differential, most likely first</legend>",
        );
        for i in 0..DIFFERENTIAL_INPUTS {
            let _ = write!(
                body,
                "<label>{} <input type=\"text\" name=\"dx\" value=\"{}\" maxlength=\"300\"></label>",
                i + 1,
                escape(draft.dx.get(i).map_or("", String::as_str))
            );
        }
        body.push_str(
            "</fieldset><p class=\"muted\">Or answer in free text below (leave the list empty). For a diagnosis \
             in free text, write a line <code>Final diagnosis: …</code>.</p>",
        );
    } else if task.family == "lesion" {
        body.push_str(
            "<p class=\"muted\">Give the lesion type and its location on the labelled lines (add \
             <code>Findings: …</code> if you like).</p>",
        );
    }
    let _ = write!(
        body,
        "<label class=\"free\">Answer<textarea name=\"answer\" rows=\"8\">{}</textarea></label>\
         <p><button name=\"go\" value=\"next\" id=\"save-next\">Save and next</button> \
         <button name=\"go\" value=\"stay\" id=\"save\">Save</button></p></form>",
        escape(&draft.text)
    );
}

/// The answer a form holds: a ranked differential or free text, not both, not neither.
fn answer_of(form: &[(String, String)]) -> Result<String, &'static str> {
    let dx: Vec<String> = form
        .iter()
        .filter(|(k, v)| k == "dx" && !v.trim().is_empty())
        .map(|(_, v)| v.trim().to_string())
        .collect();
    // Browsers send a textarea's line breaks as CRLF; answers keep plain newlines, as imported ones do.
    let text = field(form, "answer").unwrap_or("").replace("\r\n", "\n");
    let text = text.trim();
    let template_only = text
        .lines()
        .all(|l| matches!(l.trim(), "" | "Lesion type:" | "Location:"));
    match (dx.is_empty(), text.is_empty() || template_only) {
        (false, true) => Ok(differential_answer(&dx)),
        (true, false) => Ok(text.to_string()),
        (false, false) => {
            Err("Give either the ranked differential or a free-text answer, not both: empty one of them.")
        }
        (true, true) => Err("The answer is empty: write an answer, or at least one diagnosis."),
    }
}

/// `POST /tasks/{n}`: appends the answer (unless it is the saved one) and moves on.
async fn save(
    State(state): State<Shared>,
    Path(n): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    blocking(&state, move |s| {
        check_post(s, &headers, &form)?;
        let (n, task) = s.task(&n)?;
        let answers = s.answers()?;
        let text = match answer_of(&form) {
            Ok(t) => t,
            Err(problem) => {
                let draft = Draft::of_form(&form);
                let page = question_page(s, n, task, &answers, &draft, Some(problem));
                return Ok((StatusCode::BAD_REQUEST, page).into_response());
            }
        };
        if answers.get(&task.task_id) != Some(&text) {
            let answer = HumanAnswer {
                task_id: task.task_id.clone(),
                turn_index: 0,
                created_ms: now_ms(),
                source: SOURCE.to_string(),
                text,
            };
            s.store
                .append_human_answer(&s.session.human, &s.session.suite_hash, &answer)?;
        }
        let to = match field(&form, "go") {
            Some("stay") => format!("/tasks/{n}"),
            _ if n < s.session.tasks.len() => format!("/tasks/{}", n + 1),
            _ => "/".to_string(),
        };
        Ok(Redirect::to(&to).into_response())
    })
    .await
}

/// `POST /finish`: builds or resumes the run (one at a time), then shows its id on the index.
async fn finish(
    State(state): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    blocking(&state, move |s| {
        check_post(s, &headers, &form)?;
        let outcome = if s.answers()?.is_empty() {
            Err("there are no answers yet: answer at least one question first".to_string())
        } else {
            (s.session.finish)()
        };
        *s.finished.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
        Ok(Redirect::to("/").into_response())
    })
    .await
}

/// `GET /images/{sha256}`: an image of one of the session's questions (no other image of the store).
async fn image(State(state): State<Shared>, Path(sha256): Path<String>) -> Response {
    blocking(&state, move |s| {
        if !s.images.contains(&sha256) {
            return Err(Refused::NotFound);
        }
        let img = s.store.image(&sha256)?.ok_or(Refused::NotFound)?;
        Ok(([(header::CONTENT_TYPE, img.mime)], img.bytes).into_response())
    })
    .await
}

/// A whole answer page: `title` is plain text, `body` is HTML already escaped.
fn answer_page(title: &str, body: &str) -> Html<String> {
    crate::html::framed(title, "nmb · answer the cases", body)
}

fn message_page(title: &str, message: &str) -> Html<String> {
    answer_page(
        title,
        &format!("<h1>{}</h1><p>{}</p>", escape(title), escape(message)),
    )
}

/// Added to the viewer's stylesheet on these pages.
const STYLE: &str = r#"
img.case { display: block; max-width: 100%; height: auto; margin: 8px 0; border: 1px solid #d8dce3; background: #000; }
pre.prompt-text { background: #fff; border: none; padding: 0; font: inherit; }
form.answer { margin: 14px 0; }
form.answer fieldset { border: 1px solid #d8dce3; padding: 8px 12px; display: flex; flex-direction: column; gap: 6px; max-width: 640px; }
form.answer fieldset input { width: 520px; max-width: 90%; }
label.free { display: flex; flex-direction: column; gap: 4px; max-width: 900px; font-weight: 600; }
label.free textarea { font: inherit; font-weight: normal; }
form.answer button, form.finish button { font: inherit; padding: 5px 14px; }
p.problem { background: #fdecea; border: 1px solid #f3b3ad; padding: 6px 10px; }
p.done { background: #e8f6ee; border: 1px solid #9fd8b4; padding: 6px 10px; }
details.instructions { margin: 8px 0; color: #4b5565; }
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_score::parse::find_json_object;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_differential_is_the_json_the_scorer_reads_first() {
        let dx = [
            "Multiple sclerosis".to_string(),
            " ".to_string(),
            "ADEM: acute disseminated".to_string(),
            "Neuromyelitis optica \"NMO\" <b>".to_string(),
        ];
        let text = differential_answer(&dx);
        let obj = find_json_object(&text).expect("one JSON object");
        assert_eq!(obj["final_diagnosis"], "Multiple sclerosis");
        assert_eq!(obj["differential"][1]["rank"], 2);
        assert_eq!(
            obj["differential"][1]["diagnosis"],
            "ADEM: acute disseminated"
        );
        assert_eq!(obj["differential"].as_array().unwrap().len(), 3);
        assert_eq!(
            differential_of(&text),
            Some(vec![
                "Multiple sclerosis".to_string(),
                "ADEM: acute disseminated".to_string(),
                "Neuromyelitis optica \"NMO\" <b>".to_string()
            ])
        );
        assert_eq!(differential_of("{\"differential\": []} plus prose"), None);
    }

    #[test]
    fn a_form_holds_a_differential_or_text_not_both() {
        let dx = answer_of(&pairs(&[("dx", "Stroke"), ("dx", ""), ("answer", "")])).unwrap();
        assert_eq!(differential_of(&dx), Some(vec!["Stroke".to_string()]));
        assert_eq!(
            answer_of(&pairs(&[("dx", ""), ("answer", " Final diagnosis: MS ")])).unwrap(),
            "Final diagnosis: MS"
        );
        assert!(answer_of(&pairs(&[("dx", "Stroke"), ("answer", "MS")])).is_err());
        assert!(answer_of(&pairs(&[("dx", " "), ("answer", "  ")])).is_err());
        // The lesion template left untouched is no answer.
        assert!(answer_of(&pairs(&[("answer", "Lesion type: \r\nLocation: \r\n")])).is_err());
        assert_eq!(
            answer_of(&pairs(&[(
                "answer",
                "Lesion type: infarct\r\nLocation: pons\r\n"
            )]))
            .unwrap(),
            "Lesion type: infarct\nLocation: pons"
        );
    }
}
