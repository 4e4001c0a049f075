//! Drives the MCP Events listing pager (`mcp_events::listing::Lister`) with arbitrary pages
//! (any number of types, with or without a next cursor), failures, holds, listings asked for
//! again, and time passing on a virtual clock.
//!
//! Oracles, from the reference's limits (20 pages or 1000 types; listed again every 15
//! minutes): one page is out at a time; a listing's first request is the first page and
//! every later one carries the cursor the page before gave; no listing asks for a 21st page,
//! so every listing ends; a page is answered `More` exactly while a cursor follows and the
//! listing is within 20 pages and 1000 types, `TooLarge` when it would pass either, and
//! `Done` with every type of its pages, in order, otherwise; a listing that ends is due again
//! 15 minutes later; a failure starts again from the first page after the wait it returns.
//!
//! Pages are cheap so that inputs run fast: a type is one short name from a fixed table
//! (the `n`th type of an input is named `NAMES[n % 16]`) offering no delivery mode, and an
//! input's pages give at most [`TYPES_PER_INPUT`] types in all, enough for two listings
//! past the 1000-type bound.

use std::time::{Duration, Instant};

use mcp_events::listing::{Lister, Step};
use mcp_wire::Cursor;
use mcp_wire::events::{EventType, ListEventsResult};

use crate::Input;

const PAGES_MAX: usize = 20;
const TYPES_MAX: usize = 1000;
const RELIST_EVERY: Duration = Duration::from_secs(15 * 60);

/// The types an input's pages give at most: two listings one past [`TYPES_MAX`]. A page
/// asked for more gives what is left.
const TYPES_PER_INPUT: usize = 2 * (TYPES_MAX + 1);

/// The names of the types, in turn.
const NAMES: [&str; 16] = [
    "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "ta", "tb", "tc", "td", "te", "tf",
];

/// Shown short: the page count, the type count and the cursor.
impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pages, {} types, cursor {:?}",
            self.pages,
            self.types.len(),
            self.cursor
        )
    }
}

/// A listing under way, as the fuzzer saw it.
#[derive(Default)]
struct Listing {
    /// Pages asked for.
    pages: usize,
    /// The input's number of each type its pages gave, in order (type `n` is named
    /// `NAMES[n % 16]`).
    types: Vec<usize>,
    /// The cursor the last page gave.
    cursor: Option<Cursor>,
}

/// The `listing` target: see the module docs.
pub fn listing(data: &[u8]) {
    let mut input = Input(data);
    let start = Instant::now();
    let mut now = start;
    let mut lister = Lister::new(now, &mcp_events::Limits::default());
    let mut listing: Option<Listing> = None;
    let mut in_flight = false;
    // The types and the pages the input's pages gave so far.
    let (mut given, mut pages) = (0usize, 0usize);
    while !input.is_empty() {
        match input.byte() % 8 {
            0 | 1 => match lister.poll_request(now) {
                Some(cursor) => {
                    assert!(!in_flight, "one page at a time");
                    in_flight = true;
                    match (&mut listing, cursor) {
                        (None, None) => {
                            listing = Some(Listing {
                                pages: 1,
                                ..Listing::default()
                            });
                        }
                        (Some(l), Some(cursor)) => {
                            assert_eq!(l.cursor.as_ref(), Some(&cursor));
                            l.pages += 1;
                            assert!(l.pages <= PAGES_MAX, "page {} asked for", l.pages);
                        }
                        (l, cursor) => panic!("{cursor:?} asked for during {l:?}"),
                    }
                }
                None => assert!(in_flight || listing.is_none(), "a listing stalls"),
            },
            2 | 3 => {
                if !in_flight {
                    continue;
                }
                in_flight = false;
                let l = listing.as_mut().expect("a listing under way");
                let n = match input.byte() % 4 {
                    0 => 0,
                    1 => 1,
                    2 => usize::from(input.byte()),
                    _ => usize::from(input.byte()) * 4,
                };
                let n = n.min(TYPES_PER_INPUT - given);
                let items: Vec<EventType> = (given..given + n)
                    .map(|i| EventType::new(NAMES[i % NAMES.len()], &[]))
                    .collect();
                l.types.extend(given..given + n);
                given += n;
                pages += 1;
                let cursor = match input.byte() % 4 {
                    0 => None,
                    1 => Some(Cursor(String::new())),
                    _ => Some(Cursor(format!("c{pages}"))),
                };
                l.cursor = cursor.clone();
                let too_large =
                    l.types.len() > TYPES_MAX || (cursor.is_some() && l.pages >= PAGES_MAX);
                let step = lister.on_page(ListEventsResult::new(items, cursor.clone()), now);
                match step {
                    Step::More => {
                        assert!(cursor.is_some() && !too_large, "More after {l:?}");
                        continue;
                    }
                    Step::TooLarge => assert!(too_large, "TooLarge after {l:?}"),
                    Step::Done(types) => {
                        assert!(cursor.is_none() && !too_large, "Done after {l:?}");
                        let names = types.iter().map(|t| t.name.as_str());
                        let expected = l.types.iter().map(|&n| NAMES[n % NAMES.len()]);
                        assert!(names.eq(expected), "every type, in order, after {l:?}");
                    }
                    other => panic!("{other:?}"),
                }
                listing = None;
                assert_eq!(lister.poll_timeout(), Some(now + RELIST_EVERY));
            }
            4 => {
                if !in_flight {
                    continue;
                }
                in_flight = false;
                listing = None;
                let random = u32::from_le_bytes([input.byte(); 4]);
                let wait = lister.on_failure(now, input.bool(), random);
                assert!(wait >= Duration::from_millis(900), "{wait:?}");
                assert!(wait <= Duration::from_secs(15 * 60 * 11 / 10), "{wait:?}");
                assert_eq!(lister.poll_timeout(), Some(now + wait));
            }
            5 => {
                if input.bool() {
                    lister.again(now);
                    if listing.is_none() && !in_flight {
                        assert_eq!(lister.poll_timeout(), Some(now));
                    }
                } else {
                    // The server does not list events (-32601).
                    lister.hold(now);
                    in_flight = false;
                    listing = None;
                    assert_eq!(lister.poll_timeout(), Some(now + RELIST_EVERY));
                }
            }
            6 => {
                if let Some(at) = lister.poll_timeout() {
                    now = now.max(at);
                }
            }
            _ => now += Duration::from_secs(u64::from(input.byte()) * 10),
        }
        if listing.is_none() && !in_flight {
            assert!(lister.poll_timeout().is_some(), "a listing is always due");
        }
    }
}
