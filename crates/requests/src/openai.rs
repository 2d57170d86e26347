//! OpenAI chat completions (`POST {base}/chat/completions`), which also covers vLLM, SGLang, TGI, Ollama,
//! llama.cpp server and OpenRouter through a custom base URL.

use std::sync::Arc;

use nmb_chat::{Message, OutputFormat, Part, Role};
use serde::{Deserialize, Serialize, Serializer};

use crate::backend::{
    check_n, finish, replica_url, replica_urls, Backend, BoxFuture, ChatRequest, Choice,
    Completion, Usage,
};
use crate::error::{classify_status, CallError, ErrorClass};
use crate::spec::ModelSpec;
use crate::transport::{malformed, parse_body, send, snippet, ApiKey, Transport};

/// Which field carries the token limit: `max_tokens` (what compatible servers read) or `max_completion_tokens`
/// (what OpenAI's reasoning models require).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    pub max_tokens_field: MaxTokensField,
    /// Compatible servers differ: some ignore `n`. Turn off to make the caller send one request per sample.
    pub supports_n: bool,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        OpenAiOptions {
            max_tokens_field: MaxTokensField::MaxTokens,
            supports_n: true,
        }
    }
}

pub struct OpenAiBackend {
    spec: ModelSpec,
    /// `{base}/chat/completions` of each replica.
    urls: Vec<String>,
    replicas: Vec<String>,
    key: Option<ApiKey>,
    transport: Transport,
    options: OpenAiOptions,
}

impl OpenAiBackend {
    /// `key` may be `None` only for a custom base URL (a local server); see [`crate::connect`].
    pub fn new(
        spec: ModelSpec,
        key: Option<ApiKey>,
        transport: Transport,
        options: OpenAiOptions,
    ) -> Self {
        let (urls, replicas) = replica_urls(&spec, |base| format!("{base}/chat/completions"));
        OpenAiBackend {
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
            .body(body);
        if let Some(k) = &self.key {
            http = http.bearer_auth(k.expose());
        }
        let secret = self.key.as_ref().map(ApiKey::expose);
        let reply = send(http, secret).await?;
        parse_response(reply.body, reply.latency)
            .map(|c| c.redacted(secret))
            .map_err(|e| e.redacted(secret))
    }

    fn body(&self, req: &ChatRequest) -> serde_json::Result<Vec<u8>> {
        let p = &req.params;
        let (max_tokens, max_completion_tokens) = match self.options.max_tokens_field {
            MaxTokensField::MaxTokens => (Some(p.max_tokens), None),
            MaxTokensField::MaxCompletionTokens => (None, Some(p.max_tokens)),
        };
        let body = Body {
            model: &self.spec.model,
            messages: req
                .messages
                .iter()
                .map(|m| wire_message(m, &self.transport))
                .collect(),
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens,
            max_completion_tokens,
            seed: p.seed,
            n: (req.n > 1).then_some(req.n),
            response_format: response_format(&req.output),
        };
        serde_json::to_vec(&body)
    }
}

impl Backend for OpenAiBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        self.options.supports_n
    }
    fn supports_images(&self) -> bool {
        true
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("response_format json_schema")
    }
    fn max_image_side(&self) -> Option<u32> {
        // OpenAI fits high-detail images into 2048 x 2048.
        Some(2048)
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
    messages: Vec<WireMessage<'a>>,
    temperature: f64,
    top_p: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Content<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: DataUrl<'a>,
}

/// `data:MIME;base64,DATA`, written straight into the body without building the string first.
struct DataUrl<'a> {
    mime: &'a str,
    b64: Arc<str>,
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("data:{};base64,{}", self.mime, self.b64))
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn wire_message<'a>(m: &'a Message, t: &Transport) -> WireMessage<'a> {
    let content = match m.parts.as_slice() {
        [Part::Text(text)] => Content::Text(text),
        parts => Content::Parts(
            parts
                .iter()
                .map(|p| match p {
                    Part::Text(text) => WirePart::Text { text },
                    Part::Image(img) => WirePart::ImageUrl {
                        image_url: ImageUrl {
                            url: DataUrl {
                                mime: &img.mime,
                                b64: t.images.encode(img),
                            },
                        },
                    },
                })
                .collect(),
        ),
    };
    WireMessage {
        role: role_name(m.role),
        content,
    }
}

fn response_format(output: &OutputFormat) -> Option<serde_json::Value> {
    match output {
        OutputFormat::Text => None,
        OutputFormat::Json { schema: None } => Some(serde_json::json!({"type": "json_object"})),
        OutputFormat::Json {
            schema: Some(schema),
        } => Some(serde_json::json!({
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": false}
        })),
    }
}

#[derive(Deserialize)]
struct Response {
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
    /// OpenRouter and some proxies answer errors with HTTP 200 and an `error` object.
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: Option<ResponseMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    content: Option<ResponseContent>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ResponseContent {
    Text(String),
    Parts(Vec<ResponsePart>),
}

#[derive(Deserialize)]
struct ResponsePart {
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    message: Option<String>,
    code: Option<serde_json::Value>,
}

fn parse_response(body: String, latency: std::time::Duration) -> Result<Completion, CallError> {
    let resp: Response = match parse_body("OpenAI", &body) {
        Ok(r) => r,
        Err(msg) => return Err(malformed(msg, body)),
    };
    if let (None, Some(err)) = (&resp.choices, &resp.error) {
        return Err(in_body_error(err, body.clone()));
    }
    let Some(wire_choices) = resp.choices else {
        return Err(malformed("OpenAI response has no \"choices\" field", body));
    };
    let mut choices = Vec::with_capacity(wire_choices.len());
    for (i, c) in wire_choices.into_iter().enumerate() {
        match choice(c) {
            Some(c) => choices.push(c),
            None => {
                return Err(malformed(
                    format!("OpenAI choice {i} has no message content and is not a refusal"),
                    body,
                ))
            }
        }
    }
    let usage = resp.usage.map_or(Usage::default(), |u| Usage {
        input_tokens: u.prompt_tokens.unwrap_or(0),
        output_tokens: u.completion_tokens.unwrap_or(0),
    });
    finish(choices, body, usage, latency)
}

fn choice(c: WireChoice) -> Option<Choice> {
    let finish_reason = c.finish_reason.unwrap_or_default();
    let msg = c.message;
    let refusal = msg.as_ref().and_then(|m| m.refusal.clone());
    let text = msg.and_then(|m| m.content).map(|content| match content {
        ResponseContent::Text(t) => t,
        ResponseContent::Parts(ps) => ps.into_iter().filter_map(|p| p.text).collect(),
    });
    let refused = finish_reason == "content_filter" || refusal.is_some();
    match (text, refused) {
        (Some(text), _) => Some(Choice {
            text,
            finish_reason,
            refused,
        }),
        (None, true) => Some(Choice {
            text: refusal.unwrap_or_default(),
            finish_reason,
            refused,
        }),
        (None, false) => None,
    }
}

fn in_body_error(err: &WireError, raw: String) -> CallError {
    let msg = err.message.clone().unwrap_or_default();
    let status = err
        .code
        .as_ref()
        .and_then(serde_json::Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    let code_text = err
        .code
        .as_ref()
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let class = match status {
        Some(s) => classify_status(s, &msg),
        None => classify_status(400, &format!("{code_text} {msg}")),
    };
    let mut e = CallError::new(
        class,
        format!("error in response body: {}", snippet(&msg, 300)),
    )
    .with_raw(raw);
    e.status = status;
    e
}
