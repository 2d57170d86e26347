//! Live progress of `nmb eval` on stderr: a bar on a terminal, plain lines every few seconds otherwise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nmb_requests::Scheduler;
use nmb_run::summary::progress_line;
use nmb_run::Progress;
use nmb_study::job::{Following, Watch};
use tokio::sync::watch;

/// How often plain lines are written when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(10);
const BAR_EVERY: Duration = Duration::from_millis(200);

/// Follows evaluations on stderr: a bar on a terminal, a line now and then otherwise; `quiet` shows nothing.
pub struct Terminal {
    pub quiet: bool,
}

impl Watch for Terminal {
    fn follow(
        &self,
        progress: Arc<Progress>,
        scheduler: Scheduler,
        stopped: watch::Receiver<bool>,
    ) -> Following {
        match (self.quiet, std::io::stderr().is_terminal()) {
            (true, _) => Box::pin(async {}),
            (false, true) => Box::pin(bar(progress, scheduler, stopped)),
            (false, false) => Box::pin(plain(progress, scheduler, stopped)),
        }
    }

    fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}

async fn bar(progress: Arc<Progress>, scheduler: Scheduler, mut stopped: watch::Receiver<bool>) {
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} samples  {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    loop {
        let s = progress.snapshot();
        pb.set_length(s.total);
        pb.set_position(s.done);
        pb.set_message(progress_line(&s, &scheduler.counters()));
        if wait(&mut stopped, BAR_EVERY).await {
            break;
        }
    }
    pb.finish_and_clear();
}

async fn plain(progress: Arc<Progress>, scheduler: Scheduler, mut stopped: watch::Receiver<bool>) {
    let mut last = None;
    while !wait(&mut stopped, PLAIN_EVERY).await {
        let s = progress.snapshot();
        let key = (s.done, s.calls, s.total);
        if last != Some(key) {
            eprintln!(
                "progress: {}/{} samples, {}",
                s.done,
                s.total,
                progress_line(&s, &scheduler.counters())
            );
            last = Some(key);
        }
    }
}

/// Waits `d` or until told to stop; true when stopped.
async fn wait(stopped: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stopped.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *stopped.borrow(),
        r = stopped.changed() => r.is_err() || *stopped.borrow(),
    }
}
