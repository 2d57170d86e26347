//! The reviewer page of a pairwise review set: the case once, then two models' answers to it side by side as
//! "Answer A" and "Answer B" (the order the set recorded), and the vote: A, B, a tie, or neither acceptable.
//! Votes are appended, never overwritten, as grades are. Nothing names a run or a model.

use std::fmt::Write as _;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nmb_review::{VoteForm, COMMENT_LIMIT};
use nmb_store::{AssignedItem, Store};

use crate::common::review::{csrf_key, go_on, sample_turns, set_path, Refused, Reviewer};
use crate::forms::field;
use crate::html::{escape, thinking_block};
use crate::review_html::{frame, progress_nav, prompt_message, TurnView};

/// The choices as the page offers them: stored value, label, key.
const CHOICES: [(&str, &str, &str); 4] = [
    ("a", "A is better", "a"),
    ("b", "B is better", "b"),
    ("tie", "About the same", "t"),
    ("neither", "Neither is acceptable", "n"),
];

/// The reviewer's newest vote on an item, as the form's strings.
pub(crate) fn newest_vote_form(
    store: &Store,
    r: &Reviewer,
    item_no: u32,
) -> Result<VoteForm, Refused> {
    let newest = store.vote_history(&r.set.set_id, &r.name, item_no)?.pop();
    Ok(newest.map_or_else(VoteForm::default, |v| VoteForm {
        choice: v.vote.choice,
        comment: v.vote.comment.unwrap_or_default(),
    }))
}

/// Checks and appends a posted vote (an unchanged one adds nothing), then answers as the grade form does.
pub(crate) fn save_vote(
    store: &Store,
    r: &Reviewer,
    it: &AssignedItem,
    pairs: &[(String, String)],
    json: bool,
) -> Result<Response, Refused> {
    let form = VoteForm {
        choice: field(pairs, "choice").unwrap_or("").to_string(),
        comment: field(pairs, "comment").unwrap_or("").to_string(),
    };
    let vote = match nmb_review::check_vote(&form) {
        Ok(v) => v,
        Err(problems) if json => return Err(Refused::Invalid(problems)),
        Err(problems) => {
            return pair_response(store, r, it, &form, &problems, StatusCode::BAD_REQUEST)
        }
    };
    let Some(vote) = vote else {
        let problems = vec!["choose A, B, about the same, or neither acceptable".to_string()];
        if json {
            // Autosave of a comment before any choice: nothing to store yet.
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        return pair_response(store, r, it, &form, &problems, StatusCode::BAD_REQUEST);
    };
    let newest = newest_vote_form(store, r, it.item.item_no)?;
    let same =
        newest.choice == vote.choice && newest.comment == vote.comment.clone().unwrap_or_default();
    if !same {
        store.append_vote(&r.set.set_id, &r.name, it.item.item_no, &vote)?;
    }
    if json {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(go_on(pairs, &r.set.set_id, it))
}

/// The voting page of one pair.
pub(crate) fn pair_response(
    store: &Store,
    r: &Reviewer,
    it: &AssignedItem,
    form: &VoteForm,
    problems: &[String],
    status: StatusCode,
) -> Result<Response, Refused> {
    let i = &it.item;
    let pair = store
        .review_pair(&r.set.set_id, i.item_no)?
        .ok_or(Refused::NotFound)?;
    let show = r.set.show_thinking;
    let a = sample_turns(store, &i.run_id, &i.task_id, i.sample_index, show)?;
    let b = sample_turns(store, &pair.run_id, &i.task_id, pair.sample_index, show)?;
    let set = set_path(&r.set.set_id);
    let csrf = csrf_key(&r.token, &r.set.set_id);
    let mut head = progress_nav(&set, it.position, it.total);
    head.push_str("</nav>");
    let mut body = String::from("<section class=\"case\">");
    if let Some(first) = a.first() {
        for m in &first.messages {
            prompt_message(&mut body, &set, it.position, m, true);
        }
    }
    body.push_str("</section><div class=\"pair\">");
    answer(&mut body, "a", "Answer A", &a);
    answer(&mut body, "b", "Answer B", &b);
    body.push_str("</div>");
    vote_form(
        &mut body,
        &format!("{set}/items/{}", it.position),
        &csrf,
        form,
        problems,
    );
    let title = format!("Pair {} of {}", it.position, it.total);
    Ok((status, frame(&title, &head, &body)).into_response())
}

fn answer(body: &mut String, id: &str, title: &str, turns: &[TurnView]) {
    let _ = write!(
        body,
        "<section class=\"answer-side\" id=\"answer-{id}\"><h2>{title}</h2>"
    );
    let several = turns.len() > 1;
    for (i, t) in turns.iter().enumerate() {
        if several {
            let _ = write!(body, "<h3>Step {} of {}</h3>", i + 1, turns.len());
        }
        if let Some(thinking) = &t.thinking {
            thinking_block(body, thinking, None);
        }
        match &t.answer {
            Some(text) => {
                let _ = write!(body, "<pre class=\"answer\">{}</pre>", escape(text));
            }
            None => body.push_str("<p class=\"muted\">No answer to this step.</p>"),
        }
    }
    body.push_str("</section>");
}

fn vote_form(body: &mut String, action: &str, csrf: &str, form: &VoteForm, problems: &[String]) {
    let _ = write!(
        body,
        "<form id=\"grade\" class=\"grade vote\" method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(action),
        escape(csrf)
    );
    if !problems.is_empty() {
        body.push_str(
            "<div class=\"problems\" id=\"problems\" role=\"alert\"><p>Not saved:</p><ul>",
        );
        for p in problems {
            let _ = write!(body, "<li>{}</li>", escape(p));
        }
        body.push_str("</ul></div>");
    }
    body.push_str(
        "<fieldset class=\"verdict\"><legend>Which answer is better?</legend><div class=\"chips\">",
    );
    for (value, label, key) in CHOICES {
        let checked = if form.choice == value { " checked" } else { "" };
        let _ = write!(
            body,
            "<label class=\"chip {value}\"><input type=\"radio\" name=\"choice\" value=\"{value}\"{checked}>\
             <span>{label} <kbd>{key}</kbd></span></label>"
        );
    }
    let _ = write!(
        body,
        "</div></fieldset><label class=\"field\">Comment<textarea name=\"comment\" \
         maxlength=\"{COMMENT_LIMIT}\" rows=\"3\">{}</textarea></label>\
         <div class=\"actions\"><button class=\"primary\" type=\"submit\" name=\"go\" value=\"next\">\
         Save and next →</button><span id=\"save-status\" class=\"save-status\" role=\"status\" \
         aria-live=\"polite\"></span></div>\
         <aside class=\"keys\" id=\"keys\" hidden><strong>Keys</strong><ul>\
         <li><kbd>a</kbd> A is better, <kbd>b</kbd> B is better, <kbd>t</kbd> about the same, \
         <kbd>n</kbd> neither is acceptable</li>\
         <li><kbd>j</kbd> or <kbd>→</kbd> save and next, <kbd>k</kbd> or <kbd>←</kbd> previous</li>\
         <li><kbd>Esc</kbd> leave a field; every change is saved as you go</li></ul></aside></form>",
        escape(&form.comment)
    );
}
