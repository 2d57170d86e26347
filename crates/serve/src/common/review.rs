//! What the review pages (single items in `review`, pairwise votes in `review_pair`) share: the reviewer a
//! token names, why a request is refused, the set's paths, where a post goes next, the form key, and a stored
//! sample's turns as a reviewer sees them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use nmb_chat::{Role, StoredConversation};
use nmb_store::{AssignedItem, ReviewSet, Store, StoreError};
use sha2::{Digest, Sha256};

use super::PageError;
use crate::forms::field;
use crate::html::url_encode;
use crate::review_html::{self as view, TurnView};

/// A reviewer whose token the store knows for this set, unrevoked.
pub(crate) struct Reviewer {
    pub(crate) set: ReviewSet,
    pub(crate) name: String,
    pub(crate) token: String,
}

/// Why a review request is refused.
pub(crate) enum Refused {
    /// No token, an unknown or revoked one, or one of another set: 401.
    NoReviewer,
    /// A cross-site request or a missing / wrong form key: 403.
    Forbidden(&'static str),
    NotFound,
    /// The body could not be read as a form (too large, wrong type).
    Body(StatusCode, String),
    /// The grade's problems; the HTML answer re-shows the form (`review::save`), so this is for the script.
    Invalid(Vec<String>),
    Page(PageError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Self {
        Refused::Page(PageError::Store(e))
    }
}

impl Refused {
    fn status(&self) -> StatusCode {
        match self {
            Refused::NoReviewer => StatusCode::UNAUTHORIZED,
            Refused::Forbidden(_) => StatusCode::FORBIDDEN,
            Refused::NotFound => StatusCode::NOT_FOUND,
            Refused::Body(status, _) => *status,
            Refused::Invalid(_) => StatusCode::BAD_REQUEST,
            Refused::Page(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> Vec<String> {
        let one = |s: &str| vec![s.to_string()];
        match self {
            Refused::NoReviewer => one(
                "This review link is not valid: it may be incomplete or withdrawn. \
                 Open the link you were sent, or ask for a new one.",
            ),
            Refused::Forbidden(why) => one(why),
            Refused::NotFound => one("There is no such page in your review."),
            Refused::Body(_, why) => one(why),
            Refused::Invalid(problems) => problems.clone(),
            Refused::Page(_) => one("the review could not be read; the server's log says why"),
        }
    }

    /// A page, or for the script a JSON object `{"problems": [...]}`.
    pub(crate) fn respond(self, json: bool) -> Response {
        let status = self.status();
        if let Refused::Page(PageError::Store(e)) = &self {
            tracing::error!("nmb serve: {e}");
        }
        let problems = self.message();
        if json {
            let body = serde_json::json!({ "problems": problems });
            return (status, axum::Json(body)).into_response();
        }
        let title = format!(
            "{} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        (status, view::message_page(&title, &problems)).into_response()
    }
}

/// `/review/{set}` (percent-encoded).
pub(crate) fn set_path(set_id: &str) -> String {
    format!("/review/{}", url_encode(set_id))
}

pub(crate) fn item_path(set_id: &str, position: u32) -> String {
    format!("{}/items/{position}", set_path(set_id))
}

/// Each turn of a stored sample as a reviewer sees it (`review::turns`; a pairwise item's B answer too).
pub(crate) fn sample_turns(
    store: &Store,
    run_id: &str,
    task_id: &str,
    sample_index: u32,
    show_thinking: bool,
) -> Result<Vec<TurnView>, Refused> {
    let Some(sample) = store.sample_record(run_id, task_id, sample_index)? else {
        return Err(Refused::NotFound);
    };
    let mut out = Vec::new();
    for t in &sample.turns {
        let (messages, raw) = match store.prompt_body(&t.call.prompt_hash)? {
            None => (Vec::new(), None),
            Some(json) => match StoredConversation::parse(&json) {
                Ok(conv) => (new_messages(conv), None),
                Err(_) => (Vec::new(), Some(json)),
            },
        };
        out.push(TurnView {
            messages,
            raw_prompt: raw,
            answer: t.text.clone(),
            thinking: t.thinking.clone().filter(|_| show_thinking),
        });
    }
    Ok(out)
}

/// The messages after the conversation's last answer: for a later turn of a consult, only what that turn adds
/// (the earlier answers are shown as answers).
fn new_messages(conv: StoredConversation) -> Vec<nmb_chat::StoredMessage> {
    let start = conv
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    conv.messages.into_iter().skip(start).collect()
}

/// Where a form post goes after saving: the previous item, the same one, the next, or the set (which resumes).
pub(crate) fn go_on(pairs: &[(String, String)], set_id: &str, it: &AssignedItem) -> Response {
    let to = match field(pairs, "go") {
        Some("prev") => item_path(set_id, it.position.saturating_sub(1).max(1)),
        Some("stay") => item_path(set_id, it.position),
        _ if it.position < it.total => item_path(set_id, it.position + 1),
        _ => set_path(set_id),
    };
    Redirect::to(&to).into_response()
}

/// The hidden form field that proves a post came from the reviewer's own page: HMAC-SHA256 of the set id keyed
/// by the reviewer's token, hex. Another site can neither read it nor compute it.
pub(crate) fn csrf_key(token: &str, set_id: &str) -> String {
    hex::encode(hmac_sha256(
        token.as_bytes(),
        format!("nmb-review-form {set_id}").as_bytes(),
    ))
}

/// HMAC-SHA256 (RFC 2104) over the workspace's `sha2` (the `hmac` crate in the lock file is built on another
/// major version of it).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use nmb_chat::StoredPart;

    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 2 (a short key) and 6 (a key longer than the block).
        let short = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(short),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let long = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(long),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_later_turn_shows_only_what_it_adds() {
        let conv = StoredConversation::parse(
            r#"{"messages":[{"role":"system","parts":[{"text":"s"}]},{"role":"user","parts":[{"text":"q1"}]},
               {"role":"assistant","parts":[{"text":"a1"}]},{"role":"user","parts":[{"text":"q2"}]}]}"#,
        )
        .unwrap();
        let shown = new_messages(conv);
        assert_eq!(shown.len(), 1);
        assert!(matches!(&shown[0].parts[0], StoredPart::Text { text } if text == "q2"));
    }
}
