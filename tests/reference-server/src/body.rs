//! Response bodies: a whole JSON body, or an event stream fed through a channel.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use tokio::sync::mpsc;

/// The body type of every answer.
pub(crate) type AnyBody = BoxBody<Bytes, Infallible>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> AnyBody {
    Full::new(bytes.into()).boxed()
}

pub(crate) fn empty() -> AnyBody {
    full(Bytes::new())
}

/// An event-stream body: events are sent through [`Events`]; the body ends when every
/// sender is gone.
pub(crate) fn stream() -> (Events, AnyBody) {
    let (tx, rx) = mpsc::channel(64);
    let closed = std::sync::Arc::default();
    (Events { tx, closed }, ChannelBody { rx }.boxed())
}

/// The sending side of an event-stream body.
#[derive(Debug, Clone)]
pub(crate) struct Events {
    tx: mpsc::Sender<Bytes>,
    /// Set to end the stream: every holder drops its sender at its next send.
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Events {
    /// Sends one event; `false` once the client has gone.
    pub(crate) async fn send(&self, id: Option<&str>, retry: Option<u64>, data: &str) -> bool {
        let mut text = String::with_capacity(data.len() + 32);
        if let Some(id) = id {
            text.push_str("id: ");
            text.push_str(id);
            text.push('\n');
        }
        if let Some(retry) = retry {
            text.push_str(&format!("retry: {retry}\n"));
        }
        text.push_str("data: ");
        text.push_str(data);
        text.push_str("\n\n");
        self.tx.send(Bytes::from(text)).await.is_ok()
    }

    /// Ends the stream: later sends fail, and the keep-alive lets go of it.
    pub(crate) fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sends a comment line (a keep-alive); `false` once the stream is closed or gone.
    pub(crate) async fn comment(&self) -> bool {
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        self.tx
            .send(Bytes::from_static(b": keep-alive\n\n"))
            .await
            .is_ok()
    }

    /// Whether the client is gone (the stream was closed from its side).
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}
