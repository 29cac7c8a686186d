//! The operator's stop signals as a stream the daemon reads: the first one drains, a second one
//! abandons the step in flight. Tests send their own instead of signalling the process.
//!
//! SIGHUP drains like SIGTERM (it does not reload: the configuration is read once, at start, and a
//! service manager restarts the process to apply a new one). Without a handler SIGHUP's default
//! action ended the daemon at once, with no drain and no log line.

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// The stop requests a long-running command obeys, by signal name.
pub struct Signals(mpsc::UnboundedReceiver<&'static str>);

impl Signals {
    /// SIGTERM (systemd's stop), SIGINT (Ctrl-C) and SIGHUP (a closed terminal, or an operator
    /// expecting a reload) of this process.
    pub fn os() -> anyhow::Result<Signals> {
        let mut sigterm = signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
        let mut sigint = signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
        let mut sighup = signal(SignalKind::hangup()).context("cannot install the SIGHUP handler")?;
        let (sender, signals) = Signals::channel();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = sigterm.recv() => "SIGTERM",
                    _ = sigint.recv() => "SIGINT",
                    _ = sighup.recv() => "SIGHUP",
                };
                if sender.send(name).is_err() {
                    break;
                }
            }
        });
        Ok(signals)
    }

    /// Stop requests sent by hand (tests, an embedding program): each `send` is one signal.
    pub fn channel() -> (mpsc::UnboundedSender<&'static str>, Signals) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (sender, Signals(receiver))
    }

    /// The next stop request's name; pends forever once no more can come.
    pub async fn next(&mut self) -> &'static str {
        match self.0.recv().await {
            Some(name) => name,
            None => std::future::pending().await,
        }
    }
}
