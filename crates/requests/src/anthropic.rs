//! Anthropic Messages API (`POST {base}/v1/messages`): system prompt as a top-level field, base64 image blocks,
//! no `n` (one call per sample).

use std::sync::Arc;

use nmb_chat::{OutputFormat, Part};
use serde::{Deserialize, Serialize};

use crate::backend::{ChatRequest, Choice, Usage};
use crate::error::CallError;
use crate::http::{parse_json, system_texts, turns, Answer, KeyHeader, Wire};
use crate::transport::{malformed, Base64Cache};

#[derive(Debug, Clone)]
pub struct AnthropicOptions {
    pub version: String,
    /// Newer Claude models reject requests that set both `temperature` and `top_p`; turn this off for them.
    pub send_top_p: bool,
}

impl Default for AnthropicOptions {
    fn default() -> Self {
        AnthropicOptions {
            version: "2023-06-01".into(),
            send_top_p: true,
        }
    }
}

/// The Anthropic Messages wire format, for one model.
#[derive(Debug, Clone)]
pub struct AnthropicWire {
    pub model: String,
    pub options: AnthropicOptions,
}

impl Wire for AnthropicWire {
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-api-key");
    type Body<'a> = Body<'a>;

    fn path(&self) -> String {
        "/v1/messages".into()
    }
    fn headers(&self) -> Vec<(&'static str, &str)> {
        vec![("anthropic-version", &self.options.version)]
    }
    fn body<'a>(&'a self, req: &'a ChatRequest, images: &Base64Cache) -> Body<'a> {
        let system = system_texts(&req.messages);
        let messages = turns(&req.messages, "assistant", |p| block(p, images))
            .map(|(role, content)| WireMessage { role, content })
            .collect();
        let p = &req.params;
        // Anthropic has no JSON mode; a forced tool call is its constrained output.
        let schema = match &req.output {
            OutputFormat::Json { schema: Some(s) } => Some(s),
            _ => None,
        };
        Body {
            model: &self.model,
            max_tokens: p.max_tokens,
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            messages,
            temperature: p.temperature,
            top_p: self.options.send_top_p.then_some(p.top_p),
            tools: schema.map(|input_schema| {
                [Tool {
                    name: ANSWER_TOOL,
                    description: "Give your answer in exactly this structure.",
                    input_schema,
                }]
            }),
            tool_choice: schema.map(|_| serde_json::json!({"type": "tool", "name": ANSWER_TOOL})),
        }
    }
    fn parse(&self, raw: &str) -> Result<Answer, CallError> {
        let resp: Response = parse_json("Anthropic", raw)?;
        let stop = resp.stop_reason.unwrap_or_default();
        let usage = resp.usage.map_or(Usage::default(), |u| {
            // `input_tokens` leaves out what was read from or written to the cache: every input token is the sum.
            let (read, write) = (
                u.cache_read_input_tokens.unwrap_or(0),
                u.cache_creation_input_tokens.unwrap_or(0),
            );
            let input = u.input_tokens.map(|i| i + read + write);
            Usage {
                cached_input_tokens: read,
                cache_write_tokens: write,
                ..Usage::from_counts(input, u.output_tokens)
            }
        });
        let Some(content) = resp.content else {
            let what = "Anthropic response has no \"content\" field";
            return Err(malformed(what, raw.into()));
        };
        let refused = stop == "refusal";
        let thinking = thinking_text(&content);
        let text = answer_text(content);
        if text.is_none() && !refused {
            let what = format!("Anthropic response has no text content (stop_reason {stop:?})");
            return Err(malformed(what, raw.into()));
        }
        let choice = Choice {
            thinking,
            ..Choice::new(text.unwrap_or_default(), stop, refused)
        };
        Ok(Answer {
            choices: vec![choice],
            usage,
        })
    }
    fn max_image_side(&self) -> Option<u32> {
        // Anthropic resizes images whose long edge exceeds 1568 px.
        Some(1568)
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("forced tool call")
    }
}

/// The text of the answer's blocks, a forced tool call's arguments standing as JSON text (`None`: no block
/// carries any).
fn answer_text(content: Vec<ContentBlock>) -> Option<String> {
    let texts: Vec<String> = content
        .into_iter()
        .filter_map(|b| match b.kind.as_str() {
            "text" => b.text,
            "tool_use" => b.input.map(|i| i.to_string()),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.concat())
}

/// The text of the answer's thinking blocks (extended thinking), a redacted one standing as
/// `[redacted thinking]` (`None`: no thinking block).
fn thinking_text(content: &[ContentBlock]) -> Option<String> {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|b| match b.kind.as_str() {
            "thinking" => b.thinking.as_deref(),
            "redacted_thinking" => Some("[redacted thinking]"),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

fn block<'a>(part: &'a Part, images: &Base64Cache) -> Block<'a> {
    match part {
        Part::Text(text) => Block::Text { text },
        Part::Image(img) => Block::Image {
            source: Source {
                kind: "base64",
                media_type: &img.mime,
                data: images.encode(img),
            },
        },
    }
}

/// A Messages API request.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage<'a>>,
    temperature: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    /// Constrained output: one tool whose input schema is the answer's schema, and a `tool_choice` forcing it.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tool<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'static str,
    description: &'static str,
    input_schema: &'a serde_json::Value,
}

/// The name of the tool that carries a constrained answer.
const ANSWER_TOOL: &str = "answer";

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text { text: &'a str },
    Image { source: Source<'a> },
}

#[derive(Serialize)]
struct Source<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    #[serde(serialize_with = "crate::transport::ser_arc_str")]
    data: Arc<str>,
}

#[derive(Deserialize)]
struct Response {
    content: Option<Vec<ContentBlock>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    /// A `tool_use` block's arguments: the constrained answer.
    input: Option<serde_json::Value>,
    /// A `thinking` block's text (extended thinking).
    thinking: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    /// Input tokens after the last cache breakpoint only.
    input_tokens: Option<u64>,
    /// Every output token, thinking included.
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}
