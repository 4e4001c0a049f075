//! Duplicate detection: the `eventId`s a binding saw in the last [`Limits::dedup_window`]
//! (35 minutes by default), at most [`Limits::dedup_ids`] (4096).
//!
//! Ids are kept as their SHA-256, so a window holds small keys whatever the ids' sizes.
//! When the window is full, the oldest id is let go before its time and counted
//! ([`Dedup::evicted`]).
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcp_events::{Dedup, Limits};
//!
//! let start = Instant::now();
//! let mut seen = Dedup::new(&Limits::default());
//! assert!(seen.insert("evt_1", start));
//! assert!(!seen.insert("evt_1", start + Duration::from_secs(60))); // a duplicate
//! assert!(seen.insert("evt_1", start + Duration::from_secs(35 * 60))); // out of the window
//! ```

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::Limits;

type Key = [u8; 32];

/// The ids one binding saw recently.
#[derive(Debug, Clone)]
pub struct Dedup {
    window: Duration,
    capacity: usize,
    /// Each key held, with when it was first seen.
    keys: HashMap<Key, Instant>,
    /// The keys in the order they were first seen, with when.
    order: VecDeque<(Instant, Key)>,
    evicted: u64,
}

impl Default for Dedup {
    /// The window of [`Limits::default`].
    fn default() -> Self {
        Self::new(&Limits::default())
    }
}

impl Dedup {
    /// A window of [`Limits::dedup_window`] and at most [`Limits::dedup_ids`] ids (at least
    /// one).
    pub fn new(limits: &Limits) -> Self {
        let capacity = limits.dedup_ids.max(1);
        Self {
            window: limits.dedup_window,
            capacity,
            keys: HashMap::with_capacity(capacity),
            order: VecDeque::with_capacity(capacity),
            evicted: 0,
        }
    }

    /// Records `id`, seen at `now`: `false` when it was seen inside the window (a duplicate;
    /// its time is not renewed).
    pub fn insert(&mut self, id: &str, now: Instant) -> bool {
        self.expire(now);
        let key = key(id);
        if self.keys.contains_key(&key) {
            return false;
        }
        if self.order.len() == self.capacity
            && let Some((_, oldest)) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
            self.evicted += 1;
        }
        self.keys.insert(key, now);
        self.order.push_back((now, key));
        true
    }

    /// Whether `id` was seen inside the window, as of `now`.
    pub fn contains(&self, id: &str, now: Instant) -> bool {
        self.keys
            .get(&key(id))
            .is_some_and(|at| now.saturating_duration_since(*at) < self.window)
    }

    /// Ids let go before their time because the window was full.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Ids held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no id is held.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, key)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.window {
                break;
            }
            self.keys.remove(key);
            self.order.pop_front();
        }
    }
}

fn key(id: &str) -> Key {
    Sha256::digest(id.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_4096_ids_and_counts_what_it_lets_go() {
        let start = Instant::now();
        let mut seen = Dedup::default();
        for i in 0..Limits::default().dedup_ids {
            assert!(seen.insert(&format!("e{i}"), start));
        }
        assert_eq!((seen.len(), seen.evicted()), (4096, 0));
        assert!(
            !seen.insert("e0", start),
            "at the bound, the first is still held"
        );
        assert!(seen.insert("e4096", start), "one past the bound");
        assert_eq!((seen.len(), seen.evicted()), (4096, 1));
        assert!(!seen.contains("e0", start), "the oldest was let go");
        assert!(seen.insert("e0", start), "so it is new again");
        assert_eq!(seen.evicted(), 2);
    }

    #[test]
    fn ids_leave_the_window_after_35_minutes() {
        let start = Instant::now();
        let mut seen = Dedup::default();
        let window = Limits::default().dedup_window;
        assert_eq!(window, Duration::from_secs(35 * 60));
        assert!(seen.insert("a", start));
        let just_inside = start + window - Duration::from_millis(1);
        assert!(!seen.insert("a", just_inside));
        assert!(seen.contains("a", just_inside));
        assert!(!seen.contains("a", start + window));
        assert!(seen.insert("a", start + window));
        assert_eq!(seen.len(), 1, "the expired one was dropped");
        assert_eq!(seen.evicted(), 0, "expiry is no eviction");
    }

    #[test]
    fn a_window_of_other_limits_keeps_them() {
        let start = Instant::now();
        let limits = Limits {
            dedup_ids: 2,
            dedup_window: Duration::from_secs(10),
            ..Limits::default()
        };
        let mut seen = Dedup::new(&limits);
        assert!(seen.insert("a", start));
        assert!(seen.insert("b", start));
        assert!(!seen.insert("a", start), "at the bound");
        assert!(seen.insert("c", start), "one past the bound");
        assert_eq!((seen.len(), seen.evicted()), (2, 1));
        assert!(!seen.contains("a", start));
        let later = start + Duration::from_secs(10);
        assert!(seen.contains("b", later - Duration::from_millis(1)));
        assert!(!seen.contains("b", later));
        assert!(seen.insert("b", later));
        assert_eq!(seen.len(), 1);
    }
}
