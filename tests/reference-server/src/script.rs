//! Scripted faults: what the server does instead of answering a method normally.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

/// Something the server does instead of its normal answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Answer this HTTP status with this body (`None`: empty body).
    Status(u16, Option<Value>),
    /// Answer a JSON-RPC error with this code, message and data, with HTTP status `status`.
    RpcError {
        /// The HTTP status (200 for an ordinary error answer).
        status: u16,
        /// The error code.
        code: i64,
        /// The message.
        message: String,
        /// The data.
        data: Option<Value>,
    },
    /// Answer 200 with this JSON value as the result.
    Result(Value),
    /// Answer 202 Accepted with no body.
    Accepted,
    /// Say nothing for this long, then close.
    Silence(Duration),
    /// Open an event stream, send the priming event (with this `retry`, in ms), then close
    /// it without the response. The response is kept, so that a legacy client resuming with
    /// `Last-Event-ID` gets it.
    CloseMidStream {
        /// The `retry` sent on the priming event.
        retry_ms: u64,
    },
}

/// How many times a fault applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// Once, then the method answers normally.
    Once,
    /// This many times.
    N(u32),
    /// Every time.
    Always,
}

#[derive(Debug, Default)]
pub(crate) struct Script {
    faults: Mutex<HashMap<String, Vec<(Fault, Times)>>>,
}

impl Script {
    pub(crate) fn add(&self, method: &str, fault: Fault, times: Times) {
        self.faults
            .lock()
            .expect("script lock")
            .entry(method.to_owned())
            .or_default()
            .push((fault, times));
    }

    /// The fault to apply to `method` now, if any, counting it.
    pub(crate) fn take(&self, method: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().expect("script lock");
        let queue = faults.get_mut(method)?;
        let (fault, times) = queue.first_mut()?;
        let fault = fault.clone();
        match times {
            Times::Always => {}
            Times::Once | Times::N(0 | 1) => {
                queue.remove(0);
            }
            Times::N(n) => *n -= 1,
        }
        Some(fault)
    }
}
