//! Live progress of `nmb eval` on stderr: a bar on a terminal, plain lines every few seconds otherwise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nmb_requests::Scheduler;
use nmb_run::summary::{count, duration};
use nmb_run::{Progress, ProgressSnapshot};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often plain lines are written when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(10);
const BAR_EVERY: Duration = Duration::from_millis(200);

pub struct Reporter {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Reporter {
    /// Starts reporting on the current runtime. `quiet` reports nothing.
    pub fn start(progress: Arc<Progress>, scheduler: Scheduler, quiet: bool) -> Reporter {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            if quiet {
                return;
            }
            if std::io::stderr().is_terminal() {
                bar(progress, scheduler, stopped).await;
            } else {
                plain(progress, scheduler, stopped).await;
            }
        });
        Reporter { stop, task }
    }

    pub async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
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
        pb.set_message(line(&s, &scheduler));
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
                line(&s, &scheduler)
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

/// `ok 40, errored 2 (timeout 2), 41 requests, 3.2 samples/s, ETA 27s, tokens in 12.3k out 4.1k`
pub fn line(s: &ProgressSnapshot, scheduler: &Scheduler) -> String {
    let counters = scheduler.counters();
    let mut out = format!("ok {}, errored {}", s.ok, s.errored);
    if !counters.errors_by_class.is_empty() {
        let classes: Vec<String> = counters
            .errors_by_class
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!(" ({})", classes.join(", ")));
    }
    out.push_str(&format!(", {} requests", s.calls));
    if counters.retries > 0 {
        out.push_str(&format!(" ({} retries)", counters.retries));
    }
    if s.cached > 0 {
        out.push_str(&format!(", {} from the store", s.cached));
    }
    let finished_here = (s.ok + s.errored) as f64;
    if s.elapsed_s > 0.5 && finished_here > 0.0 {
        let rate = finished_here / s.elapsed_s;
        let left = s.total.saturating_sub(s.done) as f64;
        out.push_str(&format!(
            ", {:.1} samples/s, ETA {}",
            rate,
            duration(left / rate)
        ));
    }
    out.push_str(&format!(
        ", tokens in {} out {}",
        count(s.tokens_in),
        count(s.tokens_out)
    ));
    out
}
