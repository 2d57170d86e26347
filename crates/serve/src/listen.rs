//! How this crate's servers take connections and when they let them go, as a hardened HTTP/1.1 server does: a
//! request's headers must arrive whole in time ([`ConnectionLimits::header_timeout`]), then its body
//! ([`ConnectionLimits::body_timeout`]); a connection waiting for its next request, or whose client stops reading
//! a response, is closed after [`ConnectionLimits::idle_timeout`]; and at most
//! [`ConnectionLimits::max_connections`] are open at once. At the cap a newcomer takes the place of the
//! connection that has waited longest for a request, so idle connections, however many, never lock a person
//! out; only when every connection is busy answering is the newcomer turned away with 503.
//!
//! The timeouts live in a wrapper around each socket ([`Watched`]), which knows from the connection's state
//! ([`State`]) which deadline applies to a read, and in a wrapper around each request body ([`TimedBody`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// [`ConnectionLimits::header_timeout`] unless told otherwise.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// [`ConnectionLimits::body_timeout`] unless told otherwise.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// [`ConnectionLimits::idle_timeout`] unless told otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// [`ConnectionLimits::max_connections`] unless told otherwise: well under the 1,024 open files a process
/// commonly may have.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How long a newcomer at the cap waits for the place of the connection it closed.
const TAKE_PLACE_WITHIN: Duration = Duration::from_secs(1);

/// When a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request's headers must arrive whole within this of the connection opening, or, on a kept-alive
    /// connection, of the request's first byte.
    pub header_timeout: Duration,
    /// A request's body must arrive whole within this of its headers.
    pub body_timeout: Duration,
    /// A connection waiting for its next request is closed after this, and so is one whose client has read
    /// nothing of a response for this long.
    pub idle_timeout: Duration,
    /// Connections open at once (at least 1).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Answers connections on `listener` with `router` until `shutdown` completes, then lets the requests in flight
/// end.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let open = Arc::new(Open::new(limits));
    let (stop, stopped) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let task = connection(stream, open.clone(), router.clone(), stopped.clone());
                tokio::spawn(task);
            }
            // The peer gave up before we took it: nothing to do.
            Err(e) if is_connection_error(&e) => {}
            // Out of file descriptors or memory: wait for some to come back rather than spin.
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    drop(listener);
    let _ = stop.send(());
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = open.slots.acquire_many(all).await;
    Ok(())
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection once it has a place.
async fn connection(
    stream: TcpStream,
    open: Arc<Open>,
    router: Router,
    mut stopped: watch::Receiver<()>,
) {
    let Some(_place) = open.place().await else {
        turn_away(stream).await;
        return;
    };
    let (id, conn) = open.register();
    let evict = conn.evict.clone();
    let limits = open.limits;
    let io = TokioIo::new(Watched::new(stream, conn.clone(), limits));
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let (router, conn) = (router.clone(), conn.clone());
        async move {
            conn.set(State::Busy);
            let request = request.map(|b| Body::new(TimedBody::new(b, limits.body_timeout)));
            let response = router.oneshot(request).await.unwrap_or_else(|e| match e {});
            let done = Some(conn);
            Ok::<_, Infallible>(response.map(|body| TrackedBody { body, done }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The timeouts are `Watched`'s; hyper's own header timer would need a timer and stop at the first byte.
    builder.header_read_timeout(None);
    let mut serving = pin!(builder.serve_connection(io, service));
    tokio::select! {
        _ = serving.as_mut() => {}
        () = evict.notified() => tracing::debug!("closed a waiting connection to make room"),
        _ = stopped.changed() => {
            serving.as_mut().graceful_shutdown();
            let _ = serving.await;
        }
    }
    open.unregister(id);
}

/// Answers a connection there is no place for with 503 and closes it. What the client sent first is read (for
/// at most [`TAKE_PLACE_WITHIN`]) so that closing does not reset the connection before the answer is read.
async fn turn_away(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BUSY: &[u8] =
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\
                          retry-after: 1\r\n\r\n";
    tracing::debug!("turning a connection away: every place is busy answering");
    let mut head = [0u8; 4096];
    let _ = tokio::time::timeout(TAKE_PLACE_WITHIN, stream.read(&mut head)).await;
    let answer = async {
        let _ = stream.write_all(BUSY).await;
        let _ = stream.shutdown().await;
    };
    let _ = tokio::time::timeout(TAKE_PLACE_WITHIN, answer).await;
}

/// The connections open now and the places left.
struct Open {
    limits: ConnectionLimits,
    slots: Arc<Semaphore>,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Open {
    fn new(limits: ConnectionLimits) -> Open {
        let places = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        Open {
            limits,
            slots: Arc::new(Semaphore::new(places)),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        }
    }

    /// A place for a new connection: a free one, else the place of the connection that has waited longest for
    /// a request; `None` when every connection is answering one.
    async fn place(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Some(p);
        }
        if !self.evict_longest_waiting() {
            return None;
        }
        let freed = tokio::time::timeout(TAKE_PLACE_WITHIN, self.slots.clone().acquire_owned());
        freed.await.ok()?.ok()
    }

    fn evict_longest_waiting(&self) -> bool {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let oldest = conns
            .values()
            .filter_map(|c| c.waiting_since().map(|t| (t, c)))
            .min_by_key(|(t, _)| *t);
        match oldest {
            Some((_, c)) => {
                c.set(State::Evicted);
                c.evict.notify_one();
                true
            }
            None => false,
        }
    }

    fn register(&self) -> (u64, Arc<Conn>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            state: Mutex::new(State::Head(Instant::now())),
            evict: Arc::new(Notify::new()),
        });
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.insert(id, conn.clone());
        (id, conn)
    }

    fn unregister(&self, id: u64) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.remove(&id);
    }
}

/// Where a connection is in its life, which decides the deadline of its reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a request's headers, since then (the connection opened, or the request's first byte came).
    Head(Instant),
    /// Answering a request: its body has its own deadline, and a handler takes the time it takes.
    Busy,
    /// Waiting for the next request, since then.
    Idle(Instant),
    /// Closed to make room.
    Evicted,
}

/// One open connection, shared by its socket, its requests and the list of open connections.
struct Conn {
    state: Mutex<State>,
    evict: Arc<Notify>,
}

impl Conn {
    fn get(&self) -> State {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, state: State) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if *s != State::Evicted {
            *s = state;
        }
    }

    /// Bytes arrived: on a connection waiting for a request, its headers have begun.
    fn bytes_came(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let State::Idle(_) = *s {
            *s = State::Head(Instant::now());
        }
    }

    fn waiting_since(&self) -> Option<Instant> {
        match self.get() {
            State::Head(t) | State::Idle(t) => Some(t),
            State::Busy | State::Evicted => None,
        }
    }

    fn read_deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        match self.get() {
            State::Head(t) => Some(t + limits.header_timeout),
            State::Idle(t) => Some(t + limits.idle_timeout),
            State::Busy => None,
            State::Evicted => Some(Instant::now()),
        }
    }
}

/// A socket whose reads end with `TimedOut` past the deadline its connection's state sets, and whose writes end
/// so when the client has taken nothing for the idle timeout.
struct Watched {
    io: TcpStream,
    conn: Arc<Conn>,
    limits: ConnectionLimits,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    /// Since when writes have been waiting for the client.
    write_stalled: Option<Instant>,
}

impl Watched {
    fn new(io: TcpStream, conn: Arc<Conn>, limits: ConnectionLimits) -> Watched {
        Watched {
            io,
            conn,
            limits,
            read_timer: None,
            write_timer: None,
            write_stalled: None,
        }
    }

    fn watch_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.write_stalled = None;
            return r;
        }
        let since = *self.write_stalled.get_or_insert_with(Instant::now);
        let deadline = since + self.limits.idle_timeout;
        match expired(&mut self.write_timer, deadline, cx) {
            true => Poll::Ready(Err(timed_out("the client read nothing of the response"))),
            false => Poll::Pending,
        }
    }
}

/// Whether `deadline` has passed, arming `timer` to wake the task at it otherwise.
fn expired(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    if sleep.deadline() != deadline {
        sleep.as_mut().reset(deadline);
    }
    sleep.as_mut().poll(cx).is_ready()
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if let Poll::Ready(r) = Pin::new(&mut this.io).poll_read(cx, buf) {
            if buf.filled().len() > before {
                this.conn.bytes_came();
            }
            return Poll::Ready(r);
        }
        match this.conn.read_deadline(&this.limits) {
            Some(deadline) if expired(&mut this.read_timer, deadline, cx) => {
                Poll::Ready(Err(timed_out("no complete request in time")))
            }
            _ => Poll::Pending,
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.watch_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch_write(cx, r)
    }
}

/// A request body that fails once its deadline (the headers' arrival plus the body timeout) has passed.
struct TimedBody {
    body: Incoming,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl TimedBody {
    fn new(body: Incoming, timeout: Duration) -> TimedBody {
        TimedBody {
            body,
            deadline: Instant::now() + timeout,
            timer: None,
        }
    }
}

/// The error a request body gives when it did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body timeout")]
struct BodyTimedOut;

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if expired(&mut this.timer, this.deadline, cx) {
            return Poll::Ready(Some(Err(BodyTimedOut.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that marks its connection as waiting for the next request once it is sent or dropped.
struct TrackedBody {
    body: Body,
    done: Option<Arc<Conn>>,
}

impl TrackedBody {
    fn finish(&mut self) {
        if let Some(conn) = self.done.take() {
            conn.set(State::Idle(Instant::now()));
        }
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.finish();
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.body).poll_frame(cx));
        if frame.is_none() {
            this.finish();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
