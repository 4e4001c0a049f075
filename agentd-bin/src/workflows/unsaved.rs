//! The runs whose record the store did not take. Such a run is set back to what the store
//! keeps, as a restart would set it back: the engine lets go of it (its attempts under way
//! given up) and reads it back from the store after a wait, 1 s at first and doubling to
//! 60 s while the store still fails, then resumes it from there. What it did since its last
//! kept record is done again (a step's call under the same idempotency key), never lost
//! unknown to the store nor told as kept.

use std::collections::BTreeMap;

/// The first wait before a run set back is read back, and the longest.
pub(super) const FIRST_MS: i64 = 1_000;
pub(super) const MAX_MS: i64 = 60_000;

/// The runs set back, each with when it is read back and the wait that led there.
#[derive(Debug, Default)]
pub(super) struct Unsaved {
    runs: BTreeMap<String, (i64, i64)>,
}

impl Unsaved {
    /// Run `id` is set back at `now_ms`: read back after [`FIRST_MS`], or twice the last
    /// wait (at most [`MAX_MS`]) when it was set back already.
    pub(super) fn set_back(&mut self, id: &str, now_ms: i64) {
        let wait = match self.runs.get(id) {
            Some((_, last)) => last.saturating_mul(2).min(MAX_MS),
            None => FIRST_MS,
        };
        self.runs
            .insert(id.to_owned(), (now_ms.saturating_add(wait), wait));
    }

    /// Whether run `id` is set back.
    pub(super) fn contains(&self, id: &str) -> bool {
        self.runs.contains_key(id)
    }

    /// How many runs are set back.
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }

    /// When the next run set back is read back.
    pub(super) fn next_due(&self) -> Option<i64> {
        self.runs.values().map(|(due, _)| *due).min()
    }

    /// The runs to read back at `now_ms`.
    pub(super) fn due(&self, now_ms: i64) -> Vec<String> {
        let due = self.runs.iter().filter(|(_, (at, _))| *at <= now_ms);
        due.map(|(id, _)| id.clone()).collect()
    }

    /// Run `id` was read back at `now_ms` and resumed: forgotten, unless it was set back
    /// again since (its next read later than `now_ms`).
    pub(super) fn resumed(&mut self, id: &str, now_ms: i64) {
        if self.runs.get(id).is_some_and(|(due, _)| *due <= now_ms) {
            self.runs.remove(id);
        }
    }

    /// Run `id` is no more (the store does not hold it).
    pub(super) fn forget(&mut self, id: &str) {
        self.runs.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_to_its_bound_and_a_resumed_run_is_forgotten() {
        let mut unsaved = Unsaved::default();
        unsaved.set_back("r", 0);
        assert_eq!(unsaved.next_due(), Some(FIRST_MS));
        assert!(unsaved.due(FIRST_MS - 1).is_empty());
        let mut waits = Vec::new();
        let mut now = 0;
        for _ in 0..8 {
            now = unsaved.next_due().unwrap();
            assert_eq!(unsaved.due(now), ["r"]);
            unsaved.set_back("r", now);
            waits.push(unsaved.next_due().unwrap() - now);
        }
        let seconds: Vec<i64> = waits.iter().map(|w| w / 1000).collect();
        assert_eq!(seconds, [2, 4, 8, 16, 32, 60, 60, 60]);
        // Set back again while it was read back: kept.
        unsaved.resumed("r", now);
        assert!(unsaved.contains("r"));
        let due = unsaved.next_due().unwrap();
        unsaved.resumed("r", due);
        assert!(!unsaved.contains("r"));
        assert_eq!(unsaved.next_due(), None);
    }
}
