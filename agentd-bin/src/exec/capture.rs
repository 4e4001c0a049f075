//! One of a command's output streams, kept up to a bound: read to its end whatever the
//! command writes, the bytes past the bound dropped, so that a command writing more never
//! blocks on a full pipe.

use agentd_tools::exec::Captured;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How much one read takes from a pipe.
const READ: usize = 16 * 1024;

/// What a stream wrote, its first `max` bytes kept.
#[derive(Debug)]
pub(super) struct Capture {
    kept: Vec<u8>,
    max: usize,
    truncated: bool,
}

impl Capture {
    /// Nothing kept yet, at most `max` bytes to keep.
    pub(super) fn new(max: usize) -> Self {
        Self {
            kept: Vec::new(),
            max,
            truncated: false,
        }
    }

    /// Keeps what of `chunk` fits; notes that bytes were dropped when some do not.
    pub(super) fn take(&mut self, chunk: &[u8]) {
        let room = self.max.saturating_sub(self.kept.len());
        let kept = chunk.len().min(room);
        self.truncated |= kept < chunk.len();
        self.kept.extend_from_slice(&chunk[..kept]);
    }

    /// Reads `pipe` to its end (or its first error) into the capture.
    pub(super) async fn drain(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        let mut buf = vec![0; READ];
        while let Ok(n @ 1..) = pipe.read(&mut buf).await {
            self.take(&buf[..n]);
        }
    }

    /// What was kept, and whether bytes were dropped.
    pub(super) fn captured(self) -> Captured {
        Captured::new(self.kept, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_kept_to_the_bound_and_cut_past_it() {
        let mut at = Capture::new(4);
        at.take(b"ab");
        at.take(b"cd");
        at.take(b"");
        assert_eq!(at.captured(), Captured::new(b"abcd".to_vec(), false));
        let mut past = Capture::new(4);
        past.take(b"abc");
        past.take(b"de");
        past.take(b"fgh");
        assert_eq!(past.captured(), Captured::new(b"abcd".to_vec(), true));
    }

    #[tokio::test]
    async fn a_pipe_is_read_to_its_end() {
        let written = vec![7u8; 3 * READ + 1];
        let mut capture = Capture::new(READ);
        capture.drain(Some(&written[..])).await;
        let got = capture.captured();
        assert_eq!((got.bytes.len(), got.truncated), (READ, true));
        let mut none = Capture::new(1);
        none.drain(None::<&[u8]>).await;
        assert_eq!(none.captured(), Captured::default());
    }
}
