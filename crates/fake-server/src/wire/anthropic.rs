//! Anthropic messages requests, as the server parses them.

use std::borrow::Cow;

use serde::Deserialize;

use super::image_part;
use super::json_err;
use super::Parsed;
use super::ReceivedMessage;
use super::ReceivedParams;
use super::ReceivedPart;

#[derive(Deserialize)]
struct AnRequest<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    max_tokens: Option<u64>,
    #[serde(borrow)]
    system: Option<AnContent<'a>>,
    #[serde(borrow)]
    messages: Vec<AnMessage<'a>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    tools: Option<Vec<serde_json::Value>>,
    tool_choice: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct AnMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: AnContent<'a>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AnContent<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<AnBlock<'a>>),
}

#[derive(Deserialize)]
struct AnBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    source: Option<AnSource<'a>>,
}

#[derive(Deserialize)]
struct AnSource<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    media_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data: Option<Cow<'a, str>>,
    #[serde(borrow)]
    url: Option<Cow<'a, str>>,
}

pub(super) fn parse_anthropic(body: &[u8], hash_images: bool) -> Result<Parsed, String> {
    let r: AnRequest = serde_json::from_slice(body).map_err(|e| json_err("Anthropic", e))?;
    let mut messages = Vec::with_capacity(r.messages.len() + 1);
    if let Some(system) = &r.system {
        messages.push(ReceivedMessage {
            role: "system".into(),
            parts: anthropic_parts(system, hash_images)?,
        });
    }
    for m in &r.messages {
        if m.role != "user" && m.role != "assistant" {
            return Err(format!(
                "Anthropic message role {:?}: expected user or assistant (system is a top-level field)",
                m.role
            ));
        }
        messages.push(ReceivedMessage {
            role: m.role.to_string(),
            parts: anthropic_parts(&m.content, hash_images)?,
        });
    }
    if r.max_tokens.is_none() {
        return Err("Anthropic request lacks the required max_tokens".into());
    }
    let forced = forced_tool(&r)?;
    let params = ReceivedParams {
        temperature: r.temperature,
        top_p: r.top_p,
        max_tokens: r.max_tokens,
        max_tokens_field: Some("max_tokens".into()),
        json: forced.is_some(),
        json_schema: forced.as_ref().map(|(_, schema)| schema.clone()),
        forced_tool: forced.map(|(name, _)| name),
        reasoning: None,
        ..ReceivedParams::default()
    };
    Ok((r.model.to_string(), messages, params))
}

/// The tool `tool_choice` forces and its input schema, checked as the real API checks them.
fn forced_tool(r: &AnRequest<'_>) -> Result<Option<(String, serde_json::Value)>, String> {
    let Some(choice) = &r.tool_choice else {
        return Ok(None);
    };
    if choice["type"] != "tool" {
        return Ok(None);
    }
    let name = choice["name"]
        .as_str()
        .ok_or("Anthropic tool_choice of type tool lacks its name")?;
    let tool = r
        .tools
        .iter()
        .flatten()
        .find(|t| t["name"] == name)
        .ok_or_else(|| format!("Anthropic tool_choice names {name:?}, which is not in tools"))?;
    let schema = &tool["input_schema"];
    if schema["type"] != "object" {
        return Err(format!(
            "Anthropic tool {name:?}: input_schema must be an object schema"
        ));
    }
    Ok(Some((name.to_string(), schema.clone())))
}

fn anthropic_parts(c: &AnContent<'_>, hash_images: bool) -> Result<Vec<ReceivedPart>, String> {
    let blocks = match c {
        AnContent::Text(t) => {
            return Ok(vec![ReceivedPart::Text {
                text: t.to_string(),
            }])
        }
        AnContent::Blocks(b) => b,
    };
    blocks
        .iter()
        .map(|b| match (b.kind.as_ref(), &b.text, &b.source) {
            ("text", Some(t), _) => Ok(ReceivedPart::Text {
                text: t.to_string(),
            }),
            ("image", _, Some(s)) => anthropic_image(s, hash_images),
            (kind, _, _) => Err(format!(
                "Anthropic content block of type {kind:?} lacks its field"
            )),
        })
        .collect()
}

fn anthropic_image(s: &AnSource<'_>, hash_images: bool) -> Result<ReceivedPart, String> {
    match (s.kind.as_ref(), &s.media_type, &s.data, &s.url) {
        ("base64", Some(mime), Some(data), _) => image_part(mime, data, hash_images),
        ("url", _, _, Some(url)) => Ok(ReceivedPart::ImageUrl {
            url: url.to_string(),
        }),
        (kind, ..) => Err(format!(
            "Anthropic image source of type {kind:?} lacks media_type/data"
        )),
    }
}
