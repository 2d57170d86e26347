//! OpenAI chat completions (`POST {base}/chat/completions`), which also covers vLLM, SGLang, TGI, Ollama,
//! llama.cpp server and OpenRouter through a custom base URL.

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_chat::{Message, OutputFormat, Part, Role};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::adjust::{refused_parameter, Adjustment, Adjustments};
use crate::backend::{ChatRequest, Choice, Usage};
use crate::error::{classify_status, snippet, CallError};
use crate::http::{parse_json, Answer, KeyHeader, Wire};
use crate::transport::{malformed, Base64Cache};

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
    /// Ask as OpenAI's reasoning models require from the first request (`max_completion_tokens`, no
    /// `temperature` other than 1, no `top_p`), for this reason; `None` waits for the server to refuse them.
    pub reasoning: Option<String>,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        OpenAiOptions {
            max_tokens_field: MaxTokensField::MaxTokens,
            supports_n: true,
            reasoning: None,
        }
    }
}

/// The OpenAI chat completions wire format, for one model.
#[derive(Debug, Clone)]
pub struct OpenAiWire {
    pub model: String,
    pub options: OpenAiOptions,
    /// What the server refused (or the model is known to refuse), shared by every request.
    adjusted: Arc<Adjustments>,
}

impl OpenAiWire {
    pub fn new(model: String, options: OpenAiOptions) -> Self {
        let adjusted = Arc::new(Adjustments::default());
        if let Some(why) = &options.reasoning {
            let refused = [
                Adjustment::MaxCompletionTokens,
                Adjustment::NoTemperature,
                Adjustment::NoTopP,
            ];
            for a in refused {
                adjusted.add(a, why.clone());
            }
        }
        OpenAiWire {
            model,
            options,
            adjusted,
        }
    }
}

impl Wire for OpenAiWire {
    const KEY_HEADER: KeyHeader = KeyHeader::Bearer;
    type Body<'a> = Body<'a>;

    fn path(&self) -> String {
        "/chat/completions".into()
    }
    fn batch_protocol(&self) -> Option<crate::backend::BatchProtocol> {
        Some(crate::backend::BatchProtocol::OpenAi)
    }
    fn body<'a>(&'a self, req: &'a ChatRequest, images: &Base64Cache) -> Body<'a> {
        let p = &req.params;
        let adjusted = |a| self.adjusted.has(a);
        let completion = self.options.max_tokens_field == MaxTokensField::MaxCompletionTokens
            || adjusted(Adjustment::MaxCompletionTokens);
        let (max_tokens, max_completion_tokens) = match completion {
            false => (Some(p.max_tokens), None),
            true => (None, Some(p.max_tokens)),
        };
        // Reasoning models take the default temperature (1) and no other.
        let temperature = (p.sends_temperature()
            && (!adjusted(Adjustment::NoTemperature) || p.temperature == 1.0))
            .then_some(p.temperature);
        Body {
            model: &self.model,
            messages: req
                .messages
                .iter()
                .map(|m| wire_message(m, images))
                .collect(),
            temperature,
            top_p: (p.sends_top_p() && !adjusted(Adjustment::NoTopP)).then_some(p.top_p),
            max_tokens,
            max_completion_tokens,
            seed: p.seed,
            n: (req.n > 1).then_some(req.n),
            response_format: response_format(&req.output),
            reasoning_effort: p.reasoning_effort.map(|e| e.as_str()),
        }
    }
    fn parse(&self, raw: &str) -> Result<Answer, CallError> {
        let resp: Response = parse_json("OpenAI", raw)?;
        if let (None, Some(err)) = (&resp.choices, &resp.error) {
            return Err(in_body_error(err, raw.to_string()));
        }
        let Some(wire_choices) = resp.choices else {
            let what = "OpenAI response has no \"choices\" field";
            return Err(malformed(what, raw.into()));
        };
        let mut choices = Vec::with_capacity(wire_choices.len());
        for (i, c) in wire_choices.into_iter().enumerate() {
            let Some(c) = choice(c) else {
                let what = format!("OpenAI choice {i} has no message content and is not a refusal");
                return Err(malformed(what, raw.into()));
            };
            choices.push(c);
        }
        let usage = resp.usage.map_or(Usage::default(), |u| Usage {
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            ..Usage::from_counts(u.prompt_tokens, u.completion_tokens)
        });
        Ok(Answer { choices, usage })
    }
    fn supports_n(&self) -> bool {
        self.options.supports_n
    }
    fn max_image_side(&self) -> Option<u32> {
        // OpenAI fits high-detail images into 2048 x 2048.
        Some(2048)
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("response_format json_schema")
    }
    fn reasoning_parameters(&self) -> Option<&'static str> {
        Some("reasoning_effort")
    }
    fn adjust(&self, err: &CallError) -> bool {
        let Some(a) = refused_parameter(err) else {
            return false;
        };
        let message = err.raw.as_deref().and_then(error_message);
        let why = message.unwrap_or_else(|| err.message.clone());
        self.adjusted
            .add(a, format!("the server refused it: {}", snippet(&why, 200)));
        true
    }
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        self.adjusted.all()
    }
    fn adopt(&self, a: Adjustment, why: &str) {
        self.adjusted.add(a, why);
    }
}

/// The `error.message` of an OpenAI error body.
fn error_message(raw: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(raw).ok()?;
    v["error"]["message"].as_str().map(str::to_string)
}

/// A chat completions request.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
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
    /// `minimal`, `low`, `medium`, `high` (and `none` on GPT-5.1), as OpenAI's reasoning models take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
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

/// `{"url": "data:MIME;base64,DATA"}`, the data URL written straight into the body without building the
/// string first.
struct ImageUrl<'a> {
    mime: &'a str,
    b64: Arc<str>,
}

impl Serialize for ImageUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(
            "url",
            &format_args!("data:{};base64,{}", self.mime, self.b64),
        )?;
        map.end()
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn wire_message<'a>(m: &'a Message, images: &Base64Cache) -> WireMessage<'a> {
    let content = match m.parts.as_slice() {
        [Part::Text(text)] if !m.as_parts => Content::Text(text),
        parts => Content::Parts(
            parts
                .iter()
                .map(|p| match p {
                    Part::Text(text) => WirePart::Text { text },
                    Part::Image(img) => WirePart::ImageUrl {
                        image_url: ImageUrl {
                            mime: &img.mime,
                            b64: images.encode(img),
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
    /// The thinking, apart from the answer: vLLM's and llama.cpp's reasoning parsers (`reasoning_content`;
    /// newer vLLM and OpenRouter name it `reasoning`).
    reasoning_content: Option<String>,
    reasoning: Option<String>,
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
    /// Every input token, cached ones included.
    prompt_tokens: Option<u64>,
    /// Every output token, reasoning included.
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    message: Option<String>,
    code: Option<serde_json::Value>,
}

fn choice(c: WireChoice) -> Option<Choice> {
    let finish_reason = c.finish_reason.unwrap_or_default();
    let msg = c.message;
    let refusal = msg.as_ref().and_then(|m| m.refusal.clone());
    let thinking = msg.as_ref().and_then(|m| {
        let apart = m.reasoning_content.as_ref().or(m.reasoning.as_ref());
        apart.filter(|t| !t.is_empty()).cloned()
    });
    let text = msg.and_then(|m| m.content).map(|content| match content {
        ResponseContent::Text(t) => t,
        ResponseContent::Parts(ps) => ps.into_iter().filter_map(|p| p.text).collect(),
    });
    let refused = finish_reason == "content_filter" || refusal.is_some();
    let choice = match (text, refused) {
        (Some(text), _) => Choice::new(text, finish_reason, refused),
        (None, true) => Choice::new(refusal.unwrap_or_default(), finish_reason, refused),
        // All thinking and no answer: cut off at the token limit while thinking (OpenAI's reasoning models
        // report the reasoning only as a count, so no content and finish reason `length` is the same).
        (None, false) if thinking.is_some() || finish_reason == "length" => {
            Choice::new(String::new(), finish_reason, false)
        }
        (None, false) => return None,
    };
    Some(Choice { thinking, ..choice })
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
