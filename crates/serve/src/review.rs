//! The blinded reviewer side of `nmb serve`: clinicians grade model answers under `/review/{set}/…`.
//!
//! A reviewer opens the link `nmb review create` printed (`/review/{set}?token=T`); the token is checked against
//! the store (only its SHA-256 is kept there), set as a cookie scoped to the set's path, and dropped from the
//! address. Every later request is checked against the store again, so a revoked token is refused at once. The
//! viewer's own token plays no part here, and a reviewer's token opens no viewer page: the review pages never
//! show a run id, a model, a judge's verdict, a score or another reviewer's grade, and show a model's thinking
//! only when the review set says so (`nmb review create --show-thinking`).
//!
//! Writes are guarded against cross-site requests by a hidden field derived from the reviewer's token
//! (HMAC-SHA256 of the set id) and by refusing a foreign `Origin`. Grades are appended, never overwritten.

use axum::extract::rejection::FormRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Form, Router};
use nmb_chat::StoredPart;
use nmb_results::criteria::Criterion;
use nmb_results::Rubric;
use nmb_review::GradeForm;
use nmb_store::{AssignedItem, Grade, ReviewSet, Store};

use crate::common::review::{
    csrf_key, go_on, item_path, sample_turns, set_path, Refused, Reviewer,
};
use crate::common::PageError;
use crate::forms::{field, same_origin, CROSS_SITE};
use crate::html::{url_decode, url_encode};
use crate::review_html::{self as view, ItemView, TurnView};
use crate::App;

/// The Content-Security-Policy of the review pages: the viewer's, plus the one same-origin script and its
/// autosave requests. Nothing inline.
pub const CSP: &str = "default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The reviewer's cookie (its path is the set's, so each set has its own). Behind TLS it is
/// [`SECURE_COOKIE`]: `__Secure-` rather than `__Host-`, which would demand `Path=/`.
const COOKIE: &str = "nmb_review";
const SECURE_COOKIE: &str = "__Secure-nmb_review";
/// How long the cookie lasts; the store decides on every request whether it still counts.
const COOKIE_MAX_AGE_S: u32 = 30 * 24 * 3600;
/// Grade posts only. A comment of `nmb_review::COMMENT_LIMIT` characters of 4-byte UTF-8 is 48 KiB
/// percent-encoded; the viewer's routes keep their 1 KiB.
const BODY_LIMIT: usize = 64 * 1024;
/// Longer "tokens" are not looked up at all.
const TOKEN_MAX: usize = 256;
/// The static script: autosave and keyboard shortcuts (the pages work without it).
const SCRIPT: &str = include_str!("review.js");

/// Whether a request path belongs to the review side (which checks reviewer tokens, not the viewer's).
pub(crate) fn is_review_path(path: &str) -> bool {
    path == "/review.js" || path == "/review.css" || path.starts_with("/review/")
}

/// The review routes, merged into the viewer's router.
pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/review.js", get(script))
        .route("/review.css", get(style))
        .route("/review/{set}", get(enter))
        .route("/review/{set}/", get(enter))
        .route("/review/{set}/items/{position}", get(item).post(save))
        .route("/review/{set}/images/{sha256}", get(image))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// Runs a handler's store work off the async threads.
async fn blocking<F>(app: &App, json: bool, f: F) -> Response
where
    F: FnOnce(&Store) -> Result<Response, Refused> + Send + 'static,
{
    let store = app.store.clone();
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.respond(json),
        Err(_) => Refused::Page(PageError::Internal).respond(json),
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn style() -> Response {
    let css = format!("{}{}", crate::html::STYLE, view::STYLE);
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], css).into_response()
}

/// The reviewer a token names, if it belongs to this set and is not revoked.
fn by_token(store: &Store, set_id: &str, token: &str) -> Result<Option<Reviewer>, Refused> {
    let token = token.trim();
    if token.is_empty() || token.len() > TOKEN_MAX {
        return Ok(None);
    }
    // The store is searched by the token's SHA-256, so lookup time reveals nothing usable about the token.
    let Some((set, name)) = store.reviewer_by_token(&nmb_review::hash_token(token))? else {
        return Ok(None);
    };
    if set != set_id {
        return Ok(None);
    }
    Ok(store.review_set(set_id)?.map(|set| Reviewer {
        set,
        name,
        token: token.to_string(),
    }))
}

/// The reviewer of this set whose cookie the request carries.
fn authenticate(store: &Store, set_id: &str, headers: &HeaderMap) -> Result<Reviewer, Refused> {
    let cookies = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| {
            let c = c.trim();
            let c = c.strip_prefix("__Secure-").unwrap_or(c);
            c.strip_prefix(COOKIE)?.strip_prefix('=')
        })
        .take(4);
    for value in cookies {
        if let Some(r) = by_token(store, set_id, &url_decode(value))? {
            return Ok(r);
        }
    }
    Err(Refused::NoReviewer)
}

/// `GET /review/{set}?token=T` sets the cookie and drops the token from the address; without a token, it
/// resumes: the first ungraded item, or the "done" page.
async fn enter(
    State(app): State<App>,
    Path(set_id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let token = field(&query, "token").map(str::to_string);
    let here = uri.path().to_string();
    let secure = app.gate.secure;
    blocking(&app, false, move |store| match token {
        Some(token) => {
            let r = by_token(store, &set_id, &token)?.ok_or(Refused::NoReviewer)?;
            Ok(with_cookie(Redirect::to(&here).into_response(), &r, secure))
        }
        None => {
            let r = authenticate(store, &set_id, &headers)?;
            resume(store, &r)
        }
    })
    .await
}

/// Sets the reviewer's cookie; `secure` (behind TLS) names it [`SECURE_COOKIE`] and marks it `Secure`.
fn with_cookie(mut response: Response, r: &Reviewer, secure: bool) -> Response {
    let (name, attribute) = if secure {
        (SECURE_COOKIE, "; Secure")
    } else {
        (COOKIE, "")
    };
    let cookie = format!(
        "{name}={}; Path={}; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Strict{attribute}",
        url_encode(&r.token),
        set_path(&r.set.set_id)
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

fn resume(store: &Store, r: &Reviewer) -> Result<Response, Refused> {
    if let Some(position) = store.first_ungraded(&r.set.set_id, &r.name)? {
        return Ok(Redirect::to(&item_path(&r.set.set_id, position)).into_response());
    }
    let me = store
        .review_status(&r.set.set_id)?
        .into_iter()
        .find(|s| s.reviewer == r.name);
    let (assigned, graded, skipped) = me.map_or((0, 0, 0), |s| (s.assigned, s.graded, s.skipped));
    Ok(view::done_page(&set_path(&r.set.set_id), assigned, graded, skipped).into_response())
}

/// A position from the path: a positive number, else not found.
fn position(text: &str) -> Result<u32, Refused> {
    match text.parse::<u32>() {
        Ok(p) if p >= 1 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(Refused::NotFound),
    }
}

fn assigned(store: &Store, r: &Reviewer, position: u32) -> Result<AssignedItem, Refused> {
    store
        .assigned_item(&r.set.set_id, &r.name, position)?
        .ok_or(Refused::NotFound)
}

fn rubric(set: &ReviewSet) -> Result<Rubric, Refused> {
    Rubric::parse(&set.rubric, &format!("review set {}", set.set_id)).map_err(|e| {
        tracing::error!("nmb serve: {e}");
        Refused::Page(PageError::Internal)
    })
}

/// The criteria of an item's task in the set's criterion rubric (none without one).
fn item_criteria(set: &ReviewSet, task_id: &str) -> Result<Vec<Criterion>, Refused> {
    let rubric = nmb_review::set_criteria(set).map_err(|e| {
        tracing::error!("nmb serve: {e}");
        Refused::Page(PageError::Internal)
    })?;
    Ok(rubric.map_or_else(Vec::new, |r| r.for_task(task_id).to_vec()))
}

/// The reviewer's newest grade of an item, or an empty one.
fn newest_grade(store: &Store, r: &Reviewer, item_no: u32) -> Result<Grade, Refused> {
    Ok(store
        .grade_history(&r.set.set_id, &r.name, item_no)?
        .pop()
        .map(|g| g.grade)
        .unwrap_or_default())
}

/// `GET /review/{set}/items/{position}`: the item as this reviewer sees it, with their newest grade filled in.
async fn item(
    State(app): State<App>,
    Path((set_id, pos)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    blocking(&app, false, move |store| {
        let r = authenticate(store, &set_id, &headers)?;
        let it = assigned(store, &r, position(&pos)?)?;
        if r.set.pairwise {
            let form = crate::review_pair::newest_vote_form(store, &r, it.item.item_no)?;
            return crate::review_pair::pair_response(store, &r, &it, &form, &[], StatusCode::OK);
        }
        let form = form_of(&newest_grade(store, &r, it.item.item_no)?);
        item_response(store, &r, &it, &form, &[], StatusCode::OK)
    })
    .await
}

/// The grading page of one item (`problems` are shown above the form).
fn item_response(
    store: &Store,
    r: &Reviewer,
    it: &AssignedItem,
    form: &GradeForm,
    problems: &[String],
    status: StatusCode,
) -> Result<Response, Refused> {
    let rubric = rubric(&r.set)?;
    let criteria = item_criteria(&r.set, &it.item.task_id)?;
    let turns = turns(store, it, r.set.show_thinking)?;
    let csrf = csrf_key(&r.token, &r.set.set_id);
    let page = view::item_page(&ItemView {
        set_path: &set_path(&r.set.set_id),
        position: it.position,
        total: it.total,
        turns: &turns,
        rubric: &rubric,
        criteria: &criteria,
        form,
        csrf: &csrf,
        problems,
    });
    Ok((status, page).into_response())
}

/// Each turn of the item's sample: what the model was newly shown, and what it answered, with the thinking
/// before the answer only where `show_thinking` (the set's choice): a hidden thinking is never read into a page.
fn turns(store: &Store, it: &AssignedItem, show_thinking: bool) -> Result<Vec<TurnView>, Refused> {
    let i = &it.item;
    sample_turns(store, &i.run_id, &i.task_id, i.sample_index, show_thinking)
}

/// A stored grade as the form's strings.
fn form_of(g: &Grade) -> GradeForm {
    GradeForm {
        verdict: g.verdict.clone().unwrap_or_default(),
        scores: g
            .scores
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        taxonomy: g.taxonomy.clone().unwrap_or_default(),
        comment: g.comment.clone().unwrap_or_default(),
        criteria: (!g.criteria.is_empty()).then(|| {
            g.criteria
                .iter()
                .filter(|(_, met)| **met)
                .map(|(id, _)| id.clone())
                .collect()
        }),
    }
}

/// The posted fields as a grade form: `verdict`, `score.DIMENSION`, `taxonomy`, `comment`, and `criterion` (one
/// per checked criterion) with `criteria_shown` (others are ignored).
fn form_from(pairs: &[(String, String)]) -> GradeForm {
    let mut form = GradeForm::default();
    for (k, v) in pairs {
        match k.as_str() {
            "verdict" => form.verdict = v.clone(),
            "taxonomy" => form.taxonomy = v.clone(),
            "comment" => form.comment = v.clone(),
            "criteria_shown" => {
                form.criteria.get_or_insert_with(Default::default);
            }
            "criterion" => {
                form.criteria
                    .get_or_insert_with(Default::default)
                    .insert(v.clone());
            }
            k => {
                if let Some(dim) = k.strip_prefix("score.") {
                    form.scores.insert(dim.to_string(), v.clone());
                }
            }
        }
    }
    form
}

/// Whether the script asked (it wants JSON, not a page).
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

/// `POST /review/{set}/items/{position}`: checks the form key and the grade, appends it, and sends a form post
/// on to the next item (the script gets 204).
async fn save(
    State(app): State<App>,
    Path((set_id, pos)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Response {
    let json = wants_json(&headers);
    blocking(&app, json, move |store| {
        let r = authenticate(store, &set_id, &headers)?;
        if !same_origin(&headers) {
            return Err(Refused::Forbidden(CROSS_SITE));
        }
        let pairs = match body {
            Ok(Form(pairs)) => pairs,
            Err(e) => return Err(Refused::Body(e.status(), e.body_text())),
        };
        let sent = field(&pairs, "csrf").unwrap_or("");
        if !crate::same(sent, &csrf_key(&r.token, &r.set.set_id)) {
            return Err(Refused::Forbidden(
                "This form is out of date or was not sent by your review page; reload the page and try again.",
            ));
        }
        let it = assigned(store, &r, position(&pos)?)?;
        if r.set.pairwise {
            return crate::review_pair::save_vote(store, &r, &it, &pairs, json);
        }
        let form = form_from(&pairs);
        let criteria = item_criteria(&r.set, &it.item.task_id)?;
        let grade = match nmb_review::check_grade(&rubric(&r.set)?, &criteria, &form) {
            Ok(g) => g,
            Err(problems) if json => return Err(Refused::Invalid(problems)),
            Err(problems) => {
                return item_response(store, &r, &it, &form, &problems, StatusCode::BAD_REQUEST)
            }
        };
        // Appended, never overwritten. A post identical to the newest grade (the script's autosave followed by
        // the form's own submit) adds nothing to the trail.
        let set = &r.set;
        if grade != newest_grade(store, &r, it.item.item_no)? {
            store.append_grade(&set.set_id, &r.name, it.item.item_no, &set.rubric_hash, &grade)?;
        }
        if json {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        Ok(go_on(&pairs, &set.set_id, &it))
    })
    .await
}

/// `GET /review/{set}/images/{sha256}?item=POSITION`: an image of the prompt of one of this reviewer's items.
async fn image(
    State(app): State<App>,
    Path((set_id, sha256)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let pos = field(&query, "item").unwrap_or("").to_string();
    blocking(&app, false, move |store| {
        let r = authenticate(store, &set_id, &headers)?;
        let it = assigned(store, &r, position(&pos)?)?;
        let shown = turns(store, &it, false)?.iter().any(|t| {
            t.messages
                .iter()
                .flat_map(|m| &m.parts)
                .any(|p| matches!(p, StoredPart::Image { image, .. } if *image == sha256))
        });
        if !shown {
            return Err(Refused::NotFound);
        }
        crate::pages::image(store, &sha256).map_err(|e| match e {
            PageError::NotFound(_) => Refused::NotFound,
            e => Refused::Page(e),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_positive_plain_numbers() {
        assert!(matches!(position("17"), Ok(17)));
        for bad in ["0", "-1", "+3", "x", "", "99999999999", "1.0"] {
            assert!(matches!(position(bad), Err(Refused::NotFound)), "{bad}");
        }
    }

    #[test]
    fn only_the_review_paths_skip_the_viewer_token() {
        for p in [
            "/review.js",
            "/review.css",
            "/review/rv-1",
            "/review/rv-1/items/2",
        ] {
            assert!(is_review_path(p), "{p}");
        }
        for p in [
            "/",
            "/review",
            "/reviews",
            "/runs/x",
            "/review.jsx",
            "/style.css",
        ] {
            assert!(!is_review_path(p), "{p}");
        }
    }
}
