//! `nmb serve`: a read-only web viewer of the run store (runs, samples, answers, prompts, images).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

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
http://HOST:PORT/?token=TOKEN once in a browser (it sets a cookie).";

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
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(nmb_serve::serve(store, options))?;
    Ok(ExitCode::SUCCESS)
}
