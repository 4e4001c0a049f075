//! An incremental decoder for `text/event-stream` (the WHATWG event-stream format).
//!
//! Bytes go in as they arrive, in chunks of any size; events come out. Any split of the same
//! bytes gives the same events. The decoder follows the format's rules: `data` lines are
//! joined with newlines, `id` sets the event's id (one holding NUL is ignored), `retry` sets
//! the reconnection delay (digits only), `event` names the event, comment lines (`:` …, the
//! keep-alives of long streams) are skipped, lines end in CR, LF or CRLF, and a leading BOM
//! is dropped. Invalid UTF-8 becomes U+FFFD, as the format says.
//!
//! Unlike a browser's `EventSource`, the decoder hands over every block that set a field,
//! including one whose data is empty: MCP's priming event (`id` and empty `data`) carries the
//! id a client resumes from. [`Event::is_message`] tells whether a block carries a message.
//!
//! ```
//! use mcp_transport::sse::Decoder;
//!
//! let mut decoder = Decoder::new(1 << 20);
//! decoder.push(b"id: 1\ndata:\nretry: 500\n\n: keep-alive\nevent: message\nda");
//! decoder.push(b"ta: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r\n\r\n");
//! let priming = decoder.next_event().unwrap().unwrap();
//! assert_eq!(priming.id.as_deref(), Some("1"));
//! assert_eq!(priming.retry, Some(500));
//! assert!(!priming.is_message());
//! let message = decoder.next_event().unwrap().unwrap();
//! assert_eq!(message.data, r#"{"jsonrpc":"2.0","method":"x"}"#);
//! assert!(decoder.next_event().is_none());
//! ```

use crate::Error;

/// One event: the fields one block of the stream set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `id` the block set, if any (the client's next `Last-Event-ID`).
    pub id: Option<String>,
    /// The `event` name, if any (none and `message` both mean a message).
    pub event: Option<String>,
    /// The `data` lines, joined with `\n`.
    pub data: String,
    /// The `retry` the block set, in milliseconds, if any.
    pub retry: Option<u64>,
}

impl Event {
    /// Whether the event carries a JSON-RPC message: it is unnamed or named `message`, and
    /// its data is not empty (MCP's priming event has empty data).
    pub fn is_message(&self) -> bool {
        matches!(self.event.as_deref(), None | Some("message")) && !self.data.is_empty()
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental decoder. See the [module docs](self).
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
    /// Bytes received and not yet read; `start` is where reading resumes, and `scanned` how
    /// far past it no line ending was found (so a long line is scanned once, however it is
    /// chunked).
    buf: Vec<u8>,
    start: usize,
    scanned: usize,
    /// The event being built, and whether any field of it was seen.
    pending: Event,
    seen: bool,
    /// The bytes the pending event holds so far, for the bound.
    size: usize,
    /// The last line ended in CR at the end of the buffer: an LF next belongs to it.
    after_cr: bool,
    /// Whether the start of the stream (and a BOM there) is behind us.
    started: bool,
    failed: bool,
}

impl Decoder {
    /// A decoder whose events may hold at most `limit` bytes of fields (data, id, event
    /// name), and whose lines may be at most `limit` bytes long.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            pending: Event::default(),
            seen: false,
            size: 0,
            after_cr: false,
            started: false,
            failed: false,
        }
    }

    /// Adds bytes received from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            self.scanned = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes pushed so far hold one.
    ///
    /// After an error the decoder yields nothing more: the stream must be abandoned.
    pub fn next_event(&mut self) -> Option<Result<Event, Error>> {
        if self.failed {
            return None;
        }
        if !self.started && !self.skip_bom() {
            return None;
        }
        loop {
            let Some((line_end, next)) = self.line_end() else {
                return self.check_partial_line();
            };
            let line = self.start..line_end;
            self.start = next;
            if line.is_empty() {
                if let Some(event) = self.dispatch() {
                    return Some(Ok(event));
                }
                continue;
            }
            if let Err(e) = self.field(line) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }

    /// Whether the stream so far ended between events: nothing is pending. An event that is
    /// not finished by a blank line when the stream closes is discarded, as the format says.
    pub fn is_idle(&self) -> bool {
        !self.seen && self.start == self.buf.len()
    }

    /// Drops a BOM at the start of the stream; `false` while too few bytes have come to say.
    fn skip_bom(&mut self) -> bool {
        let have = &self.buf[self.start..];
        if have.len() < BOM.len() && BOM.starts_with(have) {
            return false;
        }
        if have.starts_with(BOM) {
            self.start += BOM.len();
        }
        self.started = true;
        true
    }

    /// Finds the end of the next line: where its text ends and where the next line starts.
    fn line_end(&mut self) -> Option<(usize, usize)> {
        if self.after_cr && self.start < self.buf.len() {
            self.after_cr = false;
            if self.buf[self.start] == b'\n' {
                self.start += 1;
            }
        }
        let from = self.scanned.max(self.start);
        let Some(found) = memchr::memchr2(b'\r', b'\n', &self.buf[from..]) else {
            self.scanned = self.buf.len();
            return None;
        };
        let at = from + found;
        if self.buf[at] == b'\n' {
            return Some((at, at + 1));
        }
        match self.buf.get(at + 1) {
            Some(b'\n') => Some((at, at + 2)),
            Some(_) => Some((at, at + 1)),
            None => {
                self.after_cr = true;
                Some((at, at + 1))
            }
        }
    }

    /// Bounds a line that has not ended yet, and compacts the buffer.
    fn check_partial_line(&mut self) -> Option<Result<Event, Error>> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.size + self.buf.len() > self.limit {
            self.failed = true;
            return Some(Err(Error::EventTooLarge { limit: self.limit }));
        }
        None
    }

    fn field(&mut self, line: std::ops::Range<usize>) -> Result<(), Error> {
        let text = &self.buf[line];
        if text[0] == b':' {
            return Ok(());
        }
        let (name, value) = match memchr::memchr(b':', text) {
            Some(colon) => {
                let value = &text[colon + 1..];
                (&text[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (text, &b""[..]),
        };
        let pending = &mut self.pending;
        let mut grow = |by: usize| {
            self.size += by;
            match self.size > self.limit {
                true => Err(Error::EventTooLarge { limit: self.limit }),
                false => Ok(()),
            }
        };
        // Counted as held: an invalid byte becomes U+FFFD, three bytes.
        match name {
            b"data" => {
                let value = String::from_utf8_lossy(value);
                grow(value.len() + 1)?;
                pending.data.push_str(&value);
                pending.data.push('\n');
            }
            b"event" => {
                let value = String::from_utf8_lossy(value);
                grow(value.len())?;
                pending.event = Some(value.into_owned());
            }
            b"id" if !value.contains(&0) => {
                let value = String::from_utf8_lossy(value);
                grow(value.len())?;
                pending.id = Some(value.into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only; a value past u64 saturates rather than wrapping.
                let ms = value.iter().fold(0u64, |ms, d| {
                    ms.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                pending.retry = Some(ms);
            }
            _ => return Ok(()),
        }
        self.seen = true;
        Ok(())
    }

    fn dispatch(&mut self) -> Option<Event> {
        if !std::mem::take(&mut self.seen) {
            return None;
        }
        self.size = 0;
        let mut event = std::mem::take(&mut self.pending);
        if event.data.ends_with('\n') {
            event.data.pop();
        }
        Some(event)
    }
}
