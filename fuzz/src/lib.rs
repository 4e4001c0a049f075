//! The bodies of the fuzz targets, one module per target, each a plain function of the input
//! bytes. `fuzz_targets/<name>.rs` hands libFuzzer's inputs to `<name>`, and
//! `tests/replay.rs` runs every committed seed through it on the stable toolchain.
//!
//! Each function panics when its oracle fails, and returns quietly otherwise.

mod binding;
mod header_value;
mod listener;
mod listing;
mod message;
mod negotiation;
mod occurrence;
mod reply;
mod session;
mod sse;
mod webhook;
mod x_mcp_header;

pub use binding::binding;
pub use header_value::header_value;
pub use listener::listener;
pub use listing::listing;
pub use message::message;
pub use negotiation::negotiation;
pub use occurrence::occurrence;
pub use reply::reply;
pub use session::session;
pub use sse::sse;
pub use webhook::webhook;
pub use x_mcp_header::x_mcp_header;

/// The input of the step-driven targets, read a byte at a time: past its end, every byte
/// reads as 0, so any input is a whole sequence of steps.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `max` bytes, their count read first.
    fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = usize::from(self.byte()).min(max).min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }

    /// One of `items`.
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[usize::from(self.byte()) % items.len()]
    }
}
