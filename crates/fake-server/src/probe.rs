//! Models for context-probe tests with a known truth: [`SimDeferrer`] answers a differential diagnosis with its
//! own diagnosis, except that when the conversation holds a suggested diagnosis (the text after one of its
//! `leads`, up to the next full stop) it takes the suggestion with probability `defer`. With `defer` 0 it never
//! does. The draw is a hash of the model name, the conversation and the sample index, so the same request gets
//! the same answer again, as the response cache would give it.

use std::sync::Arc;

use crate::{ReceivedPart, ReceivedRequest, Reply, Responder};

/// The model's own diagnosis for a request.
pub type OwnAnswer = Arc<dyn Fn(&ReceivedRequest) -> String + Send + Sync>;

/// A model that defers to a suggested diagnosis with a designed probability.
#[derive(Clone)]
pub struct SimDeferrer {
    /// Chance, in [0, 1], of answering the suggestion when the conversation holds one.
    pub defer: f64,
    /// What comes right before a suggested diagnosis in a prompt.
    pub leads: Vec<String>,
    /// The diagnosis it gives without a suggestion (or when it does not defer).
    pub own: OwnAnswer,
}

impl SimDeferrer {
    /// This model as a fake server's responder.
    pub fn responder(self) -> Responder {
        Arc::new(move |req: &ReceivedRequest| self.reply(req))
    }

    pub fn reply(&self, req: &ReceivedRequest) -> Reply {
        let suggestion = self.suggestion(req);
        let own = (self.own)(req);
        let texts = (0..req.samples() as usize)
            .map(|i| {
                let top = match &suggestion {
                    Some(s) if draw(req, i) < self.defer => s.clone(),
                    _ => own.clone(),
                };
                serde_json::json!({"differential": [
                    {"rank": 1, "diagnosis": top, "evidence": "the history and the images"}]})
                .to_string()
            })
            .collect();
        Reply::Texts(texts)
    }

    /// The last suggestion in the users' messages, if any.
    pub fn suggestion(&self, req: &ReceivedRequest) -> Option<String> {
        let text = user_text(req);
        self.leads
            .iter()
            .filter_map(|lead| {
                let at = text.rfind(lead.as_str())?;
                let rest = &text[at + lead.len()..];
                let end = rest.find('.').unwrap_or(rest.len());
                Some((at, rest[..end].trim().to_string()))
            })
            .max_by_key(|(at, _)| *at)
            .map(|(_, s)| s)
    }
}

/// Every user message's text, in order.
pub fn user_text(req: &ReceivedRequest) -> String {
    req.messages
        .iter()
        .filter(|m| m.role == "user")
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            ReceivedPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A number in [0, 1) from the model, the conversation and the sample (FNV-1a).
fn draw(req: &ReceivedRequest, i: usize) -> f64 {
    let key = format!("{}|{}|{i}|defer", req.model, req.conversation_sha256);
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h >> 11) as f64 / (1u64 << 53) as f64
}
