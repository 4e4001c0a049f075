//! Request ids: unique among a server's connections, in order for a dial's steps, taken by
//! many threads at once for calls.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// How many ids a thread takes for calls at a time.
const BLOCK: i64 = 64;

/// The ids of one server's connections: one counter. A dial's steps take its next id, so a
/// dial reads as the reference's wire examples (the probe 0, `initialize` 1). A call takes
/// one from a block of [`BLOCK`] its thread took from the same counter, so that requests
/// sent at once from several threads do not all write the counter (its cache line would
/// move from core to core with every request). Ids are unique; on one thread they rise.
#[derive(Debug)]
pub(crate) struct Ids {
    next: AtomicI64,
    /// Which ids a thread's block belongs to.
    key: u64,
}

/// The key of the next [`Ids`].
static KEYS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's block of call ids: the key of its [`Ids`], the next id, the end.
    static TAKEN: Cell<(u64, i64, i64)> = const { Cell::new((0, 0, 0)) };
}

impl Default for Ids {
    fn default() -> Self {
        Self {
            next: AtomicI64::new(0),
            key: KEYS.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Ids {
    /// The next id in order (a dial's steps).
    pub(crate) fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// An id for a call, from this thread's block (a new block when it is spent, or is
    /// another connection's).
    pub(crate) fn for_call(&self) -> i64 {
        TAKEN.with(|taken| {
            let (key, next, end) = taken.get();
            if key == self.key && next < end {
                taken.set((key, next + 1, end));
                return next;
            }
            let start = self.next.fetch_add(BLOCK, Ordering::Relaxed);
            taken.set((self.key, start + 1, start + BLOCK));
            start
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_dial_then_calls_on_one_thread_count_up_from_zero() {
        let ids = Ids::default();
        assert_eq!([ids.next(), ids.next()], [0, 1]);
        let calls: Vec<_> = (0..2 * BLOCK).map(|_| ids.for_call()).collect();
        assert_eq!(calls, (2..2 + 2 * BLOCK).collect::<Vec<_>>());
        // Another connection's calls on the same thread take a block of their own.
        let other = Ids::default();
        assert_eq!(other.for_call(), 0);
        assert_eq!(ids.for_call(), 2 + 2 * BLOCK);
    }

    #[test]
    fn ids_taken_by_many_threads_at_once_are_unique() {
        const THREADS: i64 = 9;
        const EACH: i64 = 1000;
        let ids = Arc::new(Ids::default());
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let ids = ids.clone();
                std::thread::spawn(move || {
                    (0..EACH)
                        .map(|i| match (i + t) % 7 {
                            0 => ids.next(),
                            _ => ids.for_call(),
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for thread in threads {
            for id in thread.join().unwrap() {
                assert!(id >= 0 && seen.insert(id), "id {id} taken twice");
            }
        }
        assert_eq!(seen.len(), usize::try_from(THREADS * EACH).unwrap());
    }
}
