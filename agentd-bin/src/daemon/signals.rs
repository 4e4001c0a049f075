//! The process's signals the supervisor takes, as one stream of [`Signal`]s.

use tokio::signal::unix::{self, SignalKind, signal};

/// What a signal asks of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// SIGINT or SIGTERM: drain and exit.
    Shutdown,
    /// SIGHUP: read the configuration again.
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, listened for from start to exit.
#[derive(Debug)]
pub(super) struct Signals {
    terminate: unix::Signal,
    interrupt: unix::Signal,
    hangup: unix::Signal,
}

impl Signals {
    /// Listens for the three; fails when the process cannot.
    pub(super) fn new() -> std::io::Result<Self> {
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal, as what it asks of the supervisor.
    pub(super) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.terminate.recv() => Signal::Shutdown,
            _ = self.interrupt.recv() => Signal::Shutdown,
            _ = self.hangup.recv() => Signal::Reload,
        }
    }
}
