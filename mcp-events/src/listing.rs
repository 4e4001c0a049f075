//! Listing a server's event types: `events/list` paged to the end, within
//! [`Limits::list_pages_max`] pages and [`Limits::list_types_max`] types (20 and 1000 by
//! default), and listed again every [`Limits::relist_every`] (15 minutes), or sooner when
//! asked (a reload, the server's `list_changed`, a binding whose type went away).
//!
//! ```
//! use std::time::Instant;
//! use mcp_events::Limits;
//! use mcp_events::listing::{Lister, Step};
//! use mcp_wire::events::{DeliveryMode, EventType, ListEventsResult};
//! use mcp_wire::Cursor;
//!
//! let now = Instant::now();
//! let mut lister = Lister::new(now, &Limits::default());
//! assert_eq!(lister.poll_request(now), Some(None)); // the first page
//! let page = ListEventsResult::new(vec![EventType::new("a", &[DeliveryMode::Poll])], None);
//! let Step::Done(types) = lister.on_page(page, now) else { panic!() };
//! assert_eq!(types.len(), 1);
//! assert_eq!(lister.poll_request(now), None); // not again for 15 minutes
//! ```

use std::time::Instant;

use mcp_wire::Cursor;
use mcp_wire::events::{EventType, ListEventsResult};

use crate::Limits;
use crate::schedule::{Retry, later};

/// What a page came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Ask for the next page.
    More,
    /// The listing is whole.
    Done(Vec<EventType>),
    /// Past the pages or types the limits allow: `list_too_large`.
    TooLarge,
}

/// The listing of one server's event types.
#[derive(Debug, Clone)]
pub struct Lister {
    /// The listing is due at this time (`None`: a page is out, or it is not due).
    due: Option<Instant>,
    /// The types so far, and the cursor of the next page, while a listing is under way.
    partial: Option<(Vec<EventType>, usize, Option<Cursor>)>,
    in_flight: bool,
    retry: Retry,
    limits: Limits,
}

impl Lister {
    /// A lister due at `now`, within `limits`.
    pub fn new(now: Instant, limits: &Limits) -> Self {
        Self {
            due: Some(now),
            partial: None,
            in_flight: false,
            retry: Retry::new(limits),
            limits: *limits,
        }
    }

    /// Lists again as soon as the current listing (if any) is done: a reload, the server's
    /// `notifications/events/list_changed`, a type that went away.
    pub fn again(&mut self, now: Instant) {
        if self.partial.is_none() && !self.in_flight {
            self.due = Some(now);
        }
    }

    /// The page to ask for now (`Some(None)` is the first page), if any.
    #[must_use]
    pub fn poll_request(&mut self, now: Instant) -> Option<Option<Cursor>> {
        if self.in_flight {
            return None;
        }
        if let Some((_, _, cursor)) = &self.partial {
            self.in_flight = true;
            return Some(cursor.clone());
        }
        match self.due {
            Some(at) if now >= at => {
                self.due = None;
                self.partial = Some((Vec::new(), 0, None));
                self.in_flight = true;
                Some(None)
            }
            _ => None,
        }
    }

    /// When a listing is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.due
    }

    /// A page arrived.
    #[must_use]
    pub fn on_page(&mut self, page: ListEventsResult, now: Instant) -> Step {
        self.in_flight = false;
        let Some((mut types, pages, _)) = self.partial.take() else {
            return Step::More;
        };
        let pages = pages + 1;
        types.extend(page.items);
        // A last page that names a next one is already past the bound: no further page is
        // asked for.
        if types.len() > self.limits.list_types_max
            || (pages >= self.limits.list_pages_max && page.next_cursor.is_some())
        {
            self.finish(now);
            return Step::TooLarge;
        }
        match page.next_cursor {
            Some(cursor) => {
                self.partial = Some((types, pages, Some(cursor)));
                Step::More
            }
            None => {
                self.finish(now);
                Step::Done(types)
            }
        }
    }

    /// The listing failed (the page is asked for again, from the first, on the retry
    /// schedule, moved by the jitter of the limits by `random`); the wait before it.
    pub fn on_failure(
        &mut self,
        now: Instant,
        exhausted: bool,
        random: u32,
    ) -> std::time::Duration {
        self.in_flight = false;
        self.partial = None;
        let wait = self
            .limits
            .jitter(self.retry.next_failure(exhausted), random);
        self.due = Some(later(now, wait));
        wait
    }

    /// The server does not list events at all (-32601): not asked again before the next
    /// periodic listing.
    pub fn hold(&mut self, now: Instant) {
        self.in_flight = false;
        self.partial = None;
        self.finish(now);
    }

    fn finish(&mut self, now: Instant) {
        self.retry.reset();
        self.due = Some(later(now, self.limits.relist_every));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_wire::events::DeliveryMode;

    use super::*;

    fn page(n: usize, next: Option<&str>) -> ListEventsResult {
        let items = (0..n)
            .map(|i| EventType::new(format!("t{i}"), &[DeliveryMode::Poll]))
            .collect();
        ListEventsResult::new(items, next.map(|c| Cursor(c.to_owned())))
    }

    fn list(pages: usize, per_page: usize) -> Step {
        list_within(&Limits::default(), pages, per_page)
    }

    fn list_within(limits: &Limits, pages: usize, per_page: usize) -> Step {
        let now = Instant::now();
        let mut l = Lister::new(now, limits);
        let mut step = Step::More;
        for p in 0..pages {
            assert!(l.poll_request(now).is_some(), "page {p}");
            let next = (p + 1 < pages).then_some("next");
            step = l.on_page(page(per_page, next), now);
            if step != Step::More {
                break;
            }
        }
        step
    }

    #[test]
    fn twenty_pages_and_a_thousand_types_at_most() {
        assert!(matches!(list(20, 1), Step::Done(t) if t.len() == 20));
        // The 20th page names a next one: too large, without asking for a 21st.
        assert_eq!(list(21, 1), Step::TooLarge);
        let now = Instant::now();
        let limits = Limits::default();
        let mut l = Lister::new(now, &limits);
        for _ in 0..limits.list_pages_max {
            l.poll_request(now).expect("a page");
            let _ = l.on_page(page(1, Some("next")), now);
        }
        assert_eq!(l.poll_request(now), None, "no 21st page");
        assert!(matches!(list(10, 100), Step::Done(t) if t.len() == 1000));
        assert_eq!(list(1, 1001), Step::TooLarge);
    }

    #[test]
    fn an_absurd_relist_wait_does_not_panic() {
        let limits = Limits {
            relist_every: Duration::MAX,
            ..Limits::default()
        };
        let now = Instant::now();
        let mut l = Lister::new(now, &limits);
        let _ = l.poll_request(now);
        assert!(matches!(l.on_page(page(1, None), now), Step::Done(_)));
        assert!(l.poll_timeout().is_some_and(|at| at > now));
    }

    #[test]
    fn other_bounds_are_kept() {
        let mut limits = Limits {
            list_pages_max: 2,
            list_types_max: 5,
            ..Limits::default()
        };
        assert!(matches!(list_within(&limits, 2, 1), Step::Done(t) if t.len() == 2));
        assert_eq!(list_within(&limits, 3, 1), Step::TooLarge);
        assert!(matches!(list_within(&limits, 1, 5), Step::Done(t) if t.len() == 5));
        assert_eq!(list_within(&limits, 1, 6), Step::TooLarge);
        limits.relist_every = Duration::from_secs(60);
        let now = Instant::now();
        let mut l = Lister::new(now, &limits);
        let _ = l.poll_request(now);
        assert!(matches!(l.on_page(page(1, None), now), Step::Done(_)));
        assert_eq!(l.poll_timeout(), Some(now + Duration::from_secs(60)));
    }

    #[test]
    fn pages_follow_their_cursor_and_the_listing_comes_back_every_15_minutes() {
        let now = Instant::now();
        let mut l = Lister::new(now, &Limits::default());
        assert_eq!(l.poll_request(now), Some(None));
        assert_eq!(l.poll_request(now), None, "one page at a time");
        assert_eq!(l.on_page(page(1, Some("")), now), Step::More);
        assert_eq!(l.poll_request(now), Some(Some(Cursor(String::new()))));
        assert!(matches!(l.on_page(page(1, None), now), Step::Done(t) if t.len() == 2));
        assert_eq!(l.poll_timeout(), Some(now + Limits::default().relist_every));
        assert_eq!(
            l.poll_request(now + Limits::default().relist_every - Duration::from_millis(1)),
            None
        );
        l.again(now);
        assert_eq!(l.poll_request(now), Some(None), "asked for again");
    }

    #[test]
    fn a_failed_listing_starts_again_on_the_retry_schedule() {
        let now = Instant::now();
        let mut l = Lister::new(now, &Limits::default());
        let _ = l.poll_request(now);
        assert_eq!(l.on_page(page(1, Some("c")), now), Step::More);
        let _ = l.poll_request(now);
        assert_eq!(
            l.on_failure(now, false, u32::MAX / 2),
            Duration::from_nanos(999_999_999)
        );
        assert_eq!(l.poll_request(now), None);
        let at = now + Duration::from_secs(1);
        assert_eq!(l.poll_request(at), Some(None), "from the first page");
        assert_eq!(
            l.on_failure(at, false, 0),
            Duration::from_millis(1800),
            "2 s, -10%"
        );
        let _ = l.poll_request(at + Duration::from_secs(2));
        l.hold(at);
        assert_eq!(l.poll_timeout(), Some(at + Limits::default().relist_every));
    }
}
