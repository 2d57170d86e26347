//! A small HTTP/1.1 server loop over raw sockets, so faults (resets, hangs, truncated bodies) are under control.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::exchange::{Request, Response};
use crate::fault::Fault;
use crate::wire::{self, Head, Wire};
use crate::{Reply, State};

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 256 * 1024 * 1024;

/// Binds 127.0.0.1:`port` with a large backlog, so bursts of connections are not refused.
pub(crate) fn bind(port: u16, backlog: i32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

pub(crate) async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(stream, state.clone()));
            }
            // Out of file descriptors and the like: back off briefly rather than spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

enum ReadOutcome {
    Request(Request),
    Closed,
    Bad(String),
}

async fn serve_connection(mut stream: TcpStream, state: Arc<State>) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    loop {
        let req = match read_request(&mut stream, &mut buf).await {
            ReadOutcome::Request(r) => r,
            ReadOutcome::Closed => return,
            ReadOutcome::Bad(msg) => {
                let _ = write_response(&mut stream, &plain(400, &msg), true).await;
                return;
            }
        };
        let close = req.close;
        match handle(req, &state).await {
            Action::Respond(r) => {
                if write_response(&mut stream, &r, close).await.is_err() || close {
                    return;
                }
            }
            Action::Reset => {
                let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                return;
            }
            Action::Hang => {
                // Wait for the client to give up and close its end.
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Action::Stream(s) => {
                let _ = write_streamed(&mut stream, s).await;
                return;
            }
        }
    }
}

enum Action {
    Respond(Response),
    Reset,
    Hang,
    Stream(crate::hostile::Streamed),
}

fn plain(status: u16, msg: &str) -> Response {
    Response {
        status,
        headers: Vec::new(),
        body: serde_json::json!({"error": {"message": msg}}).to_string(),
    }
}

async fn handle(req: Request, state: &State) -> Action {
    if let Some((response, delay)) = crate::batch::route(&req, state) {
        tokio::time::sleep(delay).await;
        return match &state.config.batch.hostile {
            Some(mode) => Action::Stream(crate::hostile::batch_reply(mode, &req.path, response)),
            None => Action::Respond(response),
        };
    }
    let route = Some(&req)
        .filter(|r| r.method == "POST")
        .and_then(|r| Wire::route(&r.path));
    let Some((wire, path_model)) = route else {
        state.count_bad();
        return Action::Respond(plain(404, &format!("no such endpoint {:?}", req.path)));
    };
    let head = Head {
        path: &req.path,
        headers: req.headers,
    };
    let received =
        match wire::parse_request(wire, path_model, head, &req.body, state.config.hash_images) {
            Ok(mut r) => {
                if state.config.keep_bodies {
                    r.body = Some(String::from_utf8_lossy(&req.body).into());
                }
                r
            }
            Err(msg) => {
                state.count_bad();
                return Action::Respond(wire::error(wire, 400, &msg));
            }
        };
    let _answering = crate::Answering::enter(state);
    let (received, reply) = state.decide(received);
    let _open = crate::Open::enter(state, received.seq);
    if !state.config.latency.is_zero() {
        tokio::time::sleep(state.config.latency).await;
    }
    match reply {
        Reply::Texts(texts) => Action::Respond(wire::success(&received, &texts)),
        Reply::Raw {
            status,
            headers,
            body,
        } => Action::Respond(Response {
            status,
            headers,
            body,
        }),
        Reply::Fault(Fault::Reset) => Action::Reset,
        Reply::Fault(Fault::Hang) => Action::Hang,
        Reply::Fault(Fault::Hostile(mode)) => {
            let texts = match (state.responder)(&received) {
                Reply::Texts(t) => t,
                _ => vec!["hostile answer".to_string()],
            };
            let normal = wire::success(&received, &texts);
            let around = |text: &str| wire::success(&received, &[text.to_string()]);
            Action::Stream(crate::hostile::reply(&mode, normal, around))
        }
        Reply::Fault(Fault::Slow(d)) => {
            tokio::time::sleep(d).await;
            let texts = (state.responder)(&received);
            match texts {
                Reply::Texts(t) => Action::Respond(wire::success(&received, &t)),
                _ => Action::Respond(wire::success(&received, &["slow answer".to_string()])),
            }
        }
        Reply::Fault(f) => match wire::fault_response(&received, &f) {
            Some(r) => Action::Respond(r),
            None => Action::Reset,
        },
    }
}

/// Reads one request (head and Content-Length or chunked body) from `stream`, keeping any extra bytes in `buf`
/// for the next request on the connection.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> ReadOutcome {
    let (head_len, method, path, headers) = loop {
        match parse_head(buf) {
            Ok(Some(h)) => break h,
            Ok(None) if buf.len() > MAX_HEAD => {
                return ReadOutcome::Bad("request head too large".into())
            }
            Ok(None) => {}
            Err(msg) => return ReadOutcome::Bad(msg),
        }
        match read_more(stream, buf).await {
            Some(0) | None if buf.is_empty() => return ReadOutcome::Closed,
            Some(0) | None => return ReadOutcome::Bad("connection closed mid-request".into()),
            Some(_) => {}
        }
    };
    buf.drain(..head_len);
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_ascii_lowercase())
    };
    let close = header("connection").is_some_and(|v| v == "close");
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        match read_chunked(stream, buf).await {
            Ok(b) => b,
            Err(msg) => return ReadOutcome::Bad(msg),
        }
    } else {
        let len = match header("content-length").map(|v| v.parse::<usize>()) {
            None => 0,
            Some(Ok(n)) if n <= MAX_BODY => n,
            Some(_) => return ReadOutcome::Bad("bad content-length".into()),
        };
        match read_exact_body(stream, buf, len).await {
            Ok(b) => b,
            Err(msg) => return ReadOutcome::Bad(msg),
        }
    };
    ReadOutcome::Request(Request {
        method,
        path,
        headers,
        body,
        close,
    })
}

type ParsedHead = (usize, String, String, Vec<(String, String)>);

fn parse_head(buf: &[u8]) -> Result<Option<ParsedHead>, String> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => {
            let method = req.method.unwrap_or("");
            if method != "POST" && method != "GET" {
                return Err(format!(
                    "method {method:?} not supported; expected POST or GET"
                ));
            }
            let method = method.to_string();
            let path = req.path.unwrap_or("/").to_string();
            let headers = req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_string(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            Ok(Some((n, method, path, headers)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(format!("bad HTTP request head: {e}")),
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    if buf.capacity() - buf.len() < 8 * 1024 {
        buf.reserve(64 * 1024);
    }
    stream.read_buf(buf).await.ok()
}

async fn read_exact_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    len: usize,
) -> Result<Vec<u8>, String> {
    if buf.len() < len {
        buf.reserve(len - buf.len());
    }
    while buf.len() < len {
        match read_more(stream, buf).await {
            Some(n) if n > 0 => {}
            _ => return Err("connection closed mid-body".into()),
        }
    }
    let rest = buf.split_off(len);
    Ok(std::mem::replace(buf, rest))
}

async fn read_chunked(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            match read_more(stream, buf).await {
                Some(n) if n > 0 => {}
                _ => return Err("connection closed mid-chunk".into()),
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).to_string();
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        buf.drain(..line_end + 2);
        while buf.len() < size + 2 {
            match read_more(stream, buf).await {
                Some(n) if n > 0 => {}
                _ => return Err("connection closed mid-chunk".into()),
            }
        }
        if size == 0 {
            // Trailers are not used by any client here; expect the bare CRLF.
            buf.drain(..2);
            return Ok(body);
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
        if body.len() > MAX_BODY {
            return Err("chunked body too large".into());
        }
    }
}

/// Writes a generated response piece by piece (one byte at a time when it drips), then closes the connection.
async fn write_streamed(
    stream: &mut TcpStream,
    s: crate::hostile::Streamed,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", s.status, reason(s.status));
    if !s
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("content-type: application/json\r\n");
    }
    if let Some(n) = s.length {
        head.push_str(&format!("content-length: {n}\r\n"));
    }
    head.push_str("connection: close\r\n");
    for (n, v) in &s.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    for piece in s.body {
        match s.drip {
            Some(every) => {
                for byte in piece {
                    stream.write_all(&[byte]).await?;
                    stream.flush().await?;
                    tokio::time::sleep(every).await;
                }
            }
            None => stream.write_all(&piece).await?,
        }
    }
    stream.flush().await?;
    stream.shutdown().await
}

async fn write_response(stream: &mut TcpStream, r: &Response, close: bool) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(r.body.len() + 256);
    out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status)).as_bytes());
    out.extend_from_slice(b"content-type: application/json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n", r.body.len()).as_bytes());
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    for (n, v) in &r.headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(r.body.as_bytes());
    stream.write_all(&out).await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
