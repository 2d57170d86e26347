//! Gemini generateContent (`POST {base}/v1beta/models/{model}:generateContent`). The key travels in the
//! `x-goog-api-key` header, never in the URL, so it cannot leak through URLs in errors or logs.

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

/// Finish reasons that mean the provider withheld the answer.
const BLOCKED: [&str; 6] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

pub struct GeminiBackend {
    spec: ModelSpec,
    /// `{base}/v1beta/models/{model}:generateContent` of each replica.
    urls: Vec<String>,
    replicas: Vec<String>,
    key: Option<ApiKey>,
    transport: Transport,
}

impl GeminiBackend {
    pub fn new(spec: ModelSpec, key: Option<ApiKey>, transport: Transport) -> Self {
        let model = spec.model.trim_start_matches("models/");
        let (urls, replicas) = replica_urls(&spec, |base| {
            format!("{base}/v1beta/models/{model}:generateContent")
        });
        GeminiBackend {
            spec,
            urls,
            replicas,
            key,
            transport,
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
            http = http.header("x-goog-api-key", k.expose());
        }
        let secret = self.key.as_ref().map(ApiKey::expose);
        let reply = send(http, secret).await?;
        parse_response(reply.body, reply.latency)
            .map(|c| c.redacted(secret))
            .map_err(|e| e.redacted(secret))
    }

    fn body(&self, req: &ChatRequest) -> serde_json::Result<Vec<u8>> {
        let system: Vec<WirePart> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .flat_map(|m| m.parts.iter())
            .filter(|p| matches!(p, Part::Text(_)))
            .map(|p| self.part(p))
            .collect();
        let contents = req
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| Content {
                role: if m.role == Role::Assistant {
                    "model"
                } else {
                    "user"
                },
                parts: m.parts.iter().map(|p| self.part(p)).collect(),
            })
            .collect();
        let p = &req.params;
        let (mime, schema) = match &req.output {
            OutputFormat::Text => (None, None),
            OutputFormat::Json { schema } => (Some("application/json"), schema.as_ref()),
        };
        let body = Body {
            contents,
            system_instruction: (!system.is_empty()).then_some(SystemInstruction { parts: system }),
            generation_config: GenerationConfig {
                temperature: p.temperature,
                top_p: p.top_p,
                max_output_tokens: p.max_tokens,
                candidate_count: (req.n > 1).then_some(req.n),
                seed: p.seed,
                response_mime_type: mime,
                response_json_schema: schema,
            },
        };
        serde_json::to_vec(&body)
    }

    fn part<'a>(&self, part: &'a Part) -> WirePart<'a> {
        match part {
            Part::Text(text) => WirePart::Text { text },
            Part::Image(img) => WirePart::InlineData {
                inline_data: InlineData {
                    mime_type: &img.mime,
                    data: self.transport.images.encode(img),
                },
            },
        }
    }
}

impl Backend for GeminiBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        true
    }
    fn supports_images(&self) -> bool {
        true
    }
    fn constrained_output(&self) -> Option<&'static str> {
        Some("responseJsonSchema")
    }
    fn max_image_side(&self) -> Option<u32> {
        // Gemini scales images down to fit 3072 x 3072.
        Some(3072)
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
#[serde(rename_all = "camelCase")]
struct Body<'a> {
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
    temperature: f64,
    top_p: f64,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    candidate_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_json_schema: Option<&'a serde_json::Value>,
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
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
}

fn parse_response(body: String, latency: std::time::Duration) -> Result<Completion, CallError> {
    let resp: Response = match parse_body("Gemini", &body) {
        Ok(r) => r,
        Err(msg) => return Err(malformed(msg, body)),
    };
    if let Some(reason) = resp.prompt_feedback.and_then(|f| f.block_reason) {
        return Err(CallError::new(
            ErrorClass::Refusal,
            format!("Gemini blocked the prompt (blockReason {reason})"),
        )
        .with_raw(body));
    }
    let usage = resp.usage_metadata.map_or(Usage::default(), |u| Usage {
        input_tokens: u.prompt_token_count.unwrap_or(0),
        output_tokens: u.candidates_token_count.unwrap_or(0),
    });
    let candidates = resp.candidates.unwrap_or_default();
    let mut choices = Vec::with_capacity(candidates.len());
    for (i, c) in candidates.into_iter().enumerate() {
        let finish_reason = c.finish_reason.unwrap_or_default();
        let refused = BLOCKED.contains(&finish_reason.as_str());
        let texts: Vec<String> = c
            .content
            .map(|c| c.parts)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !p.thought)
            .filter_map(|p| p.text)
            .collect();
        if texts.is_empty() && !refused {
            return Err(malformed(
                format!("Gemini candidate {i} has no text (finishReason {finish_reason:?})"),
                body,
            ));
        }
        choices.push(Choice {
            text: texts.concat(),
            finish_reason,
            refused,
        });
    }
    finish(choices, body, usage, latency)
}
