//! nmb-serve: a web viewer of stored runs that never writes, the pages where clinicians grade answers blind
//! (`nmb serve`), and the pages where they answer cases themselves (`nmb review answer`).
//!
//! It owns the HTTP side: the routes, the server-rendered HTML pages, the security headers on every response and
//! the optional bearer token. Pages: the runs list (`/`), a run with its headline scores and a filtered, paged
//! table of samples (`/runs/{id}`), one sample with every turn, the prompt as sent and its score row
//! (`/runs/{id}/samples/{index}?task=TASK`), a case with its images, EHR fields, notes, references and samples
//! (`/runs/{id}/cases/{case}`), two runs of one suite side by side on a case (`/compare?a=RUN&b=RUN&case=CASE`),
//! and stored images (`/images/{sha256}`). A run scored with judge repeats shows its unstable items on the run
//! page and each judge's repeats on a sample's page (module `repeats`). Every page is a paged store query; no
//! page loads a run whole. Everything a model wrote is escaped, and no viewer page runs a script.
//!
//! The review side (`/review/{set}/…`, module `review`) is where clinicians grade answers blind: a reviewer's
//! link (`/review/{set}?token=T`, printed by `nmb review create`) becomes a cookie scoped to the set;
//! `/review/{set}/` resumes at their first ungraded item; `/review/{set}/items/{position}` shows one item as the
//! model got it (case, question, images through `/review/{set}/images/{sha256}?item=N`, every turn's answer)
//! with a form for the verdict, each rubric dimension with its anchors, the error class and a comment, and takes
//! the grade by POST (appended to the store, never overwritten). Those pages never show a run id, a model, a
//! score or another reviewer's grade; a reviewer token opens no viewer page, and the viewer's token is not needed
//! for them. They alone load a script (`/review.js`: autosave and keyboard shortcuts) and work without it.
//!
//! It does not own SQL or the store's tables (`nmb-store`), scoring (`nmb-score`: it only reads the stored
//! report's headline, and a small report's samples, through `nmb-results`), the published report (`nmb-report`, which it does not
//! depend on), tables and HTML escaping (`nmb-table`, whose `Table` and `escape` its pages use), or the rules of
//! a review (`nmb-review`:
//! tokens, who grades what, what a valid grade is, and the judges-against-clinicians tables a run page shows).
//! The viewer never writes to the store; the review pages write only grades. Agreement is not here.
//!
//! The answer pages (module `answer`, [`answer_router`], served by `nmb review answer` on a server of their own)
//! are where a clinician answers a suite's cases for a human baseline: each question as the models got it,
//! answers in free text or as a ranked differential appended to the store's human answers, and a finish button
//! that has the command line build the `human:NAME` run.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nmb_serve::ServeError> {
//! let store = std::sync::Arc::new(nmb_store::Store::open_dir("nmb-runs").unwrap());
//! let server = nmb_serve::bind(&nmb_serve::ServeOptions::default()).await?;
//! println!("{}", server.url());
//! server.run(store).await
//! # }
//! ```

mod answer;
mod case;
mod common;
mod compare;
mod forms;
mod hosts;
mod html;
mod listen;
mod pages;
mod perturbed;
mod repeats;
mod review;
mod review_html;
mod review_pair;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use nmb_store::Store;

pub use answer::{
    answer_router, differential_answer, AnswerSession, AnswerTask, Finish, PromptPart,
    SOURCE as ANSWER_SOURCE,
};
pub use case::CaseQuery;
pub use compare::CompareQuery;
pub use hosts::Hosts;
pub use listen::{
    ConnectionLimits, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
};
pub use pages::{RunQuery, SampleQuery};
pub use review::CSP as REVIEW_CSP;

/// The port `nmb serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 8686;

/// The Content-Security-Policy of every response: nothing but same-origin images and the one stylesheet; no
/// script, no frames, forms only back to this server.
pub const CSP: &str = "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; \
                       frame-ancestors 'none'; base-uri 'none'";

/// Request bodies larger than this are refused (every viewer route is a GET; the review routes set their own).
const BODY_LIMIT: usize = 1024;

/// Where to listen and who may ask.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub host: IpAddr,
    /// 0 asks the system for any free port.
    pub port: u16,
    /// When set, every request must carry it (`Authorization: Bearer TOKEN`, or the `token` cookie that
    /// visiting `/?token=TOKEN` sets). Required to listen on anything but loopback.
    pub token: Option<String>,
    /// Names besides the bound address and `localhost` that requests may give as `Host` (a reverse proxy's, the
    /// machine's); any other name is refused ([`Hosts`]).
    pub allowed_hosts: Vec<String>,
    /// A TLS proxy is in front: cookies are marked `Secure`, and the token's is `__Host-nmb_token`, which a
    /// browser binds to the one origin (no other port or subdomain can set or read it).
    pub behind_tls: bool,
    /// When idle, slow and surplus connections are closed.
    pub connections: ConnectionLimits,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            token: None,
            allowed_hosts: Vec::new(),
            behind_tls: false,
            connections: ConnectionLimits::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {host}, which is not a loopback address, without a token \
         (give one with --token-file FILE or NMB_SERVE_TOKEN)"
    )]
    NoToken { host: IpAddr },
    #[error("the token is empty")]
    EmptyToken,
    #[error("cannot read the token file {}: {source}", path.display())]
    TokenFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
}

/// A listening socket, not yet answering.
pub struct Bound {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    gate: Gate,
    limits: ConnectionLimits,
}

impl Bound {
    /// The address actually bound (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Answers requests until the process ends.
    pub async fn run(self, store: Arc<Store>) -> Result<(), ServeError> {
        let app = viewer(store, self.gate);
        listen::serve(self.listener, app, self.limits, std::future::pending())
            .await
            .map_err(ServeError::Serve)
    }
}

/// The token from `file` (trimmed), else from `NMB_SERVE_TOKEN` when set and not blank.
pub fn token_from(file: Option<&std::path::Path>) -> Result<Option<String>, ServeError> {
    match file {
        Some(path) => std::fs::read_to_string(path)
            .map(|t| Some(t.trim().to_string()))
            .map_err(|source| ServeError::TokenFile {
                path: path.to_path_buf(),
                source,
            }),
        None => Ok(std::env::var("NMB_SERVE_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())),
    }
}

/// Checks the options (no token, no address beyond loopback) and binds the socket.
pub async fn bind(options: &ServeOptions) -> Result<Bound, ServeError> {
    if options
        .token
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        return Err(ServeError::EmptyToken);
    }
    if !options.host.is_loopback() && options.token.is_none() {
        return Err(ServeError::NoToken { host: options.host });
    }
    let addr = SocketAddr::new(options.host, options.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let gate = Gate {
        token: options.token.as_deref().map(|t| Arc::from(t.trim())),
        hosts: Some(Arc::new(Hosts::new(addr.ip(), &options.allowed_hosts))),
        cookie: Arc::from(token_cookie(addr.port(), options.behind_tls)),
        secure: options.behind_tls,
    };
    Ok(Bound {
        listener,
        addr,
        gate,
        limits: options.connections,
    })
}

/// The token cookie's name. Plain-HTTP cookies are shared by every port of a host, so each server's is named
/// by its port; behind TLS the `__Host-` prefix binds it to the origin instead.
fn token_cookie(port: u16, behind_tls: bool) -> String {
    if behind_tls {
        "__Host-nmb_token".to_string()
    } else {
        format!("nmb_token_{port}")
    }
}

/// Binds, prints `nmb serve: http://HOST:PORT/` on stdout (flushed), and answers requests until the process
/// ends.
pub async fn serve(store: Arc<Store>, options: ServeOptions) -> Result<(), ServeError> {
    let bound = bind(&options).await?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "nmb serve: {}", bound.url());
        let _ = out.flush();
    }
    bound.run(store).await
}

#[derive(Clone)]
struct App {
    store: Arc<Store>,
    gate: Gate,
}

/// Who may ask a server: the token every request must carry (if any), the `Host` names it answers to, and the
/// name of the cookie that carries the token.
#[derive(Clone)]
struct Gate {
    token: Option<Arc<str>>,
    /// `None` for a router driven in-process, with no socket (tests).
    hosts: Option<Arc<Hosts>>,
    cookie: Arc<str>,
    /// Cookies are marked `Secure` (a TLS proxy is in front).
    secure: bool,
}

impl Gate {
    /// What every cookie this server sets ends with.
    fn secure_attribute(&self) -> &'static str {
        if self.secure {
            "; Secure"
        } else {
            ""
        }
    }

    fn open(token: Option<String>) -> Gate {
        Gate {
            token: token.map(Arc::from),
            hosts: None,
            cookie: Arc::from("nmb_token"),
            secure: false,
        }
    }
}

/// The viewer's routes without a token (what tests drive).
pub fn router(store: Arc<Store>) -> Router {
    router_with_token(store, None)
}

/// The viewer's routes; with a token, every request must carry it. No `Host` check: [`bind`] adds it.
pub fn router_with_token(store: Arc<Store>, token: Option<String>) -> Router {
    viewer(store, Gate::open(token))
}

fn viewer(store: Arc<Store>, gate: Gate) -> Router {
    let app = App { store, gate };
    Router::new()
        .route("/", get(runs_page))
        .route("/style.css", get(style))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/samples/{index}", get(sample_page))
        .route("/runs/{id}/cases/{case}", get(case::handler))
        .route("/compare", get(compare::handler))
        .route("/images/{sha256}", get(image))
        .merge(review::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(app)
}

/// The `Host` and token checks, then the security headers on whatever the route answered (errors included).
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    // The review pages check reviewers' tokens themselves; the viewer's token plays no part there.
    let review = review::is_review_path(request.uri().path());
    let gate = &app.gate;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    let mut response = match (&gate.token, &gate.hosts) {
        (_, Some(hosts)) if !hosts.allows(host) => misdirected(hosts),
        (Some(token), _) if !review => match authorize(token, &gate.cookie, &request) {
            Access::Granted => next.run(request).await,
            Access::SetCookie => {
                let mut r = Redirect::to("/").into_response();
                let cookie = format!(
                    "{}={token}; Path=/; HttpOnly; SameSite=Strict{}",
                    gate.cookie,
                    gate.secure_attribute()
                );
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            }
            Access::Denied => (
                StatusCode::UNAUTHORIZED,
                html::error_page("401", "This viewer needs its token."),
            )
                .into_response(),
        },
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            if review { review::CSP } else { CSP },
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// 421: the request named a host this server does not answer to.
fn misdirected(hosts: &Hosts) -> Response {
    let why = format!(
        "This server answers only to {}. Start it with --allowed-host NAME to use another name.",
        hosts.describe()
    );
    (
        StatusCode::MISDIRECTED_REQUEST,
        html::error_page("421", &why),
    )
        .into_response()
}

enum Access {
    Granted,
    /// The token came in the query: set it as a cookie and drop it from the address.
    SetCookie,
    Denied,
}

fn authorize(token: &str, cookie_name: &str, request: &Request) -> Access {
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer.is_some_and(|b| same(b.trim(), token)) {
        return Access::Granted;
    }
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(name, _)| *name == cookie_name)
        .map(|(_, value)| value)
        .any(|c| same(c, token));
    if cookie {
        return Access::Granted;
    }
    let query = request.uri().query().unwrap_or("");
    let in_query = query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("token="))
        .any(|t| same(&html::url_decode(t), token));
    if in_query && request.uri().path() == "/" {
        return Access::SetCookie;
    }
    Access::Denied
}

/// Equal strings, compared in time that depends only on their lengths.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::STYLE,
    )
        .into_response()
}

async fn not_found() -> Response {
    common::PageError::NotFound("no such page".into()).into_response()
}

/// Runs a page's store queries off the async threads.
async fn blocking<F>(app: &App, f: F) -> Response
where
    F: FnOnce(&Store) -> Result<Response, common::PageError> + Send + 'static,
{
    let store = app.store.clone();
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.into_response(),
        Err(_) => common::PageError::Internal.into_response(),
    }
}

async fn runs_page(State(app): State<App>) -> Response {
    blocking(&app, |s| pages::runs(s).map(IntoResponse::into_response)).await
}

async fn run_page(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Response {
    blocking(&app, move |s| {
        pages::run(s, &id, &q).map(IntoResponse::into_response)
    })
    .await
}

async fn sample_page(
    State(app): State<App>,
    Path((id, index)): Path<(String, String)>,
    Query(q): Query<SampleQuery>,
) -> Response {
    blocking(&app, move |s| {
        pages::sample(s, &id, &index, &q).map(IntoResponse::into_response)
    })
    .await
}

async fn image(State(app): State<App>, Path(sha256): Path<String>) -> Response {
    blocking(&app, move |s| pages::image(s, &sha256)).await
}
