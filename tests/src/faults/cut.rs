//! Where [`Fault::CutBody`](super::Fault::CutBody) cuts: a scan of the bytes a server sends,
//! response after response, that finds the middle of the first body.

/// The longest response head the scan keeps; a longer one is cut where it stands.
const HEAD_MAX: usize = 64 * 1024;

/// The bytes ending a field name of an event stream's data line.
const DATA: &[u8] = b"data:";

/// A scan of a server's bytes that finds where to cut its first body half-way: half its
/// `Content-Length`, just after the `data:` of its first event (an event stream), or half-way
/// through its first chunk (a chunked body). A response without a body (`Content-Length: 0`)
/// is passed over, and the next one scanned. A body delimited by the connection's end is cut
/// where it starts.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    state: State,
}

#[derive(Debug)]
enum State {
    /// Reading a response head, kept so far.
    Head(Vec<u8>),
    /// In a body of known length: how many more bytes pass before the cut.
    Length(usize),
    /// In an event stream: how many bytes of `data:` matched so far.
    Event(usize),
    /// In a chunked body: the chunk-size line read so far.
    ChunkSize(Vec<u8>),
    /// In the first chunk's data: how many more bytes pass before the cut.
    ChunkData(usize),
}

impl Default for State {
    fn default() -> Self {
        Self::Head(Vec::new())
    }
}

impl Cut {
    /// Takes the next bytes from the server: `Some(n)` when the cut falls in them (the
    /// first `n` pass, the rest and everything after do not), `None` when they all pass.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        for (at, &byte) in bytes.iter().enumerate() {
            // A cut may fall before this byte, or just after it.
            if self.cut_before() {
                return Some(at);
            }
            if self.take(byte) {
                return Some(at + 1);
            }
        }
        self.cut_before().then_some(bytes.len())
    }

    /// Whether the cut falls here, before the next byte.
    fn cut_before(&self) -> bool {
        matches!(self.state, State::Length(0) | State::ChunkData(0))
    }

    /// Takes one byte: `true` when the cut falls just after it.
    fn take(&mut self, byte: u8) -> bool {
        match &mut self.state {
            State::Head(head) => {
                head.push(byte);
                if head.ends_with(b"\r\n\r\n") {
                    let head = std::mem::take(head);
                    return self.start_body(&head);
                }
                head.len() >= HEAD_MAX
            }
            State::Length(left) => {
                *left -= 1;
                false
            }
            State::Event(matched) => {
                *matched = match byte {
                    _ if byte == DATA[*matched] => *matched + 1,
                    _ if byte == DATA[0] => 1,
                    _ => 0,
                };
                *matched == DATA.len()
            }
            State::ChunkSize(line) => {
                line.push(byte);
                if line.ends_with(b"\r\n") {
                    let size = std::str::from_utf8(&line[..line.len() - 2])
                        .ok()
                        .and_then(|l| l.split(';').next())
                        .and_then(|hex| usize::from_str_radix(hex.trim(), 16).ok());
                    match size {
                        // The last chunk: the body was empty; the next response is scanned.
                        Some(0) => self.state = State::Head(Vec::new()),
                        Some(size) => self.state = State::ChunkData(size / 2),
                        // Not chunked after all: cut here.
                        None => return true,
                    }
                }
                false
            }
            State::ChunkData(left) => {
                *left -= 1;
                false
            }
        }
    }

    /// The head has ended: the body it announces is scanned. `true` when the cut falls
    /// at the body's start.
    fn start_body(&mut self, head: &[u8]) -> bool {
        let text = String::from_utf8_lossy(head).to_ascii_lowercase();
        let header = |name: &str| {
            text.split("\r\n")
                .skip(1)
                .filter_map(|line| line.split_once(':'))
                .find(|(n, _)| n.trim() == name)
                .map(|(_, v)| v.trim().to_owned())
        };
        // An interim answer (`100 Continue`) has no body; the answer follows.
        if text.starts_with("http/1.1 1") {
            self.state = State::Head(Vec::new());
            return false;
        }
        if header("content-type").is_some_and(|t| t.starts_with("text/event-stream")) {
            self.state = State::Event(0);
            return false;
        }
        if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
            if length == 0 {
                self.state = State::Head(Vec::new());
                return false;
            }
            self.state = State::Length(length / 2);
            return false;
        }
        if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            self.state = State::ChunkSize(Vec::new());
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of `step`: where the cut falls, counted from the start.
    fn cut_at(bytes: &[u8], step: usize) -> Option<usize> {
        let mut cut = Cut::default();
        let mut passed = 0;
        for piece in bytes.chunks(step) {
            if let Some(n) = cut.feed(piece) {
                return Some(passed + n);
            }
            passed += piece.len();
        }
        None
    }

    #[test]
    fn a_body_of_known_length_is_cut_at_its_half() {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n";
        let bytes = format!("{head}0123456789");
        for step in [1, 3, 1000] {
            assert_eq!(
                cut_at(bytes.as_bytes(), step),
                Some(head.len() + 5),
                "{step}"
            );
        }
    }

    #[test]
    fn an_empty_answer_is_passed_over_for_the_next() {
        let empty = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        let next = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd";
        let bytes = format!("{empty}{next}");
        let body_start = empty.len() + next.len() - 4;
        assert_eq!(cut_at(bytes.as_bytes(), 7), Some(body_start + 2));
    }

    #[test]
    fn an_event_stream_is_cut_inside_its_first_event() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        let body = "1a\r\nid: st1-0\ndata: {\"a\":1}\n\n\r\n";
        let bytes = format!("{head}{body}");
        let at = head.len() + body.find("data:").unwrap() + DATA.len();
        for step in [1, 2, 5, 4096] {
            assert_eq!(cut_at(bytes.as_bytes(), step), Some(at), "{step}");
        }
    }

    #[test]
    fn a_chunked_body_is_cut_half_way_through_its_first_chunk() {
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let bytes = format!("{head}8\r\nabcdefgh\r\n0\r\n\r\n");
        assert_eq!(cut_at(bytes.as_bytes(), 1), Some(head.len() + 3 + 4));
    }

    #[test]
    fn a_body_without_length_is_cut_where_it_starts() {
        let head = "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n";
        let bytes = format!("{head}abc");
        assert_eq!(cut_at(bytes.as_bytes(), 2), Some(head.len()));
    }

    #[test]
    fn a_head_that_never_ends_is_cut_at_the_bound() {
        let bytes = vec![b'x'; HEAD_MAX + 10];
        assert_eq!(cut_at(&bytes, 1000), Some(HEAD_MAX));
    }

    #[test]
    fn nothing_is_cut_before_the_body() {
        let mut cut = Cut::default();
        assert_eq!(cut.feed(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n"), None);
        assert_eq!(cut.feed(b"\r\n"), None);
        assert_eq!(cut.feed(b"ab"), Some(2));
    }
}
