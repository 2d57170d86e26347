//! `nmb serve`: a read-only web viewer of the run store (runs, samples, answers, prompts, images).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb serve                                   # http://127.0.0.1:8686/
  nmb serve --port 0                          # any free port; the URL is printed
  nmb --store postgres://nmb@db/nmb serve --port 9000
  nmb serve --host 0.0.0.0 --token-file ~/.nmb-serve-token

Pages: the runs list; a run (manifest, headline pass@1/pass@5 with CIs, level x family, a filtered, paged table
of samples); a sample (every turn, the prompt as sent with its images, its score row). Nothing is written to the
store. It listens on loopback unless --host says otherwise; any other address needs a token (--token-file FILE
or NMB_SERVE_TOKEN), which every request must then carry: `Authorization: Bearer TOKEN`, or open
http://HOST:PORT/?token=TOKEN once in a browser (it sets a cookie).

Connections (HTTP/1.1): a request's headers must arrive within --header-timeout, its body within
--body-timeout after them; a connection waiting for its next request, or whose client reads nothing of a
response, is closed after --idle-timeout. At most --max-connections are open; a newcomer beyond them takes the
place of the connection that has waited longest for a request, or gets 503 when every one is busy answering.";

#[derive(Args)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port)
    #[arg(long, default_value_t = nmb_serve::DEFAULT_PORT)]
    port: u16,
    /// Address to listen on; anything but loopback needs a token
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// A file holding the token every request must carry (else NMB_SERVE_TOKEN)
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Another name requests may give as their Host (a reverse proxy's, this machine's); repeatable. Any
    /// name but the bound address and localhost is refused otherwise (DNS rebinding)
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// A TLS proxy is in front (give its name with --allowed-host): cookies are marked Secure, the token's
    /// named __Host-nmb_token
    #[arg(long)]
    behind_tls: bool,
    #[command(flatten)]
    connections: ConnectionArgs,
}

/// When the server closes idle, slow and surplus connections (`nmb serve`, `nmb review answer`).
#[derive(Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// Seconds a request's headers have to arrive in full, from the connection opening or the request's
    /// first byte
    #[arg(long, value_name = "SECS", default_value_t = nmb_serve::DEFAULT_HEADER_TIMEOUT.as_secs_f64(), value_parser = seconds)]
    header_timeout: f64,
    /// Seconds a request's body has to arrive in full after its headers
    #[arg(long, value_name = "SECS", default_value_t = nmb_serve::DEFAULT_BODY_TIMEOUT.as_secs_f64(), value_parser = seconds)]
    body_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request, and a response may wait for its client
    /// to read, before the connection is closed
    #[arg(long, value_name = "SECS", default_value_t = nmb_serve::DEFAULT_IDLE_TIMEOUT.as_secs_f64(), value_parser = seconds)]
    idle_timeout: f64,
    /// Connections open at once
    #[arg(long, value_name = "N", default_value_t = nmb_serve::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_connections: u32,
}

impl ConnectionArgs {
    pub fn limits(&self) -> nmb_serve::ConnectionLimits {
        let secs = Duration::from_secs_f64;
        nmb_serve::ConnectionLimits {
            header_timeout: secs(self.header_timeout),
            body_timeout: secs(self.body_timeout),
            idle_timeout: secs(self.idle_timeout),
            max_connections: self.max_connections as usize,
        }
    }
}

/// A timeout in seconds: more than 0, at most a day.
fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if v > 0.0 && v <= 86_400.0 {
        Ok(v)
    } else {
        Err(format!(
            "{text} seconds: expected more than 0 and at most 86400 (a day)"
        ))
    }
}

pub fn run(args: ServeArgs, at: &StoreAt) -> Result<ExitCode> {
    let token = nmb_serve::token_from(args.token_file.as_deref())?;
    let store = at.open_for_reading()?;
    let options = nmb_serve::ServeOptions {
        host: args.host,
        port: args.port,
        token,
        allowed_hosts: args.allowed_hosts,
        behind_tls: args.behind_tls,
        connections: args.connections.limits(),
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(nmb_serve::serve(store, options))?;
    Ok(ExitCode::SUCCESS)
}
