//! What wakes the supervisor: the process's signals, as one stream of [`Wake`]s.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// What the supervisor is woken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    /// SIGINT or SIGTERM: drain and exit.
    Shutdown,
    /// SIGHUP: read the configuration again.
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, listened for from start to exit.
#[derive(Debug)]
pub(super) struct Signals {
    terminate: Signal,
    interrupt: Signal,
    hangup: Signal,
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

    /// The next signal, as what it wakes the supervisor for.
    pub(super) async fn next(&mut self) -> Wake {
        tokio::select! {
            _ = self.terminate.recv() => Wake::Shutdown,
            _ = self.interrupt.recv() => Wake::Shutdown,
            _ = self.hangup.recv() => Wake::Reload,
        }
    }
}
