//! OpenAI chat-completions requests, as the server parses them.

use std::borrow::Cow;

use serde::Deserialize;

use super::image_part;
use super::json_err;
use super::Parsed;
use super::ReceivedMessage;
use super::ReceivedParams;
use super::ReceivedPart;

#[derive(Deserialize)]
struct OaRequest<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow)]
    messages: Vec<OaMessage<'a>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    seed: Option<u64>,
    n: Option<u64>,
    response_format: Option<serde_json::Value>,
    reasoning_effort: Option<serde_json::Value>,
    /// Everything else the body carried (vLLM's `chat_template_kwargs`, `top_k`, `min_p`, ...).
    #[serde(flatten)]
    rest: std::collections::BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct OaMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: Option<OaContent<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OaContent<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Parts(#[serde(borrow)] Vec<OaPart<'a>>),
}

#[derive(Deserialize)]
struct OaPart<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    image_url: Option<OaImageUrl<'a>>,
}

#[derive(Deserialize)]
struct OaImageUrl<'a> {
    #[serde(borrow)]
    url: Cow<'a, str>,
}

pub(super) fn parse_openai(body: &[u8], hash_images: bool) -> Result<Parsed, String> {
    let r: OaRequest = serde_json::from_slice(body).map_err(|e| json_err("OpenAI", e))?;
    let mut messages = Vec::with_capacity(r.messages.len());
    for m in &r.messages {
        let parts = match &m.content {
            None => Vec::new(),
            Some(OaContent::Text(t)) => vec![ReceivedPart::Text {
                text: t.to_string(),
            }],
            Some(OaContent::Parts(ps)) => ps
                .iter()
                .map(|p| openai_part(p, hash_images))
                .collect::<Result<_, _>>()?,
        };
        messages.push(ReceivedMessage {
            role: m.role.to_string(),
            parts,
        });
    }
    let (max_tokens, field) = match (r.max_tokens, r.max_completion_tokens) {
        (Some(t), _) => (Some(t), Some("max_tokens")),
        (None, Some(t)) => (Some(t), Some("max_completion_tokens")),
        _ => (None, None),
    };
    let json_schema = r
        .response_format
        .as_ref()
        .and_then(|f| f.pointer("/json_schema/schema"))
        .cloned();
    let params = ReceivedParams {
        temperature: r.temperature,
        top_p: r.top_p,
        max_tokens,
        max_tokens_field: field.map(str::to_string),
        seed: r.seed,
        n: r.n,
        json: r.response_format.is_some(),
        json_schema,
        forced_tool: None,
        reasoning: r.reasoning_effort,
        other: r.rest,
        ..ReceivedParams::default()
    };
    Ok((r.model.to_string(), messages, params))
}

fn openai_part(p: &OaPart<'_>, hash_images: bool) -> Result<ReceivedPart, String> {
    match (p.kind.as_ref(), &p.text, &p.image_url) {
        ("text", Some(t), _) => Ok(ReceivedPart::Text {
            text: t.to_string(),
        }),
        ("image_url", _, Some(u)) => match parse_data_url(&u.url) {
            Some((mime, data)) => image_part(mime, data, hash_images),
            None => Ok(ReceivedPart::ImageUrl {
                url: u.url.to_string(),
            }),
        },
        (kind, _, _) => Err(format!(
            "OpenAI content part of type {kind:?} lacks its field"
        )),
    }
}

/// `data:MIME;base64,DATA` -> (MIME, DATA).
fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime, data))
}
