//! Anthropic messages requests, as the server parses them.
//!
//! Extended thinking is checked as Anthropic's documentation states its rules ("Building with extended
//! thinking"): `budget_tokens` "must be set to a value less than max_tokens" and at least 1,024; "Thinking
//! isn't compatible with temperature or top_k modifications as well as forced tool use", while "you can set
//! top_p to values between 1 and 0.95"; "Tool use with thinking only supports tool_choice: {"type": "auto"}
//! (the default) or tool_choice: {"type": "none"}"; and a thinking block sent back must be "the complete
//! unmodified block", its `signature` verified. Each refusal is a 400 `invalid_request_error`; the message
//! for forced tool use is the API's own ("Thinking may not be enabled when tool_choice forces tool use."), the
//! others state the documented rule.

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
    thinking: Option<serde_json::Value>,
}

/// The prefix up to the last block marked `cache_control`, in the cache's order (tools, system, messages): its
/// SHA-256 and its tokens as usage fields estimate them ([`super::estimated_tokens`]). `None` without a mark.
fn cache_prefix(r: &AnRequest<'_>) -> Option<(String, u64)> {
    use sha2::Digest;
    let blocks: Vec<Block<'_, '_>> = (r.system.iter())
        .chain(r.messages.iter().map(|m| &m.content))
        .flat_map(|c| match c {
            AnContent::Text(t) => vec![Block::Text(t)],
            AnContent::Blocks(b) => b.iter().map(Block::Block).collect(),
        })
        .collect();
    let end = blocks.iter().rposition(|b| b.marked())?;
    let mut hash = sha2::Sha256::new();
    hash.update(
        serde_json::to_string(&r.tools)
            .unwrap_or_default()
            .as_bytes(),
    );
    let mut chars = 0;
    for b in &blocks[..=end] {
        let (kind, text, image) = b.parts();
        for part in [kind, text, image] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        chars += if kind == "image" {
            super::IMAGE_CHARS
        } else {
            text.len()
        };
    }
    Some((hex::encode(hash.finalize()), super::estimated_tokens(chars)))
}

/// A content block as the prompt cache sees it: a string content is one text block.
enum Block<'r, 'a> {
    Text(&'r Cow<'a, str>),
    Block(&'r AnBlock<'a>),
}

impl Block<'_, '_> {
    fn marked(&self) -> bool {
        matches!(self, Block::Block(b) if b.cache_control.is_some())
    }

    /// Its type, its text and its image data (empty where it has none).
    fn parts(&self) -> (&str, &str, &str) {
        match self {
            Block::Text(t) => ("text", t, ""),
            Block::Block(b) => (
                &b.kind,
                b.text.as_deref().unwrap_or(""),
                b.source
                    .as_ref()
                    .and_then(|s| s.data.as_deref())
                    .unwrap_or(""),
            ),
        }
    }
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
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data: Option<Cow<'a, str>>,
    cache_control: Option<serde::de::IgnoredAny>,
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
    let thinking_budget = thinking_budget(&r)?;
    let thinking_blocks_back = check_thinking_back(&r)?;
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
        thinking_budget,
        thinking_blocks_back,
        cache_prefix: cache_prefix(&r),
        ..ReceivedParams::default()
    };
    Ok((r.model.to_string(), messages, params))
}

/// The signature this server gives a thinking block's text, and checks when the block comes back.
pub fn thinking_signature(thinking: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("fake-anthropic-thinking\n{thinking}").as_bytes());
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, digest)
}

/// `budget_tokens` when extended thinking is enabled, after the documented checks.
fn thinking_budget(r: &AnRequest<'_>) -> Result<Option<u64>, String> {
    let Some(thinking) = &r.thinking else {
        return Ok(None);
    };
    if thinking["type"] != "enabled" {
        return Ok(None);
    }
    let budget = thinking["budget_tokens"]
        .as_u64()
        .ok_or("thinking.enabled.budget_tokens: Field required")?;
    if budget < 1024 {
        return Err(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into(),
        );
    }
    if r.max_tokens.is_some_and(|m| m <= budget) {
        return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
    }
    if r.temperature.is_some_and(|t| t != 1.0) {
        return Err("`temperature` may only be set to 1 when thinking is enabled".into());
    }
    if r.top_p.is_some_and(|p| p < 0.95) {
        return Err(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled"
                .into(),
        );
    }
    if r.tool_choice
        .as_ref()
        .is_some_and(|c| c["type"] == "tool" || c["type"] == "any")
    {
        return Err("Thinking may not be enabled when tool_choice forces tool use.".into());
    }
    Ok(Some(budget))
}

/// Counts the thinking blocks sent back in assistant turns, refusing one whose signature is not the one this
/// server gave its text.
fn check_thinking_back(r: &AnRequest<'_>) -> Result<u32, String> {
    let mut back = 0;
    for (i, m) in r.messages.iter().enumerate() {
        let AnContent::Blocks(blocks) = &m.content else {
            continue;
        };
        for b in blocks {
            match (b.kind.as_ref(), &b.thinking, &b.signature) {
                ("thinking", Some(text), Some(sig)) if *sig == thinking_signature(text) => {
                    back += 1
                }
                ("thinking", ..) => {
                    return Err(format!(
                        "messages.{i}.content: Invalid `signature` in `thinking` block"
                    ))
                }
                ("redacted_thinking", ..) if b.data.is_some() => back += 1,
                _ => {}
            }
        }
    }
    Ok(back)
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
        // Thinking sent back is checked apart ([`check_thinking_back`]); the conversation is the rest.
        .filter(|b| b.kind != "thinking" && b.kind != "redacted_thinking")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: serde_json::Value) -> Result<Parsed, String> {
        parse_anthropic(body.to_string().as_bytes(), false)
    }

    fn thinking_request(extra: serde_json::Value) -> serde_json::Value {
        let mut body = serde_json::json!({
            "model": "claude", "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "Hi"}],
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    }

    #[test]
    fn extended_thinking_is_checked_as_documented() {
        let ok = parse(thinking_request(serde_json::json!({"top_p": 0.95}))).unwrap();
        assert_eq!(ok.2.thinking_budget, Some(2048));
        for (extra, says) in [
            (
                serde_json::json!({"temperature": 0.7}),
                "`temperature` may only be set to 1",
            ),
            (
                serde_json::json!({"top_p": 0.9}),
                "`top_p` must be greater than or equal to 0.95",
            ),
            (
                serde_json::json!({"max_tokens": 2048}),
                "`max_tokens` must be greater",
            ),
            (
                serde_json::json!({"thinking": {"type": "enabled", "budget_tokens": 1000}}),
                "greater than or equal to 1024",
            ),
            (
                serde_json::json!({"tools": [{"name": "answer", "input_schema": {"type": "object"}}],
                                   "tool_choice": {"type": "tool", "name": "answer"}}),
                "tool_choice forces tool use",
            ),
        ] {
            let err = parse(thinking_request(extra.clone())).expect_err("refused");
            assert!(err.contains(says), "{extra}: {err}");
        }
    }

    #[test]
    fn thinking_sent_back_must_carry_its_signature_unchanged() {
        let block = |thinking: &str, signature: &str| {
            serde_json::json!({"messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": thinking, "signature": signature},
                    {"type": "text", "text": "Hello"}]},
                {"role": "user", "content": "And?"}]})
        };
        let good = thinking_signature("I thought");
        let back = parse(thinking_request(block("I thought", &good))).unwrap();
        assert_eq!(back.2.thinking_blocks_back, 1);
        assert_eq!(
            back.1[1].parts.len(),
            1,
            "the thinking is not conversation text"
        );
        let changed = parse(thinking_request(block("I thought again", &good)));
        assert!(changed.err().unwrap().contains("Invalid `signature`"));
    }
}
