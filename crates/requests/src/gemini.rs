//! Gemini generateContent (`POST {base}/v1beta/models/{model}:generateContent`). The key travels in the
//! `x-goog-api-key` header, never in the URL, so it cannot leak through URLs in errors or logs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use nmb_chat::{GenParams, OutputFormat, Part, ReasoningEffort};
use serde::{Deserialize, Serialize};

use crate::adjust::{Adjustment, Adjustments};
use crate::backend::{ChatRequest, Choice, Usage};
use crate::error::{parse_proto_duration, snippet, CallError, ErrorClass};
use crate::http::{parse_json, system_texts, turns, Answer, KeyHeader, Wire};
use crate::rules;
use crate::transport::{malformed, Base64Cache};

/// Finish reasons that mean the provider withheld the answer.
const BLOCKED: [&str; 6] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

/// The Gemini generateContent wire format, for one model.
#[derive(Debug, Clone)]
pub struct GeminiWire {
    pub model: String,
    /// How requests differ from their parameters ([`crate::rules`], or what the server refused), for the run
    /// manifest.
    adjusted: Arc<Adjustments>,
    /// Thinking levels the server refused for this model ("Thinking level MEDIUM is not supported").
    refused_levels: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl GeminiWire {
    pub fn new(model: String) -> Self {
        GeminiWire {
            model,
            adjusted: Arc::default(),
            refused_levels: Arc::default(),
        }
    }

    /// The `thinkingConfig` for a token budget, moved into the model's documented range.
    fn budget_config(&self, asked: u32) -> ThinkingConfig {
        let sent = match rules::gemini_budget(&self.model) {
            Some(range) => {
                let sent = range.clamp(asked);
                if sent != asked {
                    let why = format!(
                        "a thinkingBudget of {asked} is sent as {sent}: {}",
                        range.rule.reason()
                    );
                    self.adjusted.add(Adjustment::ThinkingBudget, why);
                }
                sent
            }
            // The server refused a budget of 0 ("This model only works in thinking mode"): 128, 2.5 Pro's least.
            None if asked == 0 && self.adjusted.has(Adjustment::ThinkingBudget) => 128,
            None => asked,
        };
        ThinkingConfig {
            include_thoughts: sent > 0,
            thinking_level: None,
            thinking_budget: Some(sent),
        }
    }

    /// The `thinkingConfig` for an effort, with the thought summaries asked for (`includeThoughts`). Gemini 3
    /// takes a level the model has ([`rules::gemini_levels`]; it cannot stop thinking, so `none` asks the
    /// least); Gemini 2.5 takes a token budget: `none` is 0, then 128, 1024, 8192 and 24576 (Flash's most),
    /// moved into the model's range ([`rules::gemini_budget`]).
    fn effort_config(&self, effort: ReasoningEffort) -> ThinkingConfig {
        if !takes_thinking_level(&self.model) {
            let budget = match effort {
                ReasoningEffort::None => 0,
                ReasoningEffort::Minimal => 128,
                ReasoningEffort::Low => 1024,
                ReasoningEffort::Medium => 8192,
                ReasoningEffort::High => 24576,
            };
            return self.budget_config(budget);
        }
        let (documented, rule) = rules::gemini_levels(&self.model);
        let refused = self
            .refused_levels
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let allowed: Vec<&'static str> = (documented.iter().copied())
            .filter(|l| !refused.contains(l))
            .collect();
        let allowed = if allowed.is_empty() {
            documented.to_vec()
        } else {
            allowed
        };
        let level = rules::nearest_level(rules::level_of(effort), &allowed);
        if level != effort.as_str() {
            let rule = rule.unwrap_or(&rules::GEMINI_FLASH_LEVELS);
            let why = format!(
                "--reasoning-effort {effort} is sent as thinkingLevel {level}: {}",
                rule.reason()
            );
            self.adjusted.add(Adjustment::ThinkingLevel, why);
        }
        ThinkingConfig {
            include_thoughts: true,
            thinking_level: Some(level),
            thinking_budget: None,
        }
    }
}

impl Wire for GeminiWire {
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-goog-api-key");
    type Body<'a> = Body<'a>;

    fn path(&self) -> String {
        let model = self.model.trim_start_matches("models/");
        format!("/v1beta/models/{model}:generateContent")
    }
    fn batch_protocol(&self) -> Option<crate::backend::BatchProtocol> {
        Some(crate::backend::BatchProtocol::Gemini)
    }
    fn body<'a>(&'a self, req: &'a ChatRequest, images: &Base64Cache) -> Body<'a> {
        let system: Vec<WirePart> = system_texts(&req.messages)
            .into_iter()
            .map(|text| WirePart::Text { text })
            .collect();
        let contents = turns(&req.messages, "model", |p| part(p, images))
            .map(|(role, parts)| Content { role, parts })
            .collect();
        let p = &req.params;
        let (mime, schema) = match &req.output {
            OutputFormat::Text => (None, None),
            OutputFormat::Json { schema } => (Some("application/json"), schema.as_ref()),
        };
        Body {
            contents,
            system_instruction: (!system.is_empty()).then_some(SystemInstruction { parts: system }),
            generation_config: GenerationConfig {
                temperature: p.sends_temperature().then_some(p.temperature),
                top_p: p.sends_top_p().then_some(p.top_p),
                max_output_tokens: p.max_tokens,
                candidate_count: (req.n > 1).then_some(req.n),
                seed: p.seed,
                response_mime_type: mime,
                response_json_schema: schema,
                thinking_config: match (p.thinking_budget, p.reasoning_effort) {
                    (Some(budget), _) => Some(self.budget_config(budget)),
                    (None, Some(e)) => Some(self.effort_config(e)),
                    // A thinking model returns its thought summaries only when asked.
                    (None, None) => rules::gemini_thinks(&self.model).then_some(ThinkingConfig {
                        include_thoughts: true,
                        thinking_level: None,
                        thinking_budget: None,
                    }),
                },
            },
        }
    }
    fn parse(&self, raw: &str) -> Result<Answer, CallError> {
        let resp: Response = parse_json("Gemini", raw)?;
        if let Some(reason) = resp.prompt_feedback.and_then(|f| f.block_reason) {
            let what = format!("Gemini blocked the prompt (blockReason {reason})");
            return Err(CallError::new(ErrorClass::Refusal, what).with_raw(raw));
        }
        let usage = resp.usage_metadata.map_or(Usage::default(), |u| {
            // `candidatesTokenCount` leaves the thoughts out; they are billed as output.
            let thoughts = u.thoughts_token_count.unwrap_or(0);
            let output = u.candidates_token_count.map(|c| c.saturating_add(thoughts));
            Usage {
                reasoning_tokens: thoughts,
                cached_input_tokens: u.cached_content_token_count.unwrap_or(0),
                ..Usage::from_counts(
                    u.prompt_token_count,
                    output.or((thoughts > 0).then_some(thoughts)),
                )
            }
        });
        let candidates = resp.candidates.unwrap_or_default();
        let mut choices = Vec::with_capacity(candidates.len());
        for (i, c) in candidates.into_iter().enumerate() {
            let choice = candidate(c).map_err(|reason| {
                let what = format!("Gemini candidate {i} has no text (finishReason {reason:?})");
                malformed(what, raw.into())
            })?;
            choices.push(choice);
        }
        Ok(Answer { choices, usage })
    }
    fn supports_n(&self) -> bool {
        true
    }
    fn max_image_side(&self) -> Option<u32> {
        // Gemini scales images down to fit 3072 x 3072.
        Some(3072)
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("responseJsonSchema")
    }
    fn reasoning_parameters(&self) -> Option<&'static str> {
        Some("generationConfig.thinkingConfig (thinkingLevel from Gemini 3, thinkingBudget before)")
    }
    fn thinking_budget(&self, p: &GenParams) -> Result<&'static str, String> {
        // The API refuses thinkingBudget and thinkingLevel together, and a model's budget range is its own
        // (checked by the server): nmb sends one of them.
        if p.thinking_budget.is_some() && p.reasoning_effort.is_some() {
            return Err(
                "give --thinking-budget or --reasoning-effort, not both: Gemini takes one \
                        thinkingConfig"
                    .into(),
            );
        }
        if let (Some(budget), Some(range)) = (p.thinking_budget, rules::gemini_budget(&self.model))
        {
            if !range.takes(budget) {
                let off = if range.off { "0 (no thinking) or " } else { "" };
                return Err(format!(
                    "{} takes a thinkingBudget of {off}{} to {}, not {budget} ({})",
                    self.model, range.min, range.max, range.rule.source
                ));
            }
        }
        Ok("generationConfig.thinkingConfig.thinkingBudget")
    }
    fn retry_hint(&self, body: &str) -> Option<std::time::Duration> {
        retry_delay(body)
    }
    fn adjust(&self, err: &CallError) -> bool {
        if err.class != ErrorClass::ClientError {
            return false;
        }
        let raw = err.raw.as_deref().unwrap_or("");
        let words = serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| err.message.clone());
        let why = format!("the server refused it: {}", snippet(&words, 200));
        let text = format!("{} {raw}", err.message).to_ascii_lowercase();
        if let Some(level) = refused_level(&text) {
            let new = (self
                .refused_levels
                .lock()
                .unwrap_or_else(|p| p.into_inner()))
            .insert(level);
            self.adjusted.add(Adjustment::ThinkingLevel, why);
            return new;
        }
        if text.contains("budget 0 is invalid") || text.contains("only works in thinking mode") {
            return self.adjusted.add(Adjustment::ThinkingBudget, why);
        }
        false
    }
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        self.adjusted.all()
    }
    fn adopt(&self, a: Adjustment, why: &str) {
        self.adjusted.add(a, why);
    }
}

/// The thinking level a 400 says the model does not take: "Thinking level MEDIUM is not supported for this
/// model." (the Gemini API) or "thinking_level MEDIUM is not supported by this model" (Vertex AI); `text` is
/// lowercased.
fn refused_level(text: &str) -> Option<&'static str> {
    ["thinking level ", "thinking_level "]
        .iter()
        .find_map(|marker| {
            let at = text.find(marker)? + marker.len();
            let rest = &text[at..];
            let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
            let level = ["minimal", "low", "medium", "high"]
                .into_iter()
                .find(|l| *l == word)?;
            rest.contains("not supported").then_some(level)
        })
}

/// The wait a Gemini error body asks for: `error.details[]` of type `google.rpc.RetryInfo`, whose `retryDelay` is
/// a `google.protobuf.Duration` ("31s"). Gemini sends it with a 429 instead of a Retry-After header.
pub fn retry_delay(body: &str) -> Option<std::time::Duration> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let details = v.pointer("/error/details")?.as_array()?;
    details
        .iter()
        .filter(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| parse_proto_duration(d["retryDelay"].as_str()?))
}

pub use crate::rules::takes_thinking_level;

/// One candidate as a choice; `Err` holds its finish reason when it has no text and was neither withheld nor cut
/// off. A thinking model cut off while thinking answers a candidate with no parts and `finishReason: MAX_TOKENS`
/// (python-genai #811, adk-python #1357): an empty answer, as HELM reads it, never a malformed response.
fn candidate(c: Candidate) -> Result<Choice, String> {
    let finish_reason = c.finish_reason.unwrap_or_default();
    let refused = BLOCKED.contains(&finish_reason.as_str());
    let (thoughts, answers): (Vec<ResponsePart>, Vec<ResponsePart>) = c
        .content
        .map(|c| c.parts)
        .unwrap_or_default()
        .into_iter()
        .partition(|p| p.thought);
    let texts: Vec<String> = answers.into_iter().filter_map(|p| p.text).collect();
    if texts.is_empty() && !refused && finish_reason != "MAX_TOKENS" {
        return Err(finish_reason);
    }
    let thoughts: Vec<String> = thoughts.into_iter().filter_map(|p| p.text).collect();
    Ok(Choice {
        thinking: (!thoughts.is_empty()).then(|| thoughts.concat()),
        ..Choice::new(texts.concat(), finish_reason, refused)
    })
}

fn part<'a>(part: &'a Part, images: &Base64Cache) -> WirePart<'a> {
    match part {
        Part::Text(text) => WirePart::Text { text },
        Part::Image(img) => WirePart::InlineData {
            inline_data: InlineData {
                mime_type: &img.mime,
                data: images.encode(img),
            },
        },
    }
}

/// A generateContent request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    generation_config: GenerationConfig<'a>,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<WirePart<'a>>,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: Vec<WirePart<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WirePart<'a> {
    Text { text: &'a str },
    InlineData { inline_data: InlineData<'a> },
}

#[derive(Serialize)]
struct InlineData<'a> {
    mime_type: &'a str,
    #[serde(serialize_with = "crate::transport::ser_arc_str")]
    data: Arc<str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    candidate_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    /// Return thought summaries as parts marked `thought` (kept apart from the answer).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    include_thoughts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_level: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    candidates: Option<Vec<Candidate>>,
    prompt_feedback: Option<PromptFeedback>,
    usage_metadata: Option<UsageMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<CandidateContent>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<ResponsePart>,
}

#[derive(Deserialize)]
struct ResponsePart {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    /// Every input token, cached ones included.
    prompt_token_count: Option<u64>,
    /// The answers' tokens, without the thoughts.
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
}
