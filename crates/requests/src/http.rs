//! The one HTTP backend, generic over a [`Wire`]: what a provider's API looks like on the wire.
//!
//! [`HttpBackend`] owns everything the providers share: the replicas (one endpoint URL per base URL, the names
//! calls record, the index the scheduler picks), the API key (sent in the header the wire names and redacted
//! from every error and answer), refusing `n > 1` where the wire has no `n`, sending through the shared
//! [`Transport`], and turning parsed choices into a [`Completion`]. A [`Wire`] owns only what differs between
//! APIs: the endpoint path, its headers, the request body, the response shape, the mapping of failures onto an
//! [`ErrorClass`], and what the API can do.

use std::collections::BTreeMap;

use nmb_chat::{Message, Part, Role};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::adjust::Adjustment;
use crate::backend::{check_n, finish, Backend, BoxFuture, ChatRequest, Choice, Completion, Usage};
use crate::error::{classify_status, CallError, ErrorClass};
use crate::spec::{replica_name, ModelSpec};
use crate::transport::{malformed, parse_body, send, ApiKey, Base64Cache, HttpReply, Transport};

/// Where a wire carries the API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `authorization: Bearer KEY`.
    Bearer,
    /// The key itself as the value of this header (`x-api-key`).
    Named(&'static str),
}

/// What is specific to one provider's API. Everything else about a call is [`HttpBackend`]'s.
///
/// Capabilities a later change adds come as methods with a default that says "unsupported", so the wires that
/// lack them, and the generic backend, need no change.
pub trait Wire: Send + Sync + 'static {
    /// The request body, borrowing the conversation it is built from.
    type Body<'a>: Serialize
    where
        Self: 'a;

    /// The header that carries the API key.
    const KEY_HEADER: KeyHeader;

    /// The path appended to a replica's base URL (before its query, if it has one).
    fn path(&self) -> String;

    /// Headers every request carries besides `content-type` and the key (an API version).
    fn headers(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    /// The request body for `req`. `images` holds the base64 of every image already encoded.
    fn body<'a>(&'a self, req: &'a ChatRequest, images: &Base64Cache) -> Self::Body<'a>;

    /// The choices and token counts in a successful (2xx) response body, or the error it amounts to (use
    /// [`parse_json`] for a body that is not the API's JSON).
    fn parse(&self, raw: &str) -> Result<Answer, CallError>;

    /// The class of a failed (non-2xx) call, from its status and body.
    fn classify(&self, status: u16, body: &str) -> ErrorClass {
        classify_status(status, body)
    }

    /// How long an error body asks to wait before trying again, where the API says so in the body rather than
    /// in a header (Gemini's `RetryInfo.retryDelay`). Default: it never does.
    fn retry_hint(&self, body: &str) -> Option<std::time::Duration> {
        let _ = body;
        None
    }

    /// Whether one call can return several samples (`n`, `candidateCount`).
    fn supports_n(&self) -> bool {
        false
    }

    /// Whether image parts are sent. Every API here takes images; a text-only model behind one is told by the
    /// error its server answers (see [`classify_status`]).
    fn supports_images(&self) -> bool {
        true
    }

    /// The longest image side the API uses without shrinking it itself (`None`: no limit of its own).
    fn max_image_side(&self) -> Option<u32> {
        None
    }

    /// How the API makes an answer follow a JSON schema, for the run manifest (`None`: it cannot).
    fn constrained_output(&self) -> Option<&'static str> {
        None
    }

    /// How the API takes a reasoning effort (`GenParams::reasoning_effort`), for the run manifest (`None`: it
    /// cannot, and an evaluation that asks for one is refused before anything is sent).
    fn reasoning_parameters(&self) -> Option<&'static str> {
        None
    }

    /// How the API takes a thinking budget with these parameters, or why it cannot (see
    /// [`crate::Backend::thinking_budget`]).
    fn thinking_budget(&self, params: &nmb_chat::GenParams) -> Result<&'static str, String> {
        let _ = params;
        Err(crate::backend::NO_THINKING_BUDGET.into())
    }

    /// After the server refused `err`'s request: whether requests are now built without what it refused
    /// (see [`crate::adjust`]), so that the same call is worth sending again. Default: nothing can be left out.
    fn adjust(&self, err: &CallError) -> bool {
        let _ = err;
        false
    }

    /// How this wire's requests differ from their parameters, each with why.
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        BTreeMap::new()
    }

    /// Makes adjustment `a` from now on (a resumed run's recorded ones), if the wire has it.
    fn adopt(&self, a: Adjustment, why: &str) {
        let _ = (a, why);
    }

    /// The provider's batch API, if it has one (`None`: calls go one at a time).
    fn batch_protocol(&self) -> Option<crate::backend::BatchProtocol> {
        None
    }
}

/// What a wire reads out of a successful response; [`HttpBackend`] makes it a [`Completion`] (or the error that
/// no choices, or only refused ones, amount to).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub choices: Vec<Choice>,
    pub usage: Usage,
}

/// `base` with `path` appended to its path: a base URL may carry a query (`?api-version=...`), which stays last.
pub(crate) fn endpoint(base: &str, path: &str) -> String {
    match base.split_once('?') {
        Some((before, query)) => format!("{}{path}?{query}", before.trim_end_matches('/')),
        None => format!("{base}{path}"),
    }
}

/// A model behind an HTTP API spoken in wire format `W`.
pub struct HttpBackend<W: Wire> {
    pub(crate) spec: ModelSpec,
    /// The endpoint URL of each replica.
    urls: Vec<String>,
    /// Each replica's name as calls record it: its base URL without credentials or query string.
    replicas: Vec<String>,
    pub(crate) key: Option<ApiKey>,
    /// Credentials written into the base URLs (sent, never shown): an HTTP client's error quotes the whole URL.
    pub(crate) url_secrets: Vec<String>,
    pub(crate) transport: Transport,
    pub(crate) wire: W,
    /// Whether the warning about a `--max-tokens` too small for a thinking model was given.
    warned: std::sync::atomic::AtomicBool,
}

impl<W: Wire> HttpBackend<W> {
    /// `key` may be `None` only for a custom base URL (a local server); see [`crate::connect`].
    pub fn new(spec: ModelSpec, key: Option<ApiKey>, transport: Transport, wire: W) -> Self {
        let bases = spec.effective_base_urls();
        let urls = bases.iter().map(|b| endpoint(b, &wire.path())).collect();
        let replicas = bases.iter().map(|b| replica_name(b)).collect();
        HttpBackend {
            url_secrets: spec.url_secrets(),
            spec,
            urls,
            replicas,
            key,
            transport,
            wire,
            warned: Default::default(),
        }
    }

    /// Warns once, before the first request, when `req` leaves a model that thinks by default too few tokens
    /// ([`crate::rules::room_warning`]).
    pub(crate) fn warn_once(&self, req: &ChatRequest) {
        if self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Some(w) =
            crate::rules::room_warning(self.spec.backend, &self.spec.model, &req.params)
        {
            tracing::warn!("{w}");
        }
    }

    async fn call(&self, replica: usize, req: &ChatRequest) -> Result<Completion, CallError> {
        let mut result = self.call_with_key(replica, req).await;
        for s in &self.url_secrets {
            result = (result.map(|c| c.redacted(Some(s)))).map_err(|e| e.redacted(Some(s)));
        }
        result
    }

    async fn call_with_key(
        &self,
        replica: usize,
        req: &ChatRequest,
    ) -> Result<Completion, CallError> {
        check_n(self, req)?;
        let secret = self.key.as_ref().map(ApiKey::expose);
        let classify = |status: u16, body: &str| self.wire.classify(status, body);
        let limits = self.transport.limits(self.transport.response_cap(req));
        // A refused parameter is left out and the call sent again, at most once per kind of refusal.
        let mut adjusted = 0;
        let reply = loop {
            let http = self.request(replica, req)?;
            match send(http, secret, classify, limits)
                .await
                .map_err(|e| self.hinted(e))
            {
                Err(e) if adjusted < Adjustment::ALL.len() && self.wire.adjust(&e) => {
                    tracing::warn!(
                        "{}: {}; sending the request again without it",
                        self.spec,
                        e.message
                    );
                    adjusted += 1;
                }
                reply => break reply?,
            }
        };
        self.read(reply)
            .map(|c| c.redacted(secret))
            .map_err(|e| e.redacted(secret))
    }

    /// `e` with the wait its body asks for, where no header said one.
    pub(crate) fn hinted(&self, mut e: CallError) -> CallError {
        if e.retry_after.is_none() {
            e.retry_after = e.raw.as_deref().and_then(|raw| self.wire.retry_hint(raw));
        }
        e
    }

    /// The request to replica `replica` (the first for an index out of range): body, headers and key.
    fn request(
        &self,
        replica: usize,
        req: &ChatRequest,
    ) -> Result<reqwest::RequestBuilder, CallError> {
        self.warn_once(req);
        let encoded = if req.params.extra_body.is_none() {
            // Straight to bytes: a JSON value in between would copy every image's base64 once more.
            serde_json::to_vec(&self.wire.body(req, &self.transport.images))
        } else {
            serde_json::to_vec(&self.body_value(req)?)
        };
        let body = encoded.map_err(|e| {
            CallError::new(ErrorClass::Other, format!("cannot encode request: {e}"))
        })?;
        let url = self.urls.get(replica).or_else(|| self.urls.first());
        let http = self
            .transport
            .client
            .post(url.map_or("", String::as_str))
            .header("content-type", "application/json");
        Ok(self.authorised(http.body(body)))
    }

    /// The request body for `req` as JSON, with `--extra-body`'s fields added at its top level (each replacing
    /// a field of the same name).
    pub(crate) fn body_value(&self, req: &ChatRequest) -> Result<serde_json::Value, CallError> {
        let body = self.wire.body(req, &self.transport.images);
        let mut value = serde_json::to_value(&body).map_err(|e| {
            CallError::new(ErrorClass::Other, format!("cannot encode request: {e}"))
        })?;
        if let (Some(extra), Some(fields)) = (&req.params.extra_body, value.as_object_mut()) {
            for (k, v) in extra {
                fields.insert(k.clone(), v.clone());
            }
        }
        Ok(value)
    }

    /// `http` with the wire's headers and the API key.
    pub(crate) fn authorised(&self, mut http: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (name, value) in self.wire.headers() {
            http = http.header(name, value);
        }
        match (&self.key, W::KEY_HEADER) {
            (None, _) => http,
            (Some(k), KeyHeader::Bearer) => http.bearer_auth(k.expose()),
            (Some(k), KeyHeader::Named(name)) => http.header(name, k.expose()),
        }
    }

    /// Parses a 2xx body into a completion.
    fn read(&self, reply: HttpReply) -> Result<Completion, CallError> {
        let answer = self.wire.parse(&reply.body)?;
        finish(answer.choices, reply.body, answer.usage, reply.latency)
    }

    /// What the key and the URLs' credentials must never show up in.
    pub(crate) fn redact_all(
        &self,
        mut result: Result<Completion, CallError>,
    ) -> Result<Completion, CallError> {
        let secrets = self
            .key
            .iter()
            .map(ApiKey::expose)
            .chain(self.url_secrets.iter().map(String::as_str));
        for s in secrets {
            result = result
                .map(|c| c.redacted(Some(s)))
                .map_err(|e| e.redacted(Some(s)));
        }
        result
    }
}

impl<W: Wire> Backend for HttpBackend<W> {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        self.wire.supports_n()
    }
    fn supports_images(&self) -> bool {
        self.wire.supports_images()
    }
    fn max_image_side(&self) -> Option<u32> {
        self.wire.max_image_side()
    }
    fn constrained_output(&self) -> Option<&'static str> {
        self.wire.constrained_output()
    }
    fn reasoning_parameters(&self) -> Option<&'static str> {
        self.wire.reasoning_parameters()
    }
    fn thinking_budget(&self, params: &nmb_chat::GenParams) -> Result<&'static str, String> {
        self.wire.thinking_budget(params)
    }
    fn replay_of(&self, raw: &str, choice: usize) -> Option<serde_json::Value> {
        let answer = self.wire.parse(raw).ok()?;
        answer.choices.into_iter().nth(choice)?.replay
    }
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        self.wire.adjustments()
    }
    fn adopt_adjustments(&self, recorded: &BTreeMap<Adjustment, String>) {
        for (a, why) in recorded {
            self.wire.adopt(*a, why);
        }
    }
    fn adjust_after(&self, err: &CallError) -> bool {
        self.wire.adjust(err)
    }
    fn batch(&self) -> Option<&dyn crate::backend::BatchApi> {
        self.wire
            .batch_protocol()
            .map(|_| self as &dyn crate::backend::BatchApi)
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

/// Parses a successful response body into the API's response type, or the malformed-response error naming the
/// parse failure.
pub fn parse_json<T: DeserializeOwned>(wire: &str, raw: &str) -> Result<T, CallError> {
    parse_body(wire, raw).map_err(|msg| malformed(msg, raw.to_string()))
}

/// For APIs that take the system prompt apart from the turns: the text parts of the system messages, in order
/// (their images are dropped).
pub(crate) fn system_texts(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Image(_) => None,
        })
        .collect()
}

/// The other turns, as (role name, wire parts): `assistant` for the model's turns, `user` for the rest.
pub(crate) fn turns<'a, T, F: Fn(&'a Part) -> T>(
    messages: &'a [Message],
    assistant: &'static str,
    part: F,
) -> impl Iterator<Item = (&'static str, Vec<T>)> + use<'a, T, F> {
    messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(move |m| {
            let role = match m.role {
                Role::Assistant => assistant,
                _ => "user",
            };
            (role, m.parts.iter().map(&part).collect())
        })
}
