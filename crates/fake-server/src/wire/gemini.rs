//! Gemini generateContent requests, as the server parses them.

use std::borrow::Cow;

use serde::Deserialize;

use super::image_part;
use super::json_err;
use super::ReceivedMessage;
use super::ReceivedParams;
use super::ReceivedPart;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GmRequest<'a> {
    #[serde(borrow)]
    contents: Vec<GmContent<'a>>,
    #[serde(borrow, alias = "system_instruction")]
    system_instruction: Option<GmContent<'a>>,
    #[serde(alias = "generation_config")]
    generation_config: Option<GmConfig>,
}

#[derive(Deserialize)]
struct GmContent<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    parts: Vec<GmPart<'a>>,
}

#[derive(Deserialize)]
struct GmPart<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "inlineData")]
    inline_data: Option<GmInline<'a>>,
}

#[derive(Deserialize)]
struct GmInline<'a> {
    #[serde(borrow, alias = "mimeType")]
    mime_type: Cow<'a, str>,
    #[serde(borrow)]
    data: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GmConfig {
    temperature: Option<f64>,
    #[serde(alias = "top_p")]
    top_p: Option<f64>,
    #[serde(alias = "max_output_tokens")]
    max_output_tokens: Option<u64>,
    #[serde(alias = "candidate_count")]
    candidate_count: Option<u64>,
    seed: Option<u64>,
    #[serde(alias = "response_mime_type")]
    response_mime_type: Option<String>,
    #[serde(alias = "response_json_schema")]
    response_json_schema: Option<serde_json::Value>,
    #[serde(alias = "response_schema")]
    response_schema: Option<serde_json::Value>,
    #[serde(alias = "thinking_config")]
    thinking_config: Option<serde_json::Value>,
}

pub(super) fn parse_gemini(
    body: &[u8],
    hash_images: bool,
) -> Result<(Vec<ReceivedMessage>, ReceivedParams), String> {
    let r: GmRequest = serde_json::from_slice(body).map_err(|e| json_err("Gemini", e))?;
    let mut messages = Vec::with_capacity(r.contents.len() + 1);
    if let Some(s) = &r.system_instruction {
        messages.push(ReceivedMessage {
            role: "system".into(),
            parts: gemini_parts(s, hash_images)?,
        });
    }
    for c in &r.contents {
        let role = match c.role.as_deref() {
            Some("model") => "assistant",
            Some("user") | None => "user",
            Some(other) => {
                return Err(format!(
                    "Gemini content role {other:?}: expected user or model"
                ))
            }
        };
        messages.push(ReceivedMessage {
            role: role.into(),
            parts: gemini_parts(c, hash_images)?,
        });
    }
    let params = match r.generation_config {
        None => ReceivedParams::default(),
        Some(g) => ReceivedParams {
            temperature: g.temperature,
            top_p: g.top_p,
            max_tokens: g.max_output_tokens,
            max_tokens_field: g.max_output_tokens.map(|_| "maxOutputTokens".into()),
            seed: g.seed,
            n: g.candidate_count,
            json: g.response_mime_type.as_deref() == Some("application/json"),
            json_schema: g.response_json_schema.or(g.response_schema),
            forced_tool: None,
            reasoning: g.thinking_config,
            ..ReceivedParams::default()
        },
    };
    Ok((messages, params))
}

fn gemini_parts(c: &GmContent<'_>, hash_images: bool) -> Result<Vec<ReceivedPart>, String> {
    c.parts
        .iter()
        .map(|p| match (&p.text, &p.inline_data) {
            (Some(t), None) => Ok(ReceivedPart::Text {
                text: t.to_string(),
            }),
            (None, Some(d)) => image_part(&d.mime_type, &d.data, hash_images),
            _ => Err("Gemini part must have exactly one of text or inline_data".into()),
        })
        .collect()
}
