//! Reading a response body against caps before any of it is trusted: a byte cap on what the body decodes to, a
//! deadline for the whole exchange, and gzip or deflate bodies decoded here under a cap on how far they inflate.
//!
//! reqwest is built without its `gzip`/`deflate`/`brotli`/`zstd` features, so it neither asks for a compressed
//! body (no `accept-encoding`) nor decodes one: a server that compresses anyway is decoded here, chunk by chunk,
//! and the caps count decoded bytes. Were those features ever turned on, reqwest would hand over decoded bytes
//! (and drop the header), and the byte cap would still count every one of them.
//!
//! Nothing here sizes an allocation from what a header claims: a `content-length` over the cap is refused before
//! the body is read, and every buffer grows only with bytes that arrived.

use std::io::Write;
use std::time::Duration;

use nmb_chat::GenParams;
use tokio::time::Instant;

use crate::error::{CallError, ErrorClass};

/// Bytes a response may take besides its answers' text: ids, usage, finish reasons, a thinking block's
/// signature, the JSON around them.
pub const RESPONSE_OVERHEAD_BYTES: u64 = 1 << 20;

/// Bytes a response may take per token each answer may generate. A token is rarely more than 16 bytes of text;
/// JSON escapes can make one byte six (`\u0000`); and an answer may come twice (its text and a reasoning field, or
/// Anthropic's thinking beside its text): 16 × 2 × 2, a generous bound on an honest answer.
pub const RESPONSE_BYTES_PER_TOKEN: u64 = 64;

/// How far a gzip or deflate body may inflate: past [`INFLATE_FLOOR`] decoded bytes, at most this many decoded
/// bytes per byte received. JSON compresses 5 to 20 times; an answer stuck repeating itself more, but not past
/// the floor.
pub const MAX_INFLATE_RATIO: u64 = 100;

/// Decoded bytes a compressed body may reach whatever its ratio.
pub const INFLATE_FLOOR: u64 = 1 << 20;

/// The most of an error (non-2xx) body that is read: enough for any provider's error JSON; the rest is dropped.
pub const ERROR_BODY_BYTES: u64 = 64 << 10;

/// The cap of a response to a request with `params` and `n` samples when none is given: [`RESPONSE_OVERHEAD_BYTES`]
/// plus [`RESPONSE_BYTES_PER_TOKEN`] for each token each sample may generate (`max_tokens`, the thinking budget
/// on top, and any larger output limit `--extra-body` sets).
pub fn response_cap(params: &GenParams, n: u32) -> u64 {
    let tokens =
        max_output_tokens(params).saturating_add(u64::from(params.thinking_budget.unwrap_or(0)));
    let answers = u64::from(n.max(1)).saturating_mul(tokens);
    RESPONSE_OVERHEAD_BYTES.saturating_add(answers.saturating_mul(RESPONSE_BYTES_PER_TOKEN))
}

/// `max_tokens`, or a larger output limit given in `--extra-body` (which replaces the one nmb sends).
fn max_output_tokens(params: &GenParams) -> u64 {
    let mut most = u64::from(params.max_tokens);
    let Some(extra) = &params.extra_body else {
        return most;
    };
    for key in ["max_tokens", "max_completion_tokens", "max_new_tokens"] {
        if let Some(n) = extra.get(key).and_then(serde_json::Value::as_u64) {
            most = most.max(n);
        }
    }
    let gemini = extra
        .get("generationConfig")
        .and_then(|g| g.get("maxOutputTokens"));
    if let Some(n) = gemini.and_then(serde_json::Value::as_u64) {
        most = most.max(n);
    }
    most
}

/// How one HTTP exchange is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The most a 2xx body may decode to.
    pub max_bytes: u64,
    /// How long the exchange may take, from sending the request to its last body byte.
    pub timeout: Option<Duration>,
}

/// A response body being read under [`Limits`].
pub(crate) struct Body {
    resp: reqwest::Response,
    decoder: Decoder,
    /// Bytes received (before decoding) and handed out (after).
    received: u64,
    decoded: u64,
    max_bytes: u64,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    ended: bool,
}

impl Body {
    /// The body of `resp`, refused at once when its `content-encoding` is not one nmb decodes or its
    /// `content-length` is over `max_bytes`.
    pub fn new(
        resp: reqwest::Response,
        max_bytes: u64,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<Body, CallError> {
        let encoding = resp
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .trim()
                    .to_ascii_lowercase()
            });
        let decoder = Decoder::for_encoding(encoding.as_deref())?;
        if let Some(announced) = resp.content_length().filter(|n| *n > max_bytes) {
            return Err(too_large(format!(
                "the server announces a body of {announced} bytes (content-length), over this response's cap \
                 of {max_bytes} bytes"
            )));
        }
        Ok(Body {
            resp,
            decoder,
            received: 0,
            decoded: 0,
            max_bytes,
            deadline,
            timeout,
            ended: false,
        })
    }

    /// The next decoded bytes, or `None` at the end of the body.
    pub async fn chunk(&mut self) -> Result<Option<Vec<u8>>, CallError> {
        while !self.ended {
            let next = match self.deadline {
                Some(at) => match tokio::time::timeout_at(at, self.resp.chunk()).await {
                    Ok(next) => next,
                    Err(_) => return Err(self.timed_out()),
                },
                None => self.resp.chunk().await,
            };
            let out = match next.map_err(cut_short)? {
                Some(raw) => {
                    self.received = self.received.saturating_add(raw.len() as u64);
                    self.decoder.feed(Vec::from(raw))?
                }
                None => {
                    self.ended = true;
                    self.decoder.finish()?
                }
            };
            if out.is_empty() {
                continue;
            }
            self.decoded = self.decoded.saturating_add(out.len() as u64);
            self.check()?;
            return Ok(Some(out));
        }
        Ok(None)
    }

    /// The whole body, at most `max_bytes` of it.
    pub async fn all(mut self) -> Result<Vec<u8>, CallError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// The first `max` bytes of the body; the rest is never read.
    pub async fn prefix(mut self, max: u64) -> Result<Vec<u8>, CallError> {
        self.max_bytes = u64::MAX;
        let mut out = Vec::new();
        while (out.len() as u64) < max {
            let Some(chunk) = self.chunk().await? else {
                break;
            };
            let room = usize::try_from(max).unwrap_or(usize::MAX) - out.len();
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        Ok(out)
    }

    fn check(&self) -> Result<(), CallError> {
        if self.decoded > self.max_bytes {
            let how = match self.decoder.name() {
                Some(encoding) => format!(" ({encoding}-decoded from {} bytes)", self.received),
                None => String::new(),
            };
            return Err(too_large(format!(
                "the response passed its cap of {} bytes{how}",
                self.max_bytes
            )));
        }
        if let Some(encoding) = self.decoder.name() {
            let allowed = INFLATE_FLOOR.max(self.received.saturating_mul(MAX_INFLATE_RATIO));
            if self.decoded > allowed {
                return Err(too_large(format!(
                    "the {encoding} body inflates from {} to more than {} bytes, past the {MAX_INFLATE_RATIO}:1 \
                     a response may inflate",
                    self.received, self.decoded
                )));
            }
        }
        Ok(())
    }

    fn timed_out(&self) -> CallError {
        let limit = self
            .timeout
            .map_or_else(String::new, |t| format!(" within {t:?}"));
        CallError::new(
            ErrorClass::Timeout,
            format!(
                "the response did not end{limit} (the deadline holds for headers and body; {} bytes had arrived)",
                self.received
            ),
        )
    }
}

/// A body that stopped arriving: reqwest calls every such failure a decoding error, but it decodes nothing here
/// (its compression features are off), so the connection failed.
fn cut_short(e: reqwest::Error) -> CallError {
    let mut e = crate::error::from_reqwest(e);
    if e.class == ErrorClass::MalformedResponse {
        e.class = ErrorClass::Network;
    }
    e
}

/// A `response_too_large` error saying what to do about it.
pub(crate) fn too_large(what: String) -> CallError {
    CallError::new(
        ErrorClass::ResponseTooLarge,
        format!("{what}; an honest answer fits it, a larger cap is --max-response-mib"),
    )
}

/// Decodes a `content-encoding` incrementally into the bytes not yet handed out.
enum Decoder {
    Identity,
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    /// HTTP's `deflate` is zlib (RFC 1950); some servers send raw deflate (RFC 1951) instead, told apart by the
    /// first two bytes.
    Deflate(Option<Inflate>),
}

enum Inflate {
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Raw(flate2::write::DeflateDecoder<Vec<u8>>),
}

impl Decoder {
    fn for_encoding(encoding: Option<&str>) -> Result<Decoder, CallError> {
        Ok(match encoding {
            None | Some("" | "identity") => Decoder::Identity,
            Some("gzip" | "x-gzip") => Decoder::Gzip(flate2::write::MultiGzDecoder::new(Vec::new())),
            Some("deflate") => Decoder::Deflate(None),
            Some(other) => {
                return Err(CallError::new(
                    ErrorClass::MalformedResponse,
                    format!(
                        "the response is encoded as {:?}, which nmb neither asked for nor decodes (it reads \
                         gzip, deflate or none)",
                        crate::error::snippet(other, 40)
                    ),
                ))
            }
        })
    }

    fn name(&self) -> Option<&'static str> {
        match self {
            Decoder::Identity => None,
            Decoder::Gzip(_) => Some("gzip"),
            Decoder::Deflate(_) => Some("deflate"),
        }
    }

    /// Decodes `raw`, returning what it decoded to.
    fn feed(&mut self, raw: Vec<u8>) -> Result<Vec<u8>, CallError> {
        let name = self.name().unwrap_or("identity");
        let written = match self {
            Decoder::Identity => return Ok(raw),
            Decoder::Gzip(d) => d.write_all(&raw).map(|_| std::mem::take(d.get_mut())),
            Decoder::Deflate(state) => {
                let inflate = state.get_or_insert_with(|| Inflate::sniff(&raw));
                inflate.write(&raw)
            }
        };
        written.map_err(|e| undecodable(name, &e))
    }

    /// What is left once the body ended; a stream cut short is an error.
    fn finish(&mut self) -> Result<Vec<u8>, CallError> {
        let name = self.name().unwrap_or("identity");
        let done = match self {
            Decoder::Identity | Decoder::Deflate(None) => return Ok(Vec::new()),
            Decoder::Gzip(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
            Decoder::Deflate(Some(inflate)) => inflate.finish(),
        };
        done.map_err(|e| undecodable(name, &e))
    }
}

impl Inflate {
    /// zlib when the first two bytes are a zlib header (compression method 8, a checksum that divides by 31).
    fn sniff(first: &[u8]) -> Inflate {
        let zlib = match first {
            [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
            _ => true,
        };
        if zlib {
            Inflate::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
        } else {
            Inflate::Raw(flate2::write::DeflateDecoder::new(Vec::new()))
        }
    }

    fn write(&mut self, raw: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Inflate::Zlib(d) => d.write_all(raw).map(|_| std::mem::take(d.get_mut())),
            Inflate::Raw(d) => d.write_all(raw).map(|_| std::mem::take(d.get_mut())),
        }
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        match self {
            Inflate::Zlib(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
            Inflate::Raw(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
        }
    }
}

fn undecodable(encoding: &str, e: &std::io::Error) -> CallError {
    CallError::new(
        ErrorClass::MalformedResponse,
        format!(
            "the response says it is {encoding}-encoded but does not decode as {encoding}: {e}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(max_tokens: u32) -> GenParams {
        GenParams {
            max_tokens,
            ..GenParams::default()
        }
    }

    #[test]
    fn the_default_cap_grows_with_tokens_samples_and_thinking() {
        assert_eq!(response_cap(&params(1024), 1), (1 << 20) + 1024 * 64);
        assert_eq!(response_cap(&params(1024), 5), (1 << 20) + 5 * 1024 * 64);
        assert_eq!(
            response_cap(&params(1024), 0),
            response_cap(&params(1024), 1)
        );
        let thinking = GenParams {
            thinking_budget: Some(4096),
            ..params(8192)
        };
        assert_eq!(response_cap(&thinking, 1), (1 << 20) + (8192 + 4096) * 64);
        let extra = GenParams {
            extra_body: Some(
                [(
                    "max_completion_tokens".to_string(),
                    serde_json::json!(100_000),
                )]
                .into(),
            ),
            ..params(1024)
        };
        assert_eq!(response_cap(&extra, 1), (1 << 20) + 100_000 * 64);
        let most = GenParams {
            thinking_budget: Some(u32::MAX),
            ..params(u32::MAX)
        };
        assert!(response_cap(&most, u32::MAX) > 0, "saturates, never wraps");
    }

    #[test]
    fn deflate_is_told_from_raw_deflate_by_its_header() {
        let text = b"{\"ok\": true}".repeat(50);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&text).unwrap();
        let mut raw =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(&text).unwrap();
        for encoded in [zlib.finish().unwrap(), raw.finish().unwrap()] {
            let mut d = Decoder::for_encoding(Some("deflate")).unwrap();
            let mut out = Vec::new();
            for piece in encoded.chunks(7) {
                out.extend(d.feed(piece.to_vec()).unwrap());
            }
            out.extend(d.finish().unwrap());
            assert_eq!(out, text);
        }
    }

    #[test]
    fn unknown_and_broken_encodings_are_malformed() {
        let e = Decoder::for_encoding(Some("br")).err().unwrap();
        assert_eq!(e.class, ErrorClass::MalformedResponse);
        assert!(e.message.contains("\"br\""), "{e}");
        let mut gzip = Decoder::for_encoding(Some("gzip")).unwrap();
        let e = gzip.feed(b"{\"not\": \"gzip\"}".to_vec()).unwrap_err();
        assert_eq!(e.class, ErrorClass::MalformedResponse, "{e}");
        let mut cut = Decoder::for_encoding(Some("gzip")).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&[b'a'; 1000]).unwrap();
        let whole = enc.finish().unwrap();
        cut.feed(whole[..whole.len() / 2].to_vec()).unwrap();
        assert!(cut.finish().is_err(), "a gzip stream cut short is an error");
    }
}
