//! An incremental decoder for `text/event-stream` (the WHATWG event-stream format).
//!
//! Bytes go in as they arrive, in chunks of any size; events come out. Any split of the same
//! bytes gives the same events. The decoder follows the format's rules: `data` lines are
//! joined with newlines, `id` sets the event's id (one holding NUL is ignored), `retry` sets
//! the reconnection delay (digits only), `event` names the event, comment lines (`:` …, the
//! keep-alives of long streams) are skipped, lines end in CR, LF or CRLF, and a leading BOM
//! is dropped. Invalid UTF-8 becomes U+FFFD, as the format says.
//!
//! The decoder lends each event until it is asked for the next one, and builds the next one
//! in the same buffers: a stream costs no allocation per event once its buffers have grown
//! to its largest event (at most the bound). A `data` value goes straight from the bytes
//! received into the event's data, however its line is chunked, and no byte is scanned
//! twice for a line end.
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

/// The longest field name that means something (`retry`): a line with no colon in its first
/// bytes past it is a field of no meaning.
const LONGEST_NAME: usize = 5;

/// What the line being read is, once part of it has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Its bytes so far are in the buffer, from `start` (an `id`, `event` or `retry` line, or
    /// one whose field name has not fully come).
    Buffered,
    /// A `data` line: its value so far is in the pending event's data.
    Data,
    /// A comment or a field of no meaning: its bytes so far are dropped.
    Skipped,
}

/// The capacity a buffer keeps between events: past it, what a large event grew is given
/// back once the event is taken.
const KEPT: usize = 64 * 1024;

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
    /// The line being read, and the bytes of it dropped so far when it is skipped.
    line: Line,
    skipped: usize,
    /// The event being built (its data apart, as received), or the one lent.
    event: Event,
    data: Vec<u8>,
    /// Whether the event is lent: the next call takes its buffers back.
    lent: bool,
    /// Buffers of `id` and `event` taken back, for the next event that sets them.
    spare_id: String,
    spare_name: String,
    /// Whether any field, and any `data` line, of the pending event was seen.
    seen: bool,
    seen_data: bool,
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
            line: Line::Buffered,
            skipped: 0,
            event: Event::default(),
            data: Vec::new(),
            lent: false,
            spare_id: String::new(),
            spare_name: String::new(),
            seen: false,
            seen_data: false,
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
            self.buf.shrink_to(KEPT);
            self.start = 0;
            self.scanned = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes pushed so far hold one. It is lent until the
    /// next call, which builds the next event in its buffers.
    ///
    /// After an error the decoder yields nothing more: the stream must be abandoned.
    pub fn next_event(&mut self) -> Option<Result<&Event, Error>> {
        if self.failed {
            return None;
        }
        if std::mem::take(&mut self.lent) {
            self.take_back();
        }
        if !self.started && !self.skip_bom() {
            return None;
        }
        let failure = loop {
            let Some((end, next)) = self.line_end() else {
                match self.partial_line() {
                    Ok(()) => return None,
                    Err(e) => break e,
                }
            };
            let from = std::mem::replace(&mut self.start, next);
            let read = match std::mem::replace(&mut self.line, Line::Buffered) {
                Line::Data => self.grow_data(from, end),
                Line::Skipped => {
                    self.skipped = 0;
                    Ok(())
                }
                Line::Buffered if from == end && self.seen => match self.dispatch() {
                    Ok(()) => return Some(Ok(&self.event)),
                    Err(e) => Err(e),
                },
                Line::Buffered if from == end => Ok(()),
                Line::Buffered => self.field(from, end),
            };
            if let Err(e) = read {
                break e;
            }
        };
        self.failed = true;
        Some(Err(failure))
    }

    /// Whether the stream so far ended between events: nothing is pending. An event that is
    /// not finished by a blank line when the stream closes is discarded, as the format says.
    pub fn is_idle(&self) -> bool {
        !self.seen && self.line == Line::Buffered && self.start == self.buf.len()
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
        let rest = &self.buf[from..];
        let found = match rest.first() {
            // A blank line, one in every event, is told without a search.
            Some(b'\r' | b'\n') => Some(0),
            _ => memchr::memchr2(b'\r', b'\n', rest),
        };
        let Some(found) = found else {
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

    /// Takes in the rest of the buffer, a line that has not ended yet: a `data` value goes
    /// to the event's data and a line of no meaning is dropped; anything else stays in the
    /// buffer, moved to its front. Then bounds the line.
    fn partial_line(&mut self) -> Result<(), Error> {
        if self.line == Line::Buffered {
            self.line = self.kind_of_partial_line();
            if self.line == Line::Data {
                let name = self.start + "data:".len();
                let value = name + usize::from(self.buf[name] == b' ');
                self.begin_data();
                self.start = value;
            }
        }
        let end = self.buf.len();
        match self.line {
            Line::Data => self.grow_data(self.start, end)?,
            Line::Skipped => self.skipped += end - self.start,
            Line::Buffered => {}
        }
        if self.line != Line::Buffered {
            self.start = end;
        }
        self.buf.drain(..self.start);
        self.scanned -= self.start;
        self.start = 0;
        self.check(self.skipped + self.buf.len())
    }

    /// What a line that has not ended yet is, from what of it has come.
    fn kind_of_partial_line(&self) -> Line {
        let text = &self.buf[self.start..];
        match name_end(text) {
            // A data value starts, past the space that may follow the colon.
            Some(4) if text.starts_with(b"data:") && text.len() > "data:".len() => Line::Data,
            Some(end) if matches!(&text[..end], b"data" | b"id" | b"event" | b"retry") => {
                Line::Buffered
            }
            // The name may not have fully come.
            Some(end) if end == text.len() => Line::Buffered,
            _ => Line::Skipped,
        }
    }

    /// Reads a whole line of the buffer.
    fn field(&mut self, from: usize, end: usize) -> Result<(), Error> {
        let text = &self.buf[from..end];
        let Some(colon) = name_end(text) else {
            return Ok(());
        };
        let (name, value) = text.split_at(colon);
        let value = value.get(1..).unwrap_or_default();
        let value = value.strip_prefix(b" ").unwrap_or(value);
        // Counted as held: an invalid byte becomes U+FFFD, three bytes.
        match name {
            b"data" => {
                let from = end - value.len();
                self.begin_data();
                return self.grow_data(from, end);
            }
            b"event" => self.size += set(&mut self.event.event, &mut self.spare_name, value),
            b"id" if !value.contains(&0) => {
                self.size += set(&mut self.event.id, &mut self.spare_id, value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only; a value past u64 saturates rather than wrapping.
                let ms = value.iter().fold(0u64, |ms, d| {
                    ms.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                self.event.retry = Some(ms);
            }
            _ => return Ok(()),
        }
        self.seen = true;
        self.check(0)
    }

    /// A `data` line begins: it is joined to an earlier one with a newline, which the bound
    /// counts for every line.
    fn begin_data(&mut self) {
        if std::mem::replace(&mut self.seen_data, true) {
            self.data.push(b'\n');
        }
        self.seen = true;
        self.size += 1;
    }

    /// Appends bytes of the buffer to the event's data, as received: they are read as UTF-8
    /// when the event is handed over.
    fn grow_data(&mut self, from: usize, end: usize) -> Result<(), Error> {
        self.data.extend_from_slice(&self.buf[from..end]);
        self.size += end - from;
        self.check(0)
    }

    /// Fails when the pending event, with `more` bytes of a line not read yet, is past the
    /// bound.
    fn check(&self, more: usize) -> Result<(), Error> {
        match self.size + more > self.limit {
            true => Err(Error::EventTooLarge { limit: self.limit }),
            false => Ok(()),
        }
    }

    /// Hands the pending event over, its data read as UTF-8.
    fn dispatch(&mut self) -> Result<(), Error> {
        self.seen = false;
        self.seen_data = false;
        let size = std::mem::take(&mut self.size);
        self.event.data = match String::from_utf8(std::mem::take(&mut self.data)) {
            Ok(data) => data,
            Err(invalid) => {
                let data = String::from_utf8_lossy(invalid.as_bytes()).into_owned();
                // Counted as held: an invalid byte becomes U+FFFD, three bytes.
                if size - invalid.as_bytes().len() + data.len() > self.limit {
                    return Err(Error::EventTooLarge { limit: self.limit });
                }
                data
            }
        };
        self.lent = true;
        Ok(())
    }

    /// Takes the buffers of the event lent back, empty, for the next one.
    fn take_back(&mut self) {
        self.data = std::mem::take(&mut self.event.data).into_bytes();
        self.data.clear();
        // A large event does not leave a long-lived stream holding its size.
        self.data.shrink_to(KEPT);
        if let Some(id) = self.event.id.take() {
            self.spare_id = id;
        }
        if let Some(name) = self.event.event.take() {
            self.spare_name = name;
        }
        self.event.retry = None;
    }
}

/// Where the field name of a line (whole or begun) ends: at its first colon, or at its end
/// when it has none. `None` when the name means nothing (a comment's is empty, and no name
/// that means something is longer than `retry`), so that only a line's first bytes are
/// searched.
fn name_end(text: &[u8]) -> Option<usize> {
    let head = &text[..text.len().min(LONGEST_NAME + 1)];
    match head.iter().position(|&b| b == b':') {
        Some(0) => None,
        Some(colon) => Some(colon),
        None if head.len() > LONGEST_NAME => None,
        None => Some(text.len()),
    }
}

/// Sets a field of the event, in its spare buffer when it was not set yet, and tells the
/// bytes it holds.
fn set(field: &mut Option<String>, spare: &mut String, value: &[u8]) -> usize {
    let field = field.get_or_insert_with(|| std::mem::take(spare));
    field.clear();
    match std::str::from_utf8(value) {
        Ok(value) => field.push_str(value),
        Err(_) => field.push_str(&String::from_utf8_lossy(value)),
    }
    field.len()
}
