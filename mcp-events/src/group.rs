//! Group commit's gathering: which commits share one transaction (one sync of the store).
//!
//! A thread that owns a store takes a commit and those queued behind it. What queues while a
//! group's sync runs is only the callers that group did not hold: the callers it answered
//! send their next commits a moment after it, so at a steady load the callers can split into
//! two halves that take turns, each group half as large as it could be. [`Gathering`] keeps
//! them together: a group smaller than the last one waits, up to [`GroupPolicy::window`], for
//! as many commits as the last one held. A group that already holds as many, or the first
//! one, does not wait; a caller that does not come back costs one window, after which the
//! groups expect no more than came.
//!
//! Measured with the bench `group` of this crate (16 bindings committing 1 KiB records, each
//! awaiting its outcome) changed so that a binding pauses some 100 µs after its answer before
//! its next commit (as one answering a webhook and taking the next delivery would; a probe,
//! not part of the bench): groups of 7.8–9.3 without the window (14.3k–16.6k occurrences a
//! second), 14–16 with it in five rounds of six and 9.8 in one (14.1k–19.8k a second), so
//! about the same occurrences in fewer transactions. A binding that sends its next at once
//! mostly makes the group without waiting: the writing of the batches before it leaves it the
//! time (the bench as it is: 14.3–15.8 a group without the window, 15.9–16.0 with it, and a
//! median of 22.7k occurrences a second against 21.7k over 18 rounds).
//!
//! Time is passed in: the gathering reads no clock and waits on nothing itself.
//!
//! ```
//! use std::collections::VecDeque;
//! use std::time::{Duration, Instant};
//!
//! use mcp_events::group::{Gathering, GroupPolicy};
//!
//! let mut gathering = Gathering::new(GroupPolicy::default());
//! let start = Instant::now();
//! let mut queued: VecDeque<u32> = (2..=4).collect();
//! // The first group takes what is queued and waits for nothing.
//! let mut group = Vec::new();
//! gathering.gather(1, |_wait| queued.pop_front(), || start, |c| group.push(c));
//! assert_eq!(group, [1, 2, 3, 4]);
//! // The next waits for as many as the last held, up to the window.
//! let (mut group, mut waits) = (Vec::new(), Vec::new());
//! let take = |wait: Option<Duration>| {
//!     waits.push(wait);
//!     wait.map(|_| 6)
//! };
//! gathering.gather(5, take, || start, |c| group.push(c));
//! assert_eq!(group, [5, 6, 6, 6]);
//! assert_eq!(waits[0], Some(Duration::from_micros(200)));
//! ```

use std::time::{Duration, Instant};

/// How commits are gathered into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupPolicy {
    /// The most commits in one group. Default 64. A group holds its first commit however
    /// small this is (0 is taken as 1).
    pub max: usize,
    /// How long a group smaller than the last one waits for more, from its first commit.
    /// Default 200 µs: under a sync of the file (0.1–0.5 ms on the machines measured), and
    /// over the time a caller answered on another thread takes to send its next commit. A
    /// group waits at most one window, and the whole of it only when fewer commits come than
    /// the last group held. Zero never waits (a group is what is queued).
    pub window: Duration,
}

impl Default for GroupPolicy {
    fn default() -> Self {
        Self {
            max: 64,
            window: Duration::from_micros(200),
        }
    }
}

impl GroupPolicy {
    /// A policy of groups of at most `max` commits (at least one), waiting up to `window`.
    pub fn new(max: usize, window: Duration) -> Self {
        Self {
            max: max.max(1),
            window,
        }
    }
}

/// The gathering of one store's groups: what the last group held, and so how many the next
/// waits for.
#[derive(Debug, Clone)]
pub struct Gathering {
    policy: GroupPolicy,
    /// How many commits the last group held.
    last: usize,
}

impl Gathering {
    /// A gathering by `policy`, whose first group waits for nothing.
    pub fn new(policy: GroupPolicy) -> Self {
        Self { policy, last: 0 }
    }

    /// Its policy.
    pub fn policy(&self) -> &GroupPolicy {
        &self.policy
    }

    /// Gathers the group that begins with `first`: gives each of its commits to `add`, in
    /// the order taken, until it holds [`GroupPolicy::max`] or `take` gives none.
    ///
    /// `take(None)` is to give a commit already queued, without waiting; `take(Some(d))` one
    /// queued or, when none is, the first to come within `d`. `take` gives `None` when there
    /// is none (or when what came is not to join the group: the caller keeps it for after).
    /// It is asked to wait only while the group is smaller than the last one and the window,
    /// counted by `now` from this call (before `first` is added), is not over. `add` can write
    /// each commit as it comes, while the next are awaited.
    pub fn gather<T>(
        &mut self,
        first: T,
        mut take: impl FnMut(Option<Duration>) -> Option<T>,
        mut now: impl FnMut() -> Instant,
        mut add: impl FnMut(T),
    ) {
        // The window's end, when the group may wait (`None` when it is past what an `Instant`
        // holds: no end).
        let until = (self.last > 1).then(|| now().checked_add(self.policy.window));
        add(first);
        let mut size = 1;
        while size < self.policy.max {
            let wait = match until {
                Some(until) if size < self.last => {
                    let left = until.map_or(Duration::MAX, |u| u.saturating_duration_since(now()));
                    Some(left).filter(|left| !left.is_zero())
                }
                _ => None,
            };
            match take(wait) {
                Some(commit) => add(commit),
                None => break,
            }
            size += 1;
        }
        self.last = size;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;

    use super::*;

    /// A queue in virtual time: each commit arrives at its offset from the start; waiting
    /// moves the clock to the next arrival or by the whole wait.
    struct Arrivals {
        start: Instant,
        clock: Cell<Duration>,
        due: RefCell<VecDeque<(Duration, u32)>>,
        waits: RefCell<Vec<Option<Duration>>>,
    }

    impl Arrivals {
        fn new(due: &[(u64, u32)]) -> Self {
            let due = due.iter().map(|&(at, n)| (Duration::from_micros(at), n));
            Self {
                start: Instant::now(),
                clock: Cell::new(Duration::ZERO),
                due: RefCell::new(due.collect()),
                waits: RefCell::default(),
            }
        }

        fn take(&self, wait: Option<Duration>) -> Option<u32> {
            self.waits.borrow_mut().push(wait);
            let mut due = self.due.borrow_mut();
            let reach = self.clock.get() + wait.unwrap_or_default();
            match due.front() {
                Some(&(at, n)) if at <= reach => {
                    self.clock.set(self.clock.get().max(at));
                    due.pop_front();
                    Some(n)
                }
                _ => {
                    self.clock.set(reach);
                    None
                }
            }
        }

        fn gather(&self, gathering: &mut Gathering, first: u32) -> Vec<u32> {
            let now = || self.start + self.clock.get();
            let mut group = Vec::new();
            gathering.gather(first, |wait| self.take(wait), now, |c| group.push(c));
            group
        }

        fn waits(&self) -> Vec<Option<Duration>> {
            self.waits.borrow().clone()
        }
    }

    fn policy(max: usize, window_us: u64) -> GroupPolicy {
        GroupPolicy::new(max, Duration::from_micros(window_us))
    }

    /// A gathering by `policy` whose last group held `size` commits, all queued at once
    /// (the first group, which waits for nothing).
    fn after_a_group_of(policy: GroupPolicy, size: u32) -> Gathering {
        let mut gathering = Gathering::new(policy);
        let queued: Vec<_> = (2..=size).map(|n| (0, n)).collect();
        let group = Arrivals::new(&queued).gather(&mut gathering, 1);
        assert_eq!(group, (1..=size).collect::<Vec<_>>());
        gathering
    }

    #[test]
    fn the_first_group_takes_what_is_queued_and_waits_for_nothing() {
        let mut gathering = Gathering::new(GroupPolicy::default());
        let arrivals = Arrivals::new(&[(0, 2), (0, 3), (50, 4)]);
        assert_eq!(arrivals.gather(&mut gathering, 1), [1, 2, 3]);
        assert_eq!(arrivals.waits(), [None, None, None]);
    }

    #[test]
    fn a_smaller_group_waits_for_as_many_as_the_last_held() {
        let mut gathering = after_a_group_of(policy(64, 200), 3);
        // Two come back within the window; then the group is as large as the last, and takes
        // only what is queued (the third is not yet).
        let arrivals = Arrivals::new(&[(30, 5), (60, 6), (70, 7)]);
        assert_eq!(arrivals.gather(&mut gathering, 4), [4, 5, 6]);
        assert_eq!(
            arrivals.waits(),
            [
                Some(Duration::from_micros(200)),
                Some(Duration::from_micros(170)),
                None,
            ]
        );
    }

    #[test]
    fn the_window_is_counted_from_the_groups_first_commit() {
        let mut gathering = after_a_group_of(policy(64, 200), 4);
        // One comes at 150 µs, the next would at 250 µs: past the window, not waited for.
        let arrivals = Arrivals::new(&[(150, 6), (250, 7)]);
        assert_eq!(arrivals.gather(&mut gathering, 5), [5, 6]);
        assert_eq!(arrivals.clock.get(), Duration::from_micros(200));
        // The last group held two: the next waits for one more only.
        let arrivals = Arrivals::new(&[(100, 9), (110, 10)]);
        assert_eq!(arrivals.gather(&mut gathering, 8), [8, 9]);
    }

    #[test]
    fn callers_that_do_not_come_back_cost_one_window() {
        let mut gathering = after_a_group_of(policy(64, 200), 4);
        let arrivals = Arrivals::new(&[]);
        assert_eq!(arrivals.gather(&mut gathering, 5), [5]);
        assert_eq!(arrivals.clock.get(), Duration::from_micros(200));
        // The last held one: a lone commit does not wait.
        let arrivals = Arrivals::new(&[]);
        assert_eq!(arrivals.gather(&mut gathering, 6), [6]);
        assert_eq!(arrivals.waits(), [None]);
    }

    #[test]
    fn a_group_stops_at_max_and_at_a_commit_not_given() {
        let mut gathering = Gathering::new(policy(3, 200));
        let arrivals = Arrivals::new(&[(0, 2), (0, 3), (0, 4)]);
        assert_eq!(arrivals.gather(&mut gathering, 1), [1, 2, 3]);
        assert_eq!(arrivals.due.borrow().len(), 1);
        // `take` gives none (say, another kind of request came): the group ends there,
        // though it is smaller than the last.
        let mut group = Vec::new();
        gathering.gather(5, |_| None, Instant::now, |c| group.push(c));
        assert_eq!(group, [5]);
    }

    #[test]
    fn a_zero_window_never_waits() {
        let mut gathering = after_a_group_of(policy(64, 0), 3);
        let arrivals = Arrivals::new(&[(10, 5)]);
        assert_eq!(arrivals.gather(&mut gathering, 4), [4]);
        assert_eq!(arrivals.waits(), [None]);
    }

    /// Adding a commit takes time (the caller writes it): the window runs from before the
    /// first is added, not after.
    #[test]
    fn the_window_runs_while_commits_are_added() {
        let mut gathering = after_a_group_of(policy(64, 200), 4);
        // Each commit added moves the clock 50 µs; the last arrives at 240 µs, past the
        // window's end at 200 µs.
        let arrivals = Arrivals::new(&[(100, 6), (180, 7), (240, 8)]);
        let now = || arrivals.start + arrivals.clock.get();
        let mut group = Vec::new();
        let add = |c| {
            group.push(c);
            arrivals
                .clock
                .set(arrivals.clock.get() + Duration::from_micros(50));
        };
        gathering.gather(5, |wait| arrivals.take(wait), now, add);
        assert_eq!(group, [5, 6, 7]);
        let micros = |us| Some(Duration::from_micros(us));
        assert_eq!(arrivals.waits(), [micros(150), micros(50), None]);
    }

    /// A group holds its first commit at least, whatever `max` says, and takes no more
    /// than `max`.
    #[test]
    fn a_group_of_one_takes_nothing_more() {
        // The fields are public: a policy can hold a `max` of 0.
        let zero = GroupPolicy {
            max: 0,
            ..GroupPolicy::default()
        };
        assert_eq!(GroupPolicy::new(0, Duration::ZERO).max, 1);
        for policy in [zero, policy(1, 200)] {
            let mut gathering = Gathering::new(policy);
            for first in 1..=3 {
                let mut group = Vec::new();
                let take = |_| -> Option<u32> { panic!("nothing is taken") };
                gathering.gather(first, take, Instant::now, |c| group.push(c));
                assert_eq!(group, [first]);
            }
        }
    }

    /// A window past what an `Instant` holds waits without end rather than overflowing.
    #[test]
    fn an_endless_window_waits_without_end() {
        let mut gathering = after_a_group_of(GroupPolicy::new(64, Duration::MAX), 2);
        let arrivals = Arrivals::new(&[(1_000_000, 4)]);
        assert_eq!(arrivals.gather(&mut gathering, 3), [3, 4]);
        assert_eq!(arrivals.waits(), [Some(Duration::MAX), None]);
    }
}
