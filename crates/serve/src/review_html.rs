//! The review pages' HTML: the grading page of one item, the "done" page and short messages. Everything a model
//! or a reviewer wrote is escaped; nothing here names a run, a model, a judge or another reviewer.

use std::fmt::Write as _;

use axum::response::Html;
use nmb_chat::{Role, StoredMessage, StoredPart};
use nmb_results::Rubric;
use nmb_review::{GradeForm, COMMENT_LIMIT, TAXONOMY, VERDICTS};

use crate::html::{escape, thinking_block, url_encode};

/// Served after the viewer's stylesheet from `/review.css`.
pub(crate) const STYLE: &str = r#"
header.review-head { display: flex; flex-wrap: wrap; align-items: center; gap: 14px; }
header.review-head .brand { font-weight: 600; }
header.review-head progress { width: 220px; height: 10px; }
.progress-text { font-size: 16px; font-weight: 600; font-variant-numeric: tabular-nums; }
header.review-head nav { margin-left: auto; display: flex; gap: 14px; }
.review-grid { display: grid; grid-template-columns: minmax(0, 1fr) 470px; gap: 24px; align-items: start; }
@media (max-width: 900px) { .review-grid { grid-template-columns: minmax(0, 1fr); } }
.case .message { margin: 8px 0 14px; }
.case summary.role { cursor: pointer; }
.case .role { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #4b5565; font-weight: 600; }
.case pre.answer { background: #fffdf3; border-color: #e8dcae; }
form.grade { position: sticky; top: 8px; max-height: calc(100vh - 16px); overflow-y: auto; box-sizing: border-box; border: 1px solid #d8dce3; border-radius: 8px; padding: 10px 14px 14px; background: #fbfcfd; }
@media (max-width: 900px) { form.grade { position: static; max-height: none; } }
form.grade fieldset { border: 0; border-top: 1px solid #e3e6eb; margin: 8px 0 0; padding: 8px 0 0; min-width: 0; }
form.grade legend { font-weight: 600; padding: 0; }
form.grade .desc { font-size: 12px; color: #4b5565; margin: 2px 0 6px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; }
.chip { position: relative; }
.criterion { display: block; margin: 4px 0; }
.criterion.harm span:first-of-type { color: #8a2d00; }
.criterion input:focus-visible { outline: 2px solid #1a56b0; outline-offset: 2px; }
.chip input { position: absolute; opacity: 0; width: 1px; height: 1px; margin: 0; }
.chip span { display: inline-block; min-width: 30px; text-align: center; padding: 5px 10px; border: 1px solid #b8c0cc; border-radius: 6px; background: #fff; cursor: pointer; font-variant-numeric: tabular-nums; }
.chip span:hover { border-color: #1a56b0; }
.chip input:checked + span { background: #1a56b0; border-color: #1a56b0; color: #fff; }
.chip input:focus-visible + span { outline: 3px solid #f0b429; outline-offset: 1px; }
.verdict .chip span { min-width: 96px; padding: 8px 12px; font-weight: 600; }
.verdict .chip.correct input:checked + span { background: #17803d; border-color: #17803d; }
.verdict .chip.partly input:checked + span { background: #b7791f; border-color: #b7791f; }
.verdict .chip.incorrect input:checked + span { background: #b42318; border-color: #b42318; }
.verdict .chip.skip input:checked + span { background: #4b5565; border-color: #4b5565; }
.chip kbd, .keys kbd { font: 11px ui-monospace, monospace; border: 1px solid #c5cbd3; border-bottom-width: 2px; border-radius: 3px; padding: 0 4px; background: #f7f8fa; color: #1d2330; }
ul.anchors { list-style: none; margin: 6px 0 0; padding: 0; font-size: 12px; color: #374151; }
ul.anchors li { margin: 1px 0; }
ul.anchors b { display: inline-block; min-width: 16px; }
form.grade label.field { display: block; margin-top: 10px; font-weight: 600; }
form.grade select, form.grade textarea { display: block; width: 100%; box-sizing: border-box; margin-top: 4px; font: inherit; font-weight: normal; }
form.grade textarea { min-height: 70px; }
.actions { display: flex; align-items: center; gap: 12px; margin-top: 12px; }
button.primary { font: inherit; font-weight: 600; padding: 7px 16px; border-radius: 6px; border: 1px solid #1a56b0; background: #1a56b0; color: #fff; cursor: pointer; }
.save-status { font-size: 13px; color: #17803d; }
.save-status.bad { color: #b42318; }
.problems { border: 1px solid #b42318; background: #fef3f2; color: #7a271a; border-radius: 6px; padding: 6px 12px; }
aside.keys { margin-top: 12px; font-size: 12px; color: #4b5565; }
aside.keys ul { margin: 4px 0 0; padding-left: 16px; }
.done-box { max-width: 560px; margin: 40px auto; border: 1px solid #d8dce3; border-radius: 8px; padding: 6px 24px 16px; background: #fbfcfd; }
.done-box progress { width: 100%; height: 10px; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 20px; align-items: start; }
@media (max-width: 900px) { .pair { grid-template-columns: minmax(0, 1fr); } }
form.grade.vote { position: static; max-height: none; margin-top: 16px; }
"#;

/// A review page: `title` is plain text, `body` is HTML already escaped. No link leads to the viewer.
pub(crate) fn frame(title: &str, head: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · nmb review</title><link rel=\"stylesheet\" href=\"/review.css\">\
         <script src=\"/review.js\" defer></script></head>\
         <body><header class=\"review-head\"><span class=\"brand\">nmb review</span>{head}</header>\
         <main>{body}</main></body></html>\n",
        escape(title)
    ))
}

/// A short page: a heading and plain-text lines.
pub(crate) fn message_page(title: &str, lines: &[String]) -> Html<String> {
    let mut body = format!("<h1>{}</h1>", escape(title));
    for line in lines {
        let _ = write!(body, "<p>{}</p>", escape(line));
    }
    frame(title, "", &body)
}

/// Where a reviewer lands when every item has a grade.
pub(crate) fn done_page(set_path: &str, assigned: u32, graded: u32, skipped: u32) -> Html<String> {
    let mut body = String::from("<div class=\"done-box\"><h1 id=\"done\">All done</h1>");
    if assigned == 0 {
        body.push_str("<p>No items were assigned to you in this review.</p></div>");
        return frame("All done", "", &body);
    }
    let _ = write!(
        body,
        "<progress value=\"{assigned}\" max=\"{assigned}\"></progress>\
         <p id=\"counts\">You graded {graded} of {assigned} items and marked {skipped} as unsure / skipped. \
         Thank you.</p><p>Your grades are saved. You can still change any of them: \
         <a href=\"{}\">look over your items from the first</a>.</p></div>",
        escape(&format!("{set_path}/items/1"))
    );
    frame("All done", "", &body)
}

/// One turn of an item: the messages it added to the conversation, and the model's answer.
pub(crate) struct TurnView {
    pub messages: Vec<StoredMessage>,
    /// The stored prompt, when it is not a conversation nmb can read.
    pub raw_prompt: Option<String>,
    pub answer: Option<String>,
    /// The model's thinking before the answer; `None` unless the set shows it.
    pub thinking: Option<String>,
}

/// What the grading page shows.
pub(crate) struct ItemView<'a> {
    /// `/review/{set}`, percent-encoded.
    pub set_path: &'a str,
    pub position: u32,
    pub total: u32,
    pub turns: &'a [TurnView],
    pub rubric: &'a Rubric,
    /// The criteria of the item's task, from the set's criterion rubric (empty without one).
    pub criteria: &'a [nmb_results::criteria::Criterion],
    /// Filled in: the reviewer's newest grade, or what they just sent.
    pub form: &'a GradeForm,
    pub csrf: &'a str,
    /// Why what they sent was not saved.
    pub problems: &'a [String],
}

/// A review page's progress bar and its previous/next links, with the `<nav>` left open for the page's own
/// links (the caller closes it).
pub(crate) fn progress_nav(set_path: &str, position: u32, total: u32) -> String {
    let item = |p: u32| escape(&format!("{set_path}/items/{p}"));
    let mut head = format!(
        "<span class=\"progress-text\" id=\"progress\">{position} / {total}</span>\
         <progress value=\"{position}\" max=\"{total}\"></progress><nav class=\"items\">"
    );
    if position > 1 {
        let _ = write!(
            head,
            "<a id=\"prev\" rel=\"prev\" href=\"{}\">← previous</a>",
            item(position - 1)
        );
    }
    if position < total {
        let _ = write!(
            head,
            "<a id=\"next\" rel=\"next\" href=\"{}\">next →</a>",
            item(position + 1)
        );
    }
    head
}

/// The grading page of one item.
pub(crate) fn item_page(v: &ItemView<'_>) -> Html<String> {
    let mut head = progress_nav(v.set_path, v.position, v.total);
    head.push_str("<a href=\"#answer\">the answer ↓</a></nav>");
    let mut body = String::from("<div class=\"review-grid\"><section class=\"case\">");
    case(&mut body, v);
    body.push_str("</section>");
    grade_form(&mut body, v);
    body.push_str("</div>");
    frame(&format!("Item {} of {}", v.position, v.total), &head, &body)
}

fn case(body: &mut String, v: &ItemView<'_>) {
    if v.turns.is_empty() {
        body.push_str("<p class=\"muted\">This item has no answer.</p>");
    }
    let several = v.turns.len() > 1;
    for (i, t) in v.turns.iter().enumerate() {
        if several {
            let _ = write!(body, "<h2>Step {} of {}</h2>", i + 1, v.turns.len());
        }
        for m in &t.messages {
            message(body, v, m, i == 0);
        }
        if let Some(raw) = &t.raw_prompt {
            let _ = write!(body, "<pre class=\"prompt-text\">{}</pre>", escape(raw));
        }
        let id = if i + 1 == v.turns.len() {
            " id=\"answer\""
        } else {
            ""
        };
        let _ = write!(body, "<h2{id}>The answer</h2>");
        if let Some(thinking) = &t.thinking {
            // Words only: a token count is the API's, and the page names nothing of the model.
            thinking_block(body, thinking, None);
        }
        match &t.answer {
            Some(text) => {
                let _ = write!(body, "<pre class=\"answer\">{}</pre>", escape(text));
            }
            None => body.push_str("<p class=\"muted\">No answer to this step.</p>"),
        }
    }
}

fn message(body: &mut String, v: &ItemView<'_>, m: &StoredMessage, first_turn: bool) {
    prompt_message(body, v.set_path, v.position, m, first_turn);
}

/// One message of the prompt; images are served under the set for the item at `position`.
pub(crate) fn prompt_message(
    body: &mut String,
    set_path: &str,
    position: u32,
    m: &StoredMessage,
    first_turn: bool,
) {
    let role = match (m.role, first_turn) {
        (Role::System, _) => "Instructions to the model",
        (Role::User, true) => "Case and question",
        (Role::User, false) => "Follow-up",
        (Role::Assistant, _) => "Earlier answer",
    };
    // The instructions are the same for every item: folded away, one click to read.
    let (open, close) = if m.role == Role::System {
        (
            "<details class=\"message\"><summary class=\"role\">",
            "</summary>",
        )
    } else {
        ("<div class=\"message\"><div class=\"role\">", "</div>")
    };
    let _ = write!(body, "{open}{}{close}", escape(role));
    for part in &m.parts {
        match part {
            StoredPart::Text { text } => {
                let _ = write!(body, "<pre class=\"prompt-text\">{}</pre>", escape(text));
            }
            StoredPart::Image { image, .. } => {
                let src = format!(
                    "{}/images/{}?item={}",
                    set_path,
                    url_encode(image),
                    position
                );
                let _ = write!(
                    body,
                    "<img class=\"prompt\" src=\"{}\" alt=\"case image\">",
                    escape(&src)
                );
            }
        }
    }
    body.push_str(if m.role == Role::System {
        "</details>"
    } else {
        "</div>"
    });
}

fn grade_form(body: &mut String, v: &ItemView<'_>) {
    let _ = write!(
        body,
        "<form id=\"grade\" class=\"grade\" method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(&format!("{}/items/{}", v.set_path, v.position)),
        escape(v.csrf)
    );
    if !v.problems.is_empty() {
        body.push_str(
            "<div class=\"problems\" id=\"problems\" role=\"alert\"><p>Not saved:</p><ul>",
        );
        for p in v.problems {
            let _ = write!(body, "<li>{}</li>", escape(p));
        }
        body.push_str("</ul></div>");
    }
    verdict(body, &v.form.verdict);
    criteria(body, v);
    let r = v.rubric;
    for d in &r.dimensions {
        let value = v.form.scores.get(&d.id).map_or("", String::as_str);
        score_row(body, r, &d.id, &d.name, &d.description, &d.anchors, value);
    }
    let overall = v.form.scores.get("overall").map_or("", String::as_str);
    let o = &r.overall;
    score_row(
        body,
        r,
        "overall",
        &o.name,
        &o.description,
        &Default::default(),
        overall,
    );
    taxonomy(body, &v.form.taxonomy);
    let _ = write!(
        body,
        "<label class=\"field\">Comment<textarea name=\"comment\" maxlength=\"{COMMENT_LIMIT}\" \
         rows=\"3\">{}</textarea></label>\
         <div class=\"actions\"><button class=\"primary\" type=\"submit\" name=\"go\" value=\"next\">\
         Save and next →</button><span id=\"save-status\" class=\"save-status\" role=\"status\" \
         aria-live=\"polite\"></span></div>",
        escape(&v.form.comment)
    );
    keys(body);
    body.push_str("</form>");
}

fn verdict(body: &mut String, current: &str) {
    body.push_str("<fieldset class=\"verdict\"><legend>Verdict</legend><div class=\"chips\">");
    for (value, key) in VERDICTS.iter().zip(["1", "2", "3", "s"]) {
        let label = match *value {
            "correct" => "Correct",
            "partly" => "Partly correct",
            "incorrect" => "Incorrect",
            _ => "Unsure / skip",
        };
        let _ = write!(
            body,
            "<label class=\"chip {value}\"><input type=\"radio\" name=\"verdict\" value=\"{value}\"{}>\
             <span>{label} <kbd>{key}</kbd></span></label>",
            checked(current == *value)
        );
    }
    body.push_str("</div></fieldset>");
}

/// The item's criteria, one checkbox each: checked is met, unchecked not met (the hidden field says the list
/// was shown, so an unchecked box counts). Tab and Space work as for any checkbox; each change is saved.
fn criteria(body: &mut String, v: &ItemView<'_>) {
    if v.criteria.is_empty() {
        return;
    }
    body.push_str(
        "<fieldset class=\"criteria\" id=\"criteria\"><legend>Criteria: check each one the answer meets</legend>\
         <input type=\"hidden\" name=\"criteria_shown\" value=\"1\">\
         <p class=\"desc\">Some criteria describe harms (negative points): check them only when the answer does \
         that harm.</p>",
    );
    let met = v.form.criteria.as_ref();
    for c in v.criteria {
        let on = met.is_some_and(|m| m.contains(&c.id));
        let kind = if c.points < 0.0 { "harm" } else { "wanted" };
        let _ = write!(
            body,
            "<label class=\"criterion {kind}\"><input type=\"checkbox\" name=\"criterion\" value=\"{}\"{}> \
             <span>{} <span class=\"muted\">({} points)</span></span></label>",
            escape(&c.id),
            checked(on),
            escape(&c.criterion),
            c.points
        );
    }
    body.push_str("</fieldset>");
}

fn checked(yes: bool) -> &'static str {
    if yes {
        " checked"
    } else {
        ""
    }
}

/// One rubric dimension: "not scored" and every score from min to max, with the rubric's anchors listed.
fn score_row(
    body: &mut String,
    r: &Rubric,
    id: &str,
    name: &str,
    description: &str,
    anchors: &std::collections::BTreeMap<u8, String>,
    current: &str,
) {
    let field = escape(&format!("score.{id}"));
    let _ = write!(
        body,
        "<fieldset class=\"score\" id=\"dim-{}\"><legend>{}</legend><p class=\"desc\">{}</p>\
         <div class=\"chips\"><label class=\"chip\" title=\"not scored\"><input type=\"radio\" \
         name=\"{field}\" value=\"\"{}><span>–</span></label>",
        escape(id),
        escape(name),
        escape(description),
        checked(current.trim().is_empty())
    );
    for score in r.min..=r.max {
        let title = anchors
            .get(&score)
            .map_or(String::new(), |a| format!(" title=\"{}\"", escape(a)));
        let _ = write!(
            body,
            "<label class=\"chip\"{title}><input type=\"radio\" name=\"{field}\" value=\"{score}\"{}>\
             <span>{score}</span></label>",
            checked(current.trim() == score.to_string())
        );
    }
    body.push_str("</div>");
    if !anchors.is_empty() {
        body.push_str("<ul class=\"anchors\">");
        for (score, meaning) in anchors {
            let _ = write!(body, "<li><b>{score}</b> {}</li>", escape(meaning));
        }
        body.push_str("</ul>");
    }
    body.push_str("</fieldset>");
}

fn taxonomy(body: &mut String, current: &str) {
    body.push_str(
        "<label class=\"field\">Error class <span class=\"muted\">(for a wrong answer)</span>\
         <select name=\"taxonomy\"><option value=\"\">—</option>",
    );
    for c in TAXONOMY {
        let id = c.as_str();
        let _ = write!(
            body,
            "<option value=\"{id}\"{}>{}</option>",
            if current == id { " selected" } else { "" },
            escape(&id.replace('_', " "))
        );
    }
    body.push_str("</select></label>");
}

/// The shortcuts' legend; the script shows it (without the script there are no shortcuts).
fn keys(body: &mut String) {
    body.push_str(
        "<aside class=\"keys\" id=\"keys\" hidden><strong>Keys</strong><ul>\
         <li><kbd>1</kbd> <kbd>2</kbd> <kbd>3</kbd> correct / partly / incorrect, <kbd>s</kbd> unsure / skip</li>\
         <li><kbd>Tab</kbd> next field; in a rubric row a digit scores it and moves to the next row</li>\
         <li><kbd>j</kbd> or <kbd>→</kbd> save and next, <kbd>k</kbd> or <kbd>←</kbd> previous</li>\
         <li><kbd>Esc</kbd> leave a field; every change is saved as you go</li></ul></aside>",
    );
}
