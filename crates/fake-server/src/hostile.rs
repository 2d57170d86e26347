//! The hostile mode: answers no honest server sends, for testing that a client reads every response against caps.
//! Bodies of any size are generated as they are written (never allocated whole); `content-length` can lie;
//! bodies can be gzip or deflate bombs or carry an encoding they are not in; JSON can nest deeper than any parser
//! should follow; usage numbers can sit at the limits (2^63, 2^64 − 1, negative, fractional, past f64); a body
//! can drip one byte at a time. Batch outputs ([`HostileBatch`]) can be huge, malformed, or missing from a batch
//! that says it is done.
//!
//! The single-call modes are faults (`Fault::Hostile`, textual forms in [`Hostile`]'s `FromStr`), so
//! they can be queued, scheduled every N requests or put in a prompt as `FAULT:huge:3000000000`.

use std::fmt;
use std::io::Write;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::exchange::Response;
use crate::fault_error::FaultParseError;
use crate::wire::Wire;

/// What an answer's text is padded with: a sentence, so a compressed bomb inflates to plausible text.
const PAD: &[u8] = b"The lesion enhances. ";
/// Bytes a generated body is written in.
const PIECE: usize = 64 << 10;
/// Where the generated text goes in a response built around it.
const HOLE: &str = "\u{1}NMB-HOSTILE-HOLE\u{1}";
/// A usage count replaced by a number at the limits.
const NUMBER_HOLE: u64 = 987_654_321_987_654;

/// A hostile answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hostile {
    /// `huge:BYTES`: a valid answer whose text is BYTES long; `content-length` tells the truth.
    /// `huge-close:BYTES`: the same without `content-length`, ended by closing the connection.
    Huge { bytes: u64, announced: bool },
    /// `lie:BYTES`: the normal answer under a `content-length` of BYTES (more or less than it is), then the
    /// connection closes.
    Lie { claimed: u64 },
    /// `drip:MILLIS`: the normal answer, one byte every MILLIS milliseconds.
    Drip { every: Duration },
    /// `gzip-bomb:BYTES`, `deflate-bomb:BYTES`: a valid answer whose text is BYTES long, compressed (about
    /// 1,000 to 1).
    Bomb { encoding: Encoding, bytes: u64 },
    /// `encoding:NAME`: the plain answer under `content-encoding: NAME` (gzip, deflate, br, ...).
    WrongEncoding(String),
    /// `deep:DEPTH`: the answer with a field of DEPTH nested arrays, generated as it is written.
    Deep { depth: u64 },
    /// `numbers:KIND`: every usage count replaced by KIND: `2^63`, `max` (2^64 − 1), `negative`, `float`,
    /// `huge-float` (1e400, past f64).
    Numbers(Number),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Gzip,
    Deflate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Number {
    TwoTo63,
    Max,
    Negative,
    Float,
    HugeFloat,
}

impl Number {
    const ALL: [(Number, &'static str, &'static str); 5] = [
        (Number::TwoTo63, "2^63", "9223372036854775808"),
        (Number::Max, "max", "18446744073709551615"),
        (Number::Negative, "negative", "-1"),
        (Number::Float, "float", "1.5"),
        (Number::HugeFloat, "huge-float", "1e400"),
    ];

    fn name(self) -> &'static str {
        Number::ALL
            .iter()
            .find(|(n, ..)| *n == self)
            .map_or("", |(_, name, _)| name)
    }

    fn literal(self) -> &'static str {
        Number::ALL
            .iter()
            .find(|(n, ..)| *n == self)
            .map_or("0", |(.., lit)| lit)
    }
}

impl FromStr for Hostile {
    type Err = FaultParseError;
    fn from_str(s: &str) -> Result<Hostile, FaultParseError> {
        let bad = || FaultParseError(s.to_string());
        let (name, arg) = s.split_once(':').ok_or_else(bad)?;
        let number = || arg.parse::<u64>().map_err(|_| bad());
        Ok(match name {
            "huge" => Hostile::Huge {
                bytes: number()?,
                announced: true,
            },
            "huge-close" => Hostile::Huge {
                bytes: number()?,
                announced: false,
            },
            "lie" => Hostile::Lie { claimed: number()? },
            "drip" => Hostile::Drip {
                every: Duration::from_millis(number()?),
            },
            "gzip-bomb" => Hostile::Bomb {
                encoding: Encoding::Gzip,
                bytes: number()?,
            },
            "deflate-bomb" => Hostile::Bomb {
                encoding: Encoding::Deflate,
                bytes: number()?,
            },
            "encoding" if !arg.is_empty() => Hostile::WrongEncoding(arg.to_string()),
            "deep" => Hostile::Deep { depth: number()? },
            "numbers" => Hostile::Numbers(
                Number::ALL
                    .iter()
                    .find(|(_, n, _)| *n == arg)
                    .map(|(n, ..)| *n)
                    .ok_or_else(bad)?,
            ),
            _ => return Err(bad()),
        })
    }
}

impl fmt::Display for Hostile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hostile::Huge {
                bytes,
                announced: true,
            } => write!(f, "huge:{bytes}"),
            Hostile::Huge {
                bytes,
                announced: false,
            } => write!(f, "huge-close:{bytes}"),
            Hostile::Lie { claimed } => write!(f, "lie:{claimed}"),
            Hostile::Drip { every } => write!(f, "drip:{}", every.as_millis()),
            Hostile::Bomb {
                encoding: Encoding::Gzip,
                bytes,
            } => write!(f, "gzip-bomb:{bytes}"),
            Hostile::Bomb {
                encoding: Encoding::Deflate,
                bytes,
            } => write!(f, "deflate-bomb:{bytes}"),
            Hostile::WrongEncoding(name) => write!(f, "encoding:{name}"),
            Hostile::Deep { depth } => write!(f, "deep:{depth}"),
            Hostile::Numbers(n) => write!(f, "numbers:{}", n.name()),
        }
    }
}

/// How the batch APIs misbehave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostileBatch {
    /// A batch ends with nothing to read: OpenAI `completed` without an output or error file, Anthropic `ended`
    /// without a `results_url`, Gemini `BATCH_STATE_SUCCEEDED` without responses.
    NoOutput,
    /// The first answer of every output (file, results, inlined responses) has a text this many bytes long,
    /// generated as it is written.
    HugeAnswer(u64),
    /// Outputs hold lines that are not JSON, lines naming no request or one the batch does not hold, and a
    /// second line for a request, before the real lines.
    MalformedLines,
    /// Outputs (and Gemini's operations, which hold them) drip one byte this often.
    Drip(Duration),
}

/// How a response goes out: its head, whether `content-length` tells the truth, and its body generated piece
/// by piece.
pub(crate) struct Streamed {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// `Some(n)`: `content-length: n` (true or not); `None`: no length, the connection closes at the end.
    pub length: Option<u64>,
    pub body: Box<dyn Iterator<Item = Vec<u8>> + Send>,
    /// Writes one byte at a time, this long apart.
    pub drip: Option<Duration>,
}

impl Streamed {
    fn whole(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Streamed {
        Streamed {
            status,
            length: Some(body.len() as u64),
            headers,
            body: Box::new(std::iter::once(body)),
            drip: None,
        }
    }
}

/// The hostile answer `mode` makes of the answer `normal` would be (a success built around [`HOLE`] by
/// `around`, for the modes that generate text).
pub(crate) fn reply(
    mode: &Hostile,
    normal: Response,
    around: impl Fn(&str) -> Response,
) -> Streamed {
    let json = vec![("content-type".to_string(), "application/json".to_string())];
    match mode {
        Hostile::Huge { bytes, announced } => {
            let (prefix, suffix) = split(&around(HOLE).body);
            let length = (prefix.len() as u64 + bytes + suffix.len() as u64).into();
            Streamed {
                status: 200,
                headers: json,
                length: announced.then_some(length).flatten(),
                body: Box::new(padded(prefix, *bytes, suffix)),
                drip: None,
            }
        }
        Hostile::Lie { claimed } => Streamed {
            length: Some(*claimed),
            ..Streamed::whole(normal.status, json, normal.body.into_bytes())
        },
        Hostile::Drip { every } => Streamed {
            drip: Some(*every),
            ..Streamed::whole(normal.status, json, normal.body.into_bytes())
        },
        Hostile::Bomb { encoding, bytes } => {
            let (prefix, suffix) = split(&around(HOLE).body);
            let mut headers = json;
            headers.push(("content-encoding".into(), encoding.header().into()));
            Streamed {
                status: 200,
                headers,
                length: None,
                body: bomb(*encoding, prefix, *bytes, suffix),
                drip: None,
            }
        }
        Hostile::WrongEncoding(name) => {
            let mut headers = json;
            headers.push(("content-encoding".into(), name.clone()));
            Streamed::whole(normal.status, headers, normal.body.into_bytes())
        }
        Hostile::Deep { depth } => {
            let rest = normal
                .body
                .strip_prefix('{')
                .unwrap_or(&normal.body)
                .to_string();
            let depth = usize::try_from(*depth).unwrap_or(usize::MAX);
            let opens = repeated(b"[", depth);
            let closes = repeated(b"]", depth);
            let body = std::iter::once(b"{\"nmb_deep\": ".to_vec())
                .chain(opens)
                .chain(closes)
                .chain(std::iter::once(format!(",{rest}").into_bytes()));
            Streamed {
                status: 200,
                headers: json,
                length: None,
                body: Box::new(body),
                drip: None,
            }
        }
        Hostile::Numbers(n) => {
            let body = numbers(&normal.body, *n);
            Streamed::whole(200, json, body.into_bytes())
        }
    }
}

impl Encoding {
    fn header(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }
}

/// Every usage count of a success body replaced by `n`'s literal.
fn numbers(body: &str, n: Number) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(body) else {
        return body.to_string();
    };
    for usage in ["/usage", "/usageMetadata"] {
        if let Some(Value::Object(fields)) = v.pointer_mut(usage) {
            for value in fields.values_mut().filter(|v| v.is_number()) {
                *value = Value::from(NUMBER_HOLE);
            }
        }
    }
    v.to_string().replace(&NUMBER_HOLE.to_string(), n.literal())
}

/// The text of `body` before and after [`HOLE`] (as JSON writes it).
fn split(body: &str) -> (Vec<u8>, Vec<u8>) {
    let hole = serde_json::to_string(HOLE).unwrap_or_default();
    let hole = hole.trim_matches('"');
    match body.split_once(hole) {
        Some((a, b)) => (a.as_bytes().to_vec(), b.as_bytes().to_vec()),
        None => (body.as_bytes().to_vec(), Vec::new()),
    }
}

/// `prefix`, `bytes` bytes of [`PAD`], `suffix`, in pieces.
fn padded(prefix: Vec<u8>, bytes: u64, suffix: Vec<u8>) -> impl Iterator<Item = Vec<u8>> + Send {
    std::iter::once(prefix)
        .chain(pad(bytes))
        .chain(std::iter::once(suffix))
}

/// `bytes` bytes of [`PAD`] in pieces of at most [`PIECE`].
fn pad(bytes: u64) -> impl Iterator<Item = Vec<u8>> + Send {
    let piece: Vec<u8> = PAD.iter().copied().cycle().take(PIECE).collect();
    let mut left = bytes;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let n = left.min(PIECE as u64) as usize;
        left -= n as u64;
        Some(piece[..n].to_vec())
    })
}

fn repeated(byte: &'static [u8], count: usize) -> impl Iterator<Item = Vec<u8>> + Send {
    let mut left = count;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let n = left.min(PIECE);
        left -= n;
        Some(byte.repeat(n))
    })
}

/// A compressed body of `prefix`, `bytes` bytes of padding and `suffix`. gzip is a series of members (RFC 1952
/// allows several), the padding's a copy of one member made once; deflate (zlib) is compressed as it goes, each
/// piece flushed so that the client sees bytes at once.
fn bomb(
    encoding: Encoding,
    prefix: Vec<u8>,
    bytes: u64,
    suffix: Vec<u8>,
) -> Box<dyn Iterator<Item = Vec<u8>> + Send> {
    const MEMBER: u64 = 1 << 20;
    match encoding {
        Encoding::Gzip => {
            static PAD_MEMBER: OnceLock<Vec<u8>> = OnceLock::new();
            let member =
                PAD_MEMBER.get_or_init(|| gzip(&pad(MEMBER).flatten().collect::<Vec<u8>>()));
            let whole = bytes / MEMBER;
            let rest = bytes % MEMBER;
            let body = std::iter::once(gzip(&prefix))
                .chain((0..whole).map(|_| member.clone()))
                .chain(std::iter::once(gzip(
                    &pad(rest).flatten().collect::<Vec<u8>>(),
                )))
                .chain(std::iter::once(gzip(&suffix)));
            Box::new(body)
        }
        Encoding::Deflate => {
            let mut encoder = Some(flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::best(),
            ));
            let mut input = Some(padded(prefix, bytes, suffix));
            Box::new(std::iter::from_fn(move || loop {
                let e = encoder.as_mut()?;
                match input.as_mut().and_then(Iterator::next) {
                    Some(piece) => {
                        e.write_all(&piece).ok()?;
                        e.flush().ok()?;
                        if !e.get_ref().is_empty() {
                            return Some(std::mem::take(e.get_mut()));
                        }
                    }
                    None => {
                        input = None;
                        return encoder.take()?.finish().ok();
                    }
                }
            }))
        }
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

/// Turns a batch API's answer into what `mode` makes of it: `path` is what was asked for.
pub(crate) fn batch_reply(mode: &HostileBatch, path: &str, normal: Response) -> Streamed {
    let json = |r: Response| {
        let headers = r.headers.clone();
        Streamed::whole(r.status, headers, r.body.into_bytes())
    };
    if normal.status != 200 {
        return json(normal);
    }
    let output = Output::of(path);
    match (mode, output) {
        (HostileBatch::NoOutput, Some(Output::Poll(wire))) => {
            let body = without_output(wire, &normal.body);
            Streamed::whole(200, normal.headers, body.into_bytes())
        }
        (HostileBatch::HugeAnswer(bytes), Some(output)) => {
            match huge_answer(output, &normal.body) {
                Some((prefix, suffix)) => Streamed {
                    status: 200,
                    headers: normal.headers,
                    length: None,
                    body: Box::new(padded(prefix, *bytes, suffix)),
                    drip: None,
                },
                None => json(normal),
            }
        }
        (HostileBatch::Drip(every), Some(Output::Jsonl | Output::Poll(Wire::Gemini))) => Streamed {
            drip: Some(*every),
            ..Streamed::whole(200, normal.headers, normal.body.into_bytes())
        },
        (HostileBatch::MalformedLines, Some(Output::Jsonl)) => {
            let first_id = normal
                .body
                .lines()
                .find_map(|l| {
                    serde_json::from_str::<Value>(l)
                        .ok()?
                        .get("custom_id")?
                        .as_str()
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let junk = format!(
                "this line is not JSON\n{{\"no_custom_id\": true}}\n{{\"custom_id\": \"nmb-not-in-this-batch\", \"response\": {{\"status_code\": 200, \"body\": {{}}}}, \"result\": {{\"type\": \"succeeded\", \"message\": {{}}}}}}\n{{\"custom_id\": 12}}\n[1, 2]\n\n{{\"custom_id\": \"{first_id}\", \"error\": \n"
            );
            // The real lines follow; the first request's line comes after a broken one naming it, so a reader
            // that takes the broken line gives that request an error.
            let body = format!("{junk}{}", normal.body);
            Streamed::whole(200, normal.headers, body.into_bytes())
        }
        _ => json(normal),
    }
}

/// Which output of a batch API a GET path fetched.
#[derive(Debug, Clone, Copy)]
enum Output {
    /// A batch's state (its inlined responses, for Gemini).
    Poll(Wire),
    /// An OpenAI output or error file, or Anthropic's results.
    Jsonl,
}

impl Output {
    fn of(path: &str) -> Option<Output> {
        let path = path.split('?').next().unwrap_or("");
        if path.contains("/v1/files/") && path.ends_with("/content") || path.ends_with("/results") {
            return Some(Output::Jsonl);
        }
        for (wire, prefix) in [
            (Wire::OpenAi, "/v1/batches/"),
            (Wire::Anthropic, "/v1/messages/batches/"),
            (Wire::Gemini, "/v1beta/batches/"),
        ] {
            if path.split(prefix).nth(1).is_some_and(|id| !id.is_empty()) {
                return Some(Output::Poll(wire));
            }
        }
        None
    }
}

/// A finished batch's state with nothing to read.
fn without_output(wire: Wire, body: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(body) else {
        return body.to_string();
    };
    match wire {
        Wire::OpenAi if v["status"] != "in_progress" => {
            v["status"] = "completed".into();
            v["output_file_id"] = Value::Null;
            v["error_file_id"] = Value::Null;
        }
        Wire::Anthropic => {
            v["results_url"] = Value::Null;
        }
        Wire::Gemini if v["done"] == true => {
            v["metadata"]["state"] = "BATCH_STATE_SUCCEEDED".into();
            if let Some(o) = v.as_object_mut() {
                o.remove("response");
            }
        }
        _ => {}
    }
    v.to_string()
}

/// The text before and after the first answer's text of a batch output, where it has one (a forced tool's
/// input gets a text field of its own).
fn huge_answer(output: Output, body: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let pointers = [
        "/response/body/choices/0/message/content",
        "/result/message/content/0/text",
        "/result/message/content/0/input/nmb_padding",
        "/response/inlinedResponses/inlinedResponses/0/response/candidates/0/content/parts/0/text",
    ];
    let (first, rest) = match output {
        Output::Jsonl => body.split_once('\n').unwrap_or((body, "")),
        Output::Poll(_) => (body, ""),
    };
    let mut v = serde_json::from_str::<Value>(first).ok()?;
    if let Some(Value::Object(input)) = v.pointer_mut("/result/message/content/0/input") {
        input.insert("nmb_padding".into(), Value::Null);
    }
    let at = pointers.iter().find(|p| v.pointer(p).is_some())?;
    *v.pointer_mut(at)? = Value::from(HOLE);
    let (prefix, mut suffix) = split(&v.to_string());
    if output_is_jsonl(output) {
        suffix.push(b'\n');
        suffix.extend_from_slice(rest.as_bytes());
    }
    Some((prefix, suffix))
}

fn output_is_jsonl(output: Output) -> bool {
    matches!(output, Output::Jsonl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn success(text: &str) -> Response {
        let body = serde_json::json!({"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
        Response {
            status: 200,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    fn body(s: Streamed) -> Vec<u8> {
        s.body.flatten().collect()
    }

    #[test]
    fn modes_parse_and_print() {
        for s in [
            "huge:3000000000",
            "huge-close:10",
            "lie:99",
            "drip:1000",
            "gzip-bomb:1000000",
            "deflate-bomb:5",
            "encoding:br",
            "deep:100000",
            "numbers:2^63",
            "numbers:huge-float",
        ] {
            assert_eq!(s.parse::<Hostile>().unwrap().to_string(), s);
        }
        assert!("huge".parse::<Hostile>().is_err());
        assert!("numbers:pi".parse::<Hostile>().is_err());
    }

    #[test]
    fn generated_bodies_are_the_answer_they_claim() {
        let huge = reply(&"huge:100000".parse().unwrap(), success("x"), success);
        assert_eq!(
            huge.length,
            Some(
                body(reply(
                    &"huge:100000".parse().unwrap(),
                    success("x"),
                    success
                ))
                .len() as u64
            )
        );
        let text: Value = serde_json::from_slice(&body(huge)).unwrap();
        assert_eq!(
            text["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .len(),
            100_000
        );

        for mode in ["gzip-bomb:3000000", "deflate-bomb:3000000"] {
            let compressed = body(reply(&mode.parse().unwrap(), success("x"), success));
            assert!(
                compressed.len() < 100_000,
                "{mode}: {} bytes",
                compressed.len()
            );
            let mut out = Vec::new();
            if mode.starts_with("gzip") {
                flate2::read::MultiGzDecoder::new(&compressed[..])
                    .read_to_end(&mut out)
                    .unwrap();
            } else {
                flate2::read::ZlibDecoder::new(&compressed[..])
                    .read_to_end(&mut out)
                    .unwrap();
            }
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(
                v["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap()
                    .len(),
                3_000_000,
                "{mode}"
            );
        }

        let deep = body(reply(&"deep:5".parse().unwrap(), success("x"), success));
        assert!(String::from_utf8(deep)
            .unwrap()
            .starts_with("{\"nmb_deep\": [[[[[]]]]],"));
        let numbers = body(reply(
            &"numbers:2^63".parse().unwrap(),
            success("x"),
            success,
        ));
        assert!(String::from_utf8(numbers)
            .unwrap()
            .contains("\"prompt_tokens\":9223372036854775808"));
    }
}
