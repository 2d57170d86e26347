//! Reading a batch's output as it arrives, never whole: JSONL files (OpenAI's output and error files,
//! Anthropic's results) line by line, and Gemini's operation with its inlined responses one response at a time.
//! Each line or response is read against its own cap (the cap of one request's answer), and the whole output
//! against the most its requests' answers can take together.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::rc::Rc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::body::{too_large, Body};
use crate::error::{CallError, ErrorClass};

/// Bytes kept of a line that is cut off or not JSON: where its custom id is.
const HEAD_BYTES: usize = 4096;

/// The most a batch's output may take: one answer's cap for each of its requests, and one more for what goes
/// around them.
pub(crate) fn output_cap(requests: usize, line_cap: u64) -> u64 {
    (requests as u64).saturating_add(1).saturating_mul(line_cap)
}

/// A bounded excerpt of a batch API answer, kept with an error about it.
pub(crate) fn head(v: &Value) -> String {
    crate::error::snippet(&v.to_string(), HEAD_BYTES)
}

/// One line of a JSONL output.
pub(crate) enum RawLine {
    Json(Value),
    /// Longer than the line cap: its first bytes and how many it had when reading it stopped.
    TooLong {
        head: String,
        bytes: u64,
    },
    NotJson {
        head: String,
        error: String,
    },
}

impl RawLine {
    /// The custom id of a line that could not be read, from its first bytes.
    pub(crate) fn head_custom_id(&self) -> Option<String> {
        match self {
            RawLine::Json(_) => None,
            RawLine::TooLong { head, .. } | RawLine::NotJson { head, .. } => custom_id_in(head),
        }
    }
}

/// Reads a JSONL body line by line.
pub(crate) struct Lines {
    body: Body,
    /// What the body is, for messages ("the output file of batch X").
    what: String,
    buf: Vec<u8>,
    line_cap: u64,
    /// A line past the cap being skipped: its head and its bytes so far.
    skipping: Option<(String, u64)>,
    ended: bool,
}

impl Lines {
    pub(crate) fn new(body: Body, what: String, line_cap: u64) -> Lines {
        Lines {
            body,
            what,
            buf: Vec::new(),
            line_cap,
            skipping: None,
            ended: false,
        }
    }

    /// The next line that is not blank, or `None` at the end of the body.
    pub(crate) async fn next(&mut self) -> Result<Option<RawLine>, CallError> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(i + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.pop();
                match self.line(line) {
                    Some(l) => return Ok(Some(l)),
                    None => continue,
                }
            }
            if let Some((_, bytes)) = &mut self.skipping {
                *bytes = bytes.saturating_add(self.buf.len() as u64);
                self.buf.clear();
            } else if self.buf.len() as u64 > self.line_cap {
                let head = String::from_utf8_lossy(&self.buf[..HEAD_BYTES.min(self.buf.len())]);
                self.skipping = Some((head.into_owned(), self.buf.len() as u64));
                self.buf.clear();
            }
            if self.ended {
                let last = std::mem::take(&mut self.buf);
                return Ok(self.line(last));
            }
            match self.body.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                Ok(None) => self.ended = true,
                Err(mut e) => {
                    e.message = format!("{}: {}", self.what, e.message);
                    return Err(e);
                }
            }
        }
    }

    /// A whole line (without its newline); `None` for a blank one.
    fn line(&mut self, line: Vec<u8>) -> Option<RawLine> {
        if let Some((head, bytes)) = self.skipping.take() {
            let bytes = bytes.saturating_add(line.len() as u64);
            return Some(RawLine::TooLong { head, bytes });
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(match serde_json::from_slice(&line) {
            Ok(v) => RawLine::Json(v),
            Err(e) => RawLine::NotJson {
                head: String::from_utf8_lossy(&line[..HEAD_BYTES.min(line.len())]).into_owned(),
                error: e.to_string(),
            },
        })
    }
}

/// The custom ids of a batch not yet answered by a line: a line for an id the batch does not hold, or for one
/// already answered, is left out.
pub(crate) struct Wanted(HashSet<String>);

impl Wanted {
    pub(crate) fn new(custom_ids: &[String]) -> Wanted {
        Wanted(custom_ids.iter().cloned().collect())
    }

    /// Whether a line for `id` is the first for a request of the batch (and counts it answered).
    pub(crate) fn take(&mut self, id: &str) -> bool {
        let taken = self.0.remove(id);
        if !taken {
            tracing::warn!(
                custom_id = %crate::error::snippet(id, 80),
                "a batch output line for a request the batch does not hold, or one already answered; left out"
            );
        }
        taken
    }
}

/// The error a line of `what` too long to read amounts to.
pub(crate) fn line_too_large(what: &str, bytes: u64, cap: u64) -> CallError {
    too_large(format!(
        "this request's line in {what} passed its cap of {cap} bytes ({bytes} bytes before it was cut)"
    ))
}

/// The error a line of `what` that is not JSON amounts to.
pub(crate) fn line_not_json(what: &str, error: &str) -> CallError {
    CallError::new(
        ErrorClass::MalformedResponse,
        format!("this request's line in {what} is not JSON: {error}"),
    )
}

/// `"custom_id": "..."` in the first bytes of a line.
fn custom_id_in(head: &str) -> Option<String> {
    let after = &head[head.find("\"custom_id\"")? + "\"custom_id\"".len()..];
    let value = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let id = &value[..value.find('"')?];
    (!id.is_empty() && !id.contains('\\')).then(|| id.to_string())
}

/// Gemini's batch operation as far as nmb reads it.
pub(crate) struct Operation {
    /// The operation without its inlined responses (`name`, `metadata`, `error`, `done`).
    pub head: Value,
    /// The inlined responses in order, at most as many as the batch has requests.
    pub responses: Vec<Value>,
    /// Responses past that number, left out.
    pub extra: usize,
}

/// Reads Gemini's operation from `body`: each inlined response at most `item_cap` bytes, at most `max_items`
/// of them kept, the whole at most `total_cap`. The JSON is parsed on a blocking thread as the body arrives.
pub(crate) async fn operation(
    mut body: Body,
    what: String,
    item_cap: u64,
    max_items: usize,
    total_cap: u64,
) -> Result<Operation, CallError> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    let parsing = tokio::task::spawn_blocking(move || {
        parse_operation(Feed::new(rx), item_cap, max_items, total_cap)
    });
    let fed = loop {
        match body.chunk().await {
            Ok(Some(chunk)) => {
                if tx.send(chunk).await.is_err() {
                    break Ok(()); // the parser stopped: its result says why
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    drop(tx);
    let parsed = parsing
        .await
        .map_err(|e| CallError::new(ErrorClass::Other, format!("reading {what} stopped: {e}")))?;
    let at = |mut e: CallError| {
        e.message = format!("{what}: {}", e.message);
        e
    };
    fed.map_err(at)?;
    parsed.map_err(at)
}

fn parse_operation(
    feed: Feed,
    item_cap: u64,
    max_items: usize,
    total_cap: u64,
) -> Result<Operation, CallError> {
    let meter = feed.meter.clone();
    meter.total_cap.set(total_cap);
    let mut de = serde_json::Deserializer::from_reader(feed);
    let seed = OperationSeed {
        meter: &meter,
        item_cap,
        max_items,
    };
    let parsed = seed
        .deserialize(&mut de)
        .and_then(|op| de.end().map(|_| op));
    parsed.map_err(|e| match meter.over.get() {
        Some(Over::Item(index)) => too_large(format!(
            "inlined response {index} passed its cap of {item_cap} bytes"
        )),
        Some(Over::Total) => too_large(format!(
            "the operation passed {total_cap} bytes, the most its requests' answers can take"
        )),
        None => CallError::new(
            ErrorClass::MalformedResponse,
            format!("the batch operation is not the expected JSON: {e}"),
        ),
    })
}

#[derive(Debug, Clone, Copy)]
enum Over {
    Item(usize),
    Total,
}

/// Bytes read so far, and the caps they are read against.
#[derive(Default)]
struct Meter {
    read: Cell<u64>,
    total_cap: Cell<u64>,
    /// The inlined response being read: its index, where it began and its cap.
    item: Cell<Option<(usize, u64, u64)>>,
    over: Cell<Option<Over>>,
}

impl Meter {
    /// How many more bytes may be read now.
    fn room(&self) -> u64 {
        let read = self.read.get();
        let total = self.total_cap.get().saturating_sub(read);
        match self.item.get() {
            Some((_, start, cap)) => total.min(cap.saturating_sub(read - start)),
            None => total,
        }
    }

    fn over(&self) {
        let why = match self.item.get() {
            Some((index, start, cap)) if self.read.get() - start >= cap => Over::Item(index),
            _ => Over::Total,
        };
        self.over.set(Some(why));
    }
}

/// The body's chunks as a reader, metered.
struct Feed {
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
    meter: Rc<Meter>,
}

impl Feed {
    fn new(rx: tokio::sync::mpsc::Receiver<Vec<u8>>) -> Feed {
        Feed {
            rx,
            chunk: Vec::new(),
            at: 0,
            meter: Rc::default(),
        }
    }
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(chunk) => {
                    self.chunk = chunk;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let room = self.meter.room();
        if room == 0 {
            self.meter.over();
            return Err(std::io::Error::other("over the cap"));
        }
        let n = buf
            .len()
            .min(self.chunk.len() - self.at)
            .min(usize::try_from(room).unwrap_or(usize::MAX));
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        self.meter.read.set(self.meter.read.get() + n as u64);
        Ok(n)
    }
}

struct OperationSeed<'a> {
    meter: &'a Meter,
    item_cap: u64,
    max_items: usize,
}

impl<'de> DeserializeSeed<'de> for OperationSeed<'_> {
    type Value = Operation;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Operation, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OperationSeed<'_> {
    type Value = Operation;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a batch operation object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Operation, A::Error> {
        let mut head = serde_json::Map::new();
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "response" && items.is_none() {
                let seed = Field {
                    name: "inlinedResponses",
                    inner: Field {
                        name: "inlinedResponses",
                        inner: Items {
                            meter: self.meter,
                            cap: self.item_cap,
                            max: self.max_items,
                        },
                    },
                };
                items = Some(map.next_value_seed(seed)?.flatten());
            } else if head.contains_key(&key) || key == "response" {
                map.next_value::<IgnoredAny>()?;
            } else {
                let value = map.next_value::<Value>()?;
                head.insert(key, value);
            }
        }
        let (responses, extra) = items.flatten().unwrap_or_default();
        Ok(Operation {
            head: Value::Object(head),
            responses,
            extra,
        })
    }
}

/// The value of one key of an object, read with `inner`; `None` when the object lacks it (or is null).
struct Field<S> {
    name: &'static str,
    inner: S,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Field<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Field<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object with {:?}", self.name)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut inner = Some(self.inner);
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            match inner.take() {
                Some(seed) if key == self.name => found = Some(map.next_value_seed(seed)?),
                other => {
                    inner = other;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// An array of inlined responses, each read under its own cap.
struct Items<'a> {
    meter: &'a Meter,
    cap: u64,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = (Vec<Value>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = (Vec<Value>, usize);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of inlined responses")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        let mut extra = 0;
        loop {
            let index = kept.len() + extra;
            self.meter
                .item
                .set(Some((index, self.meter.read.get(), self.cap)));
            let more = if kept.len() < self.max {
                seq.next_element::<Value>()?.map(|v| kept.push(v))
            } else {
                seq.next_element::<IgnoredAny>()?.map(|_| extra += 1)
            };
            if more.is_none() {
                break;
            }
        }
        self.meter.item.set(None);
        Ok((kept, extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str, item_cap: u64, max_items: usize) -> Result<Operation, CallError> {
        parse_within(json, item_cap, max_items, 10_000)
    }

    fn parse_within(
        json: &str,
        item_cap: u64,
        max_items: usize,
        total: u64,
    ) -> Result<Operation, CallError> {
        let (tx, rx) = tokio::sync::mpsc::channel(json.len() / 5 + 1);
        for piece in json.as_bytes().chunks(5) {
            tx.try_send(piece.to_vec()).unwrap();
        }
        drop(tx);
        parse_operation(Feed::new(rx), item_cap, max_items, total)
    }

    #[test]
    fn an_operation_is_read_response_by_response_under_each_cap() {
        let op = r#"{"name": "batches/1", "metadata": {"state": "BATCH_STATE_SUCCEEDED"}, "done": true,
            "response": {"@type": "x", "inlinedResponses": {"inlinedResponses": [{"response": {"a": 1}}, {"error": {"code": 500}}, {"response": {}}]}}}"#;
        let read = parse(op, 100, 2).unwrap();
        assert_eq!(read.head["metadata"]["state"], "BATCH_STATE_SUCCEEDED");
        assert_eq!(read.head["name"], "batches/1");
        assert!(read.head.get("response").is_none());
        assert_eq!(read.responses.len(), 2);
        assert_eq!(read.responses[1]["error"]["code"], 500);
        assert_eq!(read.extra, 1);

        let big = format!(
            r#"{{"response": {{"inlinedResponses": {{"inlinedResponses": [{{}}, {{"response": "{}"}}]}}}}}}"#,
            "x".repeat(500)
        );
        let e = parse(&big, 100, 5).err().unwrap();
        assert_eq!(e.class, ErrorClass::ResponseTooLarge, "{e}");
        assert!(e.message.contains("inlined response 1"), "{e}");
        assert_eq!(parse(&big, 1000, 5).unwrap().responses.len(), 2);
        let e = parse_within(&big, 1000, 5, 300).err().unwrap();
        assert_eq!(e.class, ErrorClass::ResponseTooLarge, "{e}");
        assert!(e.message.contains("operation passed 300 bytes"), "{e}");

        let e = parse(r#"{"response": {"inlinedResponses": [}"#, 100, 5)
            .err()
            .unwrap();
        assert_eq!(e.class, ErrorClass::MalformedResponse, "{e}");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let e = parse(&format!(r#"{{"metadata": {deep}}}"#), 100, 5)
            .err()
            .unwrap();
        assert_eq!(e.class, ErrorClass::MalformedResponse, "{e}");
        let none = parse(r#"{"metadata": {}, "response": null}"#, 100, 5).unwrap();
        assert!(none.responses.is_empty());
    }

    #[test]
    fn a_custom_id_is_found_in_the_head_of_a_line() {
        assert_eq!(
            custom_id_in(
                r#"{"id": "batch_req_1", "custom_id" : "nmb-abc", "response": {"body": "xxx"#
            ),
            Some("nmb-abc".into())
        );
        assert_eq!(custom_id_in(r#"{"custom_id": "#), None);
        assert_eq!(custom_id_in(r#"{"custom_id": "a\"b"}"#), None);
        assert_eq!(custom_id_in("no id here"), None);
    }
}
