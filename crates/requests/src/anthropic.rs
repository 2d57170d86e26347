//! Anthropic Messages API (`POST {base}/v1/messages`): system prompt as a top-level field, base64 image blocks,
//! no `n` (one call per sample).

use std::sync::Arc;

use nmb_chat::{OutputFormat, Part, Role};
use serde::{Deserialize, Serialize};

use crate::backend::{
    check_n, finish, replica_url, replica_urls, Backend, BoxFuture, ChatRequest, Choice,
    Completion, Usage,
};
use crate::error::{CallError, ErrorClass};
use crate::spec::ModelSpec;
use crate::transport::{malformed, parse_body, send, ApiKey, Transport};

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

pub struct AnthropicBackend {
    spec: ModelSpec,
    /// `{base}/v1/messages` of each replica.
    urls: Vec<String>,
    replicas: Vec<String>,
    key: Option<ApiKey>,
    transport: Transport,
    options: AnthropicOptions,
}

impl AnthropicBackend {
    pub fn new(
        spec: ModelSpec,
        key: Option<ApiKey>,
        transport: Transport,
        options: AnthropicOptions,
    ) -> Self {
        let (urls, replicas) = replica_urls(&spec, |base| format!("{base}/v1/messages"));
        AnthropicBackend {
            spec,
            urls,
            replicas,
            key,
            transport,
            options,
        }
    }

    async fn call(&self, replica: usize, req: &ChatRequest) -> Result<Completion, CallError> {
        check_n(self, req)?;
        let body = self.body(req).map_err(|e| {
            CallError::new(ErrorClass::Other, format!("cannot encode request: {e}"))
        })?;
        let mut http = self
            .transport
            .client
            .post(replica_url(&self.urls, replica))
            .header("content-type", "application/json")
            .header("anthropic-version", &self.options.version)
            .body(body);
        if let Some(k) = &self.key {
            http = http.header("x-api-key", k.expose());
        }
        let secret = self.key.as_ref().map(ApiKey::expose);
        let reply = send(http, secret).await?;
        parse_response(reply.body, reply.latency)
            .map(|c| c.redacted(secret))
            .map_err(|e| e.redacted(secret))
    }

    fn body(&self, req: &ChatRequest) -> serde_json::Result<Vec<u8>> {
        let system: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image(_) => None,
            })
            .collect();
        let messages = req
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| WireMessage {
                role: if m.role == Role::Assistant {
                    "assistant"
                } else {
                    "user"
                },
                content: m.parts.iter().map(|p| self.block(p)).collect(),
            })
            .collect();
        let p = &req.params;
        // Anthropic has no JSON mode; a forced tool call is its constrained output.
        let schema = match &req.output {
            OutputFormat::Json { schema: Some(s) } => Some(s),
            _ => None,
        };
        let body = Body {
            model: &self.spec.model,
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
        };
        serde_json::to_vec(&body)
    }

    fn block<'a>(&self, part: &'a Part) -> Block<'a> {
        match part {
            Part::Text(text) => Block::Text { text },
            Part::Image(img) => Block::Image {
                source: Source {
                    kind: "base64",
                    media_type: &img.mime,
                    data: self.transport.images.encode(img),
                },
            },
        }
    }
}

impl Backend for AnthropicBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        false
    }
    fn supports_images(&self) -> bool {
        true
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("forced tool call")
    }
    fn max_image_side(&self) -> Option<u32> {
        // Anthropic resizes images whose long edge exceeds 1568 px.
        Some(1568)
    }
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        Box::pin(self.call(0, req))
    }
    fn replicas(&self) -> &[String] {
        &self.replicas
    }
    fn complete_on<'a>(
        &'a self,
        replica: usize,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        Box::pin(self.call(replica, req))
    }
}

#[derive(Serialize)]
struct Body<'a> {
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
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

fn parse_response(body: String, latency: std::time::Duration) -> Result<Completion, CallError> {
    let resp: Response = match parse_body("Anthropic", &body) {
        Ok(r) => r,
        Err(msg) => return Err(malformed(msg, body)),
    };
    let stop = resp.stop_reason.unwrap_or_default();
    let usage = resp.usage.map_or(Usage::default(), |u| Usage {
        input_tokens: u.input_tokens.unwrap_or(0),
        output_tokens: u.output_tokens.unwrap_or(0),
    });
    let Some(content) = resp.content else {
        return Err(malformed(
            "Anthropic response has no \"content\" field",
            body,
        ));
    };
    let texts: Vec<String> = content
        .into_iter()
        .filter_map(|b| match b.kind.as_str() {
            "text" => b.text,
            "tool_use" => b.input.map(|i| i.to_string()),
            _ => None,
        })
        .collect();
    let refused = stop == "refusal";
    if texts.is_empty() && !refused {
        return Err(malformed(
            format!("Anthropic response has no text content (stop_reason {stop:?})"),
            body,
        ));
    }
    let choice = Choice {
        text: texts.concat(),
        finish_reason: stop,
        refused,
    };
    finish(vec![choice], body, usage, latency)
}
