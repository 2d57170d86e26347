//! Anthropic Messages API (`POST {base}/v1/messages`): system prompt as a top-level field, base64 image blocks,
//! no `n` (one call per sample).

use std::sync::Arc;

use std::collections::BTreeMap;

use nmb_chat::{GenParams, OutputFormat, Part};
use serde::{Deserialize, Serialize};

use crate::adjust::{Adjustment, Adjustments};
use crate::backend::{ChatRequest, Choice, Usage};
use crate::error::{snippet, CallError, ErrorClass};
use crate::http::{parse_json, system_texts, turns, Answer, KeyHeader, Wire};
use crate::rules::{self, Sampling};
use crate::transport::{malformed, Base64Cache};

#[derive(Debug, Clone)]
pub struct AnthropicOptions {
    pub version: String,
    /// Never send `top_p` (models that refuse it alongside `temperature` are known by name and left without it
    /// anyway: [`crate::rules::CLAUDE_ONE_SAMPLER`]).
    pub send_top_p: bool,
    /// Mark the system prompt and the case (the first user message) for Anthropic's prompt cache.
    pub prompt_cache: bool,
}

impl Default for AnthropicOptions {
    fn default() -> Self {
        AnthropicOptions {
            version: "2023-06-01".into(),
            send_top_p: true,
            prompt_cache: true,
        }
    }
}

/// A prompt-cache breakpoint: "everything up to and including" the marked block is cached, in the order tools,
/// system, messages, and a later request with the same prefix reads it at a tenth of the input rate (a write
/// costs 1.25 times it); at most four breakpoints; below a model's minimum (1,024 tokens for most Claude models)
/// nothing is cached and nothing fails (Anthropic's "Prompt caching" documentation).
#[derive(Serialize, Clone, Copy)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Ephemeral = Ephemeral { kind: "ephemeral" };

/// The Anthropic Messages wire format, for one model.
#[derive(Debug, Clone)]
pub struct AnthropicWire {
    pub model: String,
    pub options: AnthropicOptions,
    /// What extended thinking made the requests leave out, for the run manifest.
    adjusted: Arc<Adjustments>,
}

impl AnthropicWire {
    pub fn new(model: String, options: AnthropicOptions) -> Self {
        AnthropicWire {
            model,
            options,
            adjusted: Arc::default(),
        }
    }

    /// The sampling parameters this model takes together ([`crate::rules`]), after what the server refused.
    fn sampling(&self, temperature: Option<f64>, top_p: Option<f64>) -> (Option<f64>, Option<f64>) {
        let (mut temperature, mut top_p) = (temperature, top_p);
        if self.adjusted.has(Adjustment::NoTemperature) {
            temperature = None;
        }
        if self.adjusted.has(Adjustment::NoTopP) {
            top_p = None;
        }
        match rules::claude_sampling(&self.model) {
            Sampling::Both => {}
            Sampling::OneOf if temperature.is_some() && top_p.is_some() => {
                self.adjusted
                    .add(Adjustment::NoTopP, rules::CLAUDE_ONE_SAMPLER.reason());
                top_p = None;
            }
            Sampling::OneOf => {}
            Sampling::Neither => {
                let why = rules::CLAUDE_NO_SAMPLER.reason();
                if temperature.take().is_some() {
                    self.adjusted.add(Adjustment::NoTemperature, why.clone());
                }
                if top_p.take().is_some() {
                    self.adjusted.add(Adjustment::NoTopP, why);
                }
            }
        }
        (temperature, top_p)
    }

    /// Notes what a request with extended thinking leaves out, each with the documented rule.
    fn note_thinking(&self, p: &GenParams, schema: bool) {
        if p.temperature != 1.0 {
            self.adjusted
                .add(Adjustment::NoTemperature, THINKING_TEMPERATURE);
        }
        if self.options.send_top_p && p.top_p < MIN_THINKING_TOP_P {
            self.adjusted.add(Adjustment::NoTopP, THINKING_TOP_P);
        }
        if schema {
            self.adjusted
                .add(Adjustment::ToolChoiceAuto, THINKING_TOOL_CHOICE);
        }
    }
}

// Anthropic's rules for extended thinking ("Building with extended thinking"): budget_tokens "must be set to a
// value less than max_tokens", at least 1,024; "Thinking isn't compatible with temperature or top_k modifications
// as well as forced tool use"; "you can set top_p to values between 1 and 0.95"; "Tool use with thinking only
// supports tool_choice: {"type": "auto"} (the default) or tool_choice: {"type": "none"}".
const MIN_THINKING_BUDGET: u32 = 1024;
const MIN_THINKING_TOP_P: f64 = 0.95;
const THINKING_TEMPERATURE: &str =
    "extended thinking is not compatible with temperature modifications (Anthropic's documentation)";
const THINKING_TOP_P: &str =
    "with extended thinking top_p may only be set between 0.95 and 1 (Anthropic's documentation)";
const THINKING_TOOL_CHOICE: &str = "extended thinking is not compatible with forced tool use: the answer \
     tool is offered with tool_choice auto, and an answer in text is read as text (Anthropic's documentation)";

impl Wire for AnthropicWire {
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-api-key");
    type Body<'a> = Body<'a>;

    fn path(&self) -> String {
        "/v1/messages".into()
    }
    fn batch_protocol(&self) -> Option<crate::backend::BatchProtocol> {
        Some(crate::backend::BatchProtocol::Anthropic)
    }
    fn headers(&self) -> Vec<(&'static str, &str)> {
        vec![("anthropic-version", &self.options.version)]
    }
    fn body<'a>(&'a self, req: &'a ChatRequest, images: &Base64Cache) -> Body<'a> {
        let system = system_texts(&req.messages);
        let mut replays = req.replay.iter();
        let mut messages: Vec<WireMessage> =
            turns(&req.messages, "assistant", |p| block(p, images))
                .map(|(role, content)| {
                    // An earlier answer's thinking goes back before it, unchanged.
                    let back = (role == "assistant")
                        .then(|| replays.next())
                        .flatten()
                        .and_then(Option::as_ref);
                    let content = replayed(back).into_iter().chain(content).collect();
                    WireMessage { role, content }
                })
                .collect();
        if self.options.prompt_cache {
            cache_marks(&mut messages);
        }
        let p = &req.params;
        // Anthropic has no JSON mode; a forced tool call is its constrained output.
        let schema = match &req.output {
            OutputFormat::Json { schema: Some(s) } => Some(s),
            _ => None,
        };
        let thinking = p.thinking_budget;
        if thinking.is_some() {
            self.note_thinking(p, schema.is_some());
        }
        let tool_choice = match thinking {
            Some(_) => serde_json::json!({"type": "auto"}),
            None => serde_json::json!({"type": "tool", "name": ANSWER_TOOL}),
        };
        let (temperature, top_p) = self.sampling(
            (p.sends_temperature() && (thinking.is_none() || p.temperature == 1.0))
                .then_some(p.temperature),
            (p.sends_top_p()
                && self.options.send_top_p
                && (thinking.is_none() || p.top_p >= MIN_THINKING_TOP_P))
                .then_some(p.top_p),
        );
        Body {
            model: &self.model,
            max_tokens: p.max_tokens,
            system: (!system.is_empty())
                .then(|| System::new(system.join("\n\n"), self.options.prompt_cache)),
            messages,
            temperature,
            top_p,
            tools: schema.map(|input_schema| {
                [Tool {
                    name: ANSWER_TOOL,
                    description: "Give your answer in exactly this structure.",
                    input_schema,
                }]
            }),
            tool_choice: schema.map(|_| tool_choice),
            thinking: thinking.map(|budget_tokens| Thinking {
                kind: "enabled",
                budget_tokens,
            }),
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
            // Saturating: counts near 2^64 make a sum the recorder refuses as out of range, not a panic.
            let input = u
                .input_tokens
                .map(|i| i.saturating_add(read).saturating_add(write));
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
        let replay = thinking.is_some().then(|| thinking_blocks(raw)).flatten();
        let text = answer_text(content);
        // Cut off at max_tokens before any text (all thinking, or nothing): an empty answer, as OpenAI's reasoning
        // models give one, never a malformed response to be paid for again.
        if text.is_none() && !refused && stop != "max_tokens" {
            let what = format!("Anthropic response has no text content (stop_reason {stop:?})");
            return Err(malformed(what, raw.into()));
        }
        let choice = Choice {
            thinking,
            replay,
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
    fn thinking_budget(&self, p: &GenParams) -> Result<&'static str, String> {
        let Some(budget) = p.thinking_budget else {
            return Ok("thinking (extended thinking)");
        };
        if budget < MIN_THINKING_BUDGET {
            return Err(format!(
                "a thinking budget of {budget} tokens is below Anthropic's minimum of {MIN_THINKING_BUDGET}"
            ));
        }
        if budget >= p.max_tokens {
            return Err(format!(
                "the thinking budget ({budget}) must be less than --max-tokens ({}), which counts the \
                 thinking too (Anthropic's rule)",
                p.max_tokens
            ));
        }
        Ok("thinking (extended thinking)")
    }
    fn adjust(&self, err: &CallError) -> bool {
        let Some(a) = refused_sampling(err) else {
            return false;
        };
        let why = err.raw.as_deref().and_then(error_message);
        let why = why.unwrap_or_else(|| err.message.clone());
        self.adjusted
            .add(a, format!("the server refused it: {}", snippet(&why, 200)))
    }
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        self.adjusted.all()
    }
    fn adopt(&self, a: Adjustment, why: &str) {
        self.adjusted.add(a, why);
    }
}

/// The sampling parameter a 400 `invalid_request_error` says the model refuses, in Anthropic's words:
/// "`temperature` and `top_p` cannot both be specified for this model. Please use only one." (Claude 4.5 and
/// Opus 4.1: `top_p` is left out) and "`temperature` is deprecated for this model." (Claude Opus 4.7).
pub fn refused_sampling(err: &CallError) -> Option<Adjustment> {
    if err.class != ErrorClass::ClientError {
        return None;
    }
    let text = format!("{} {}", err.message, err.raw.as_deref().unwrap_or("")).to_ascii_lowercase();
    let text = text.replace('`', "");
    if text.contains("temperature and top_p cannot both be specified") {
        Some(Adjustment::NoTopP)
    } else if text.contains("temperature is deprecated") {
        Some(Adjustment::NoTemperature)
    } else if text.contains("top_p is deprecated") {
        Some(Adjustment::NoTopP)
    } else {
        None
    }
}

/// The `error.message` of an Anthropic error body.
fn error_message(raw: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(raw).ok()?;
    v["error"]["message"].as_str().map(str::to_string)
}

/// The thinking and redacted-thinking blocks of a response, verbatim, as a later turn must send them back.
fn thinking_blocks(raw: &str) -> Option<serde_json::Value> {
    #[derive(Deserialize)]
    struct Content {
        content: Vec<serde_json::Value>,
    }
    let blocks: Vec<serde_json::Value> = serde_json::from_str::<Content>(raw)
        .ok()?
        .content
        .into_iter()
        .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        .collect();
    (!blocks.is_empty()).then_some(serde_json::Value::Array(blocks))
}

/// The blocks an earlier answer sends back ([`thinking_blocks`]).
fn replayed(back: Option<&serde_json::Value>) -> Vec<Block<'_>> {
    let Some(serde_json::Value::Array(blocks)) = back else {
        return Vec::new();
    };
    blocks.iter().map(Block::Verbatim).collect()
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
        Part::Text(text) => Block::Text {
            text,
            cache_control: None,
        },
        Part::Image(img) => Block::Image {
            source: Source {
                kind: "base64",
                media_type: &img.mime,
                data: images.encode(img),
            },
            cache_control: None,
        },
    }
}

/// A Messages API request.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    /// Constrained output: one tool whose input schema is the answer's schema, and a `tool_choice` forcing it.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tool<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<serde_json::Value>,
    /// Extended thinking (`--thinking-budget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

/// The system prompt: plain text, or one text block marked for the prompt cache.
#[derive(Serialize)]
#[serde(untagged)]
enum System {
    Text(String),
    Cached([CachedText; 1]),
}

#[derive(Serialize)]
struct CachedText {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    cache_control: Ephemeral,
}

impl System {
    fn new(text: String, cached: bool) -> System {
        if !cached {
            return System::Text(text);
        }
        System::Cached([CachedText {
            kind: "text",
            text,
            cache_control: EPHEMERAL,
        }])
    }
}

/// Marks the end of the first user message, which holds the case (its history, notes and images), so that a
/// task's other samples and the later turns of a consult read system prompt and case from the cache. The system
/// prompt carries the other mark ([`System::new`]).
fn cache_marks(messages: &mut [WireMessage<'_>]) {
    let first = messages.iter_mut().find(|m| m.role == "user");
    match first.and_then(|m| m.content.last_mut()) {
        Some(Block::Text { cache_control, .. } | Block::Image { cache_control, .. }) => {
            *cache_control = Some(EPHEMERAL);
        }
        Some(Block::Verbatim(_)) | None => {}
    }
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
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
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
    Image {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
    /// A block the API gave, sent back as it came (a thinking block with its signature).
    #[serde(untagged)]
    Verbatim(&'a serde_json::Value),
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
