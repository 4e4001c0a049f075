//! Drives the listen machine of a 2026-07-28 connection with arbitrary steps on a virtual
//! clock that only moves forward: interests (any set of URIs, templates among them),
//! acknowledgments granting any subset of what was asked (and more), notifications, listens
//! that end, fall behind, cannot be opened or are refused outright, and time passing, to the
//! machine's next deadline or by any amount.
//!
//! Oracles, from the docs of `mcp_negotiate::listen`: a listen asks for exactly the concrete
//! URIs wanted (none where the server offers no subscriptions) and the list_changed flags
//! the server declared and has not refused; a close comes only when nothing is wanted; once
//! a listen is held again after a gap, every URI its acknowledgment granted is read again,
//! once; a listen refused outright is reported
//! once and never asked for again, and nothing is logged after it; a listen that ends or
//! cannot be opened is opened again 250 ms to 30 s later, as its log line says, and
//! `unavailable` is logged once until a listen is held again; an acknowledgment leaving URIs
//! out reports exactly those, and they are asked for again 250 ms to 30 s later; once every
//! action due is taken, the next deadline is in the future.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mcp_negotiate::listen::{Action, EndReason, Ended, Interest, ListenEvent, Listener};
use mcp_wire::ListenFilter;

use crate::Input;

const URIS: [&str; 5] = ["a://1", "a://2", "a://3", "t://{x}", "b://4"];
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(30);

fn uris(mask: u8) -> impl Iterator<Item = &'static str> {
    URIS.into_iter()
        .enumerate()
        .filter(move |(i, _)| mask & (1 << i) != 0)
        .map(|(_, u)| u)
}

/// What the fuzzer knows of the listener, from what it was told and what it did.
#[derive(Debug, Default)]
struct Model {
    tools: bool,
    subscribe: bool,
    events: bool,
    wanted: BTreeSet<String>,
    /// The filter of the last listen opened, until it is closed or ends.
    held: Option<ListenFilter>,
    /// The URIs to read again: those an acknowledgment granted as a listen was held again.
    read_again: Option<Vec<String>>,
    tools_refused: bool,
    events_refused: bool,
    refused: bool,
    unavailable_logged: bool,
}

impl Model {
    fn check_open(&self, filter: &ListenFilter) {
        let uris: Vec<String> = filter.resource_subscriptions.clone().unwrap_or_default();
        assert_eq!(
            filter.resource_subscriptions.is_some(),
            !uris.is_empty(),
            "{filter:?}"
        );
        assert_eq!(
            uris.iter().cloned().collect::<BTreeSet<_>>(),
            self.wanted,
            "a listen asks for exactly the URIs wanted"
        );
        let tools = self.tools && !self.tools_refused;
        assert_eq!(filter.tools_list_changed, tools.then_some(true));
        let events = self.events && !self.events_refused;
        assert_eq!(filter.events_list_changed, events.then_some(true));
        assert_eq!(filter.prompts_list_changed, None);
        assert_eq!(filter.resources_list_changed, None);
    }

    fn wants_anything(&self) -> bool {
        !self.wanted.is_empty()
            || (self.tools && !self.tools_refused)
            || (self.events && !self.events_refused)
    }
}

fn within_schedule(at: Option<Instant>, now: Instant) {
    let at = at.expect("a retry is scheduled");
    let wait = at.duration_since(now);
    assert!(
        (RETRY_FIRST..=RETRY_MAX).contains(&wait),
        "a retry {wait:?} away"
    );
}

fn retry_ms(ms: u64) {
    assert!((250..=30_000).contains(&ms), "retry_ms {ms}");
}

/// Takes every action due at `now`, checking each.
fn act(l: &mut Listener, m: &mut Model, now: Instant) {
    for _ in 0..4 {
        let Some(action) = l.poll_action(now) else {
            let next = l.poll_timeout();
            assert!(next.is_none_or(|at| at > now), "{next:?} is due at {now:?}");
            return;
        };
        assert!(!m.refused, "{action:?} after a refusal");
        match action {
            Action::Open(filter) => {
                m.check_open(&filter);
                m.held = Some(filter);
            }
            Action::Close => {
                assert!(m.held.take().is_some(), "a close without a listen");
                assert!(!m.wants_anything(), "a close while {m:?}");
            }
            Action::ReadAgain(read) => {
                assert_eq!(Some(read), m.read_again.take(), "every held URI, once");
            }
            other => panic!("{other:?}"),
        }
    }
    panic!("more than four actions at once");
}

/// Checks what the listener logs.
fn log(l: &mut Listener, m: &mut Model) {
    while let Some(event) = l.poll_event() {
        assert!(!m.refused, "{event:?} logged after a refusal");
        match event {
            ListenEvent::Ended {
                reason: EndReason::Idle,
                retry_ms: 0,
            }
            | ListenEvent::FlagsRefused { .. }
            | ListenEvent::Narrowed { .. } => {}
            ListenEvent::Ended {
                reason: EndReason::Server | EndReason::Behind,
                retry_ms: ms,
            } => retry_ms(ms),
            ListenEvent::Resumed => m.unavailable_logged = false,
            ListenEvent::Unavailable { retry_ms: ms, .. } => {
                retry_ms(ms);
                assert!(!m.unavailable_logged, "unavailable logged twice");
                m.unavailable_logged = true;
            }
            ListenEvent::Refused { code } => {
                assert!(!m.refused, "a refusal reported twice");
                assert!(code == -32601 || code == -32602);
                m.refused = true;
            }
            other => panic!("{other:?}"),
        }
    }
}

/// The `listener` target: see the module docs.
pub fn listener(data: &[u8]) {
    let mut input = Input(data);
    let flags = input.byte();
    let timeout = Duration::from_secs(u64::from(input.byte()) * 10);
    let mut m = Model {
        tools: flags & 1 != 0,
        subscribe: flags & 2 != 0,
        events: flags & 4 != 0,
        ..Model::default()
    };
    let mut l = Listener::new(timeout, m.tools, m.subscribe);
    if m.events {
        l = l.with_events_list_changed();
    }
    let start = Instant::now();
    let mut now = start;
    while !input.is_empty() {
        match input.byte() % 8 {
            0 => {
                let mask = input.byte();
                let mut interest = Interest::default();
                for uri in uris(mask) {
                    interest = interest.with_uri(uri);
                }
                l.want(interest, now);
                m.wanted = match m.subscribe {
                    true => uris(mask)
                        .filter(|u| !u.contains('{'))
                        .map(str::to_owned)
                        .collect(),
                    false => BTreeSet::new(),
                };
            }
            1 => act(&mut l, &mut m, now),
            2 => {
                let Some(asked) = m.held.clone() else {
                    continue;
                };
                let asked_uris = asked.resource_subscriptions.clone().unwrap_or_default();
                let mask = input.byte();
                let mut granted: Vec<String> = asked_uris
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, u)| u.clone())
                    .collect();
                if mask & 0x80 != 0 {
                    granted.push("x://extra".into());
                }
                let mut agreed = ListenFilter::default();
                agreed.tools_list_changed = (mask & 0x40 != 0).then_some(true);
                agreed.events_list_changed = (mask & 0x20 != 0).then_some(true);
                agreed.resource_subscriptions = (!granted.is_empty()).then(|| granted.clone());
                l.on_acknowledged(&agreed, now);
                let dropped: Vec<String> = asked_uris
                    .iter()
                    .filter(|u| !granted.contains(u))
                    .cloned()
                    .collect();
                let mut refused = Vec::new();
                if asked.tools_list_changed == Some(true) && agreed.tools_list_changed.is_none() {
                    m.tools_refused = true;
                    refused.push("toolsListChanged");
                }
                if asked.events_list_changed == Some(true) && agreed.events_list_changed.is_none() {
                    m.events_refused = true;
                    refused.push("eventsListChanged");
                }
                let logged: Vec<ListenEvent> = std::iter::from_fn(|| l.poll_event()).collect();
                if logged.contains(&ListenEvent::Resumed) {
                    m.unavailable_logged = false;
                    if !granted.is_empty() {
                        m.read_again = Some(granted);
                    }
                }
                let any_refused = !refused.is_empty();
                let flags = ListenEvent::FlagsRefused { flags: refused };
                assert_eq!(logged.contains(&flags), any_refused, "{logged:?}");
                for event in &logged {
                    if let ListenEvent::Narrowed { dropped: d } = event {
                        assert_eq!(*d, dropped);
                    }
                }
                if !dropped.is_empty() {
                    assert!(
                        logged.contains(&ListenEvent::Narrowed {
                            dropped: dropped.clone()
                        }),
                        "{logged:?}"
                    );
                    let at = l.poll_timeout();
                    within_schedule(at, now);
                    // Asked for again when the wait is over (those still wanted).
                    let owed: Vec<&String> =
                        dropped.iter().filter(|u| m.wanted.contains(*u)).collect();
                    if !owed.is_empty() {
                        let mut ahead = l.clone();
                        let opened = std::iter::from_fn(|| ahead.poll_action(at.expect("a retry")))
                            .take(3)
                            .find_map(|a| match a {
                                Action::Open(f) => Some(f),
                                _ => None,
                            })
                            .expect("the URIs left out are asked for again");
                        let again = opened.resource_subscriptions.unwrap_or_default();
                        assert!(owed.iter().all(|u| again.contains(u)), "{again:?}");
                    }
                }
            }
            3 => l.on_notification(now),
            4 | 5 => {
                // Only a listen opened (or being opened) can end.
                if m.held.is_none() {
                    continue;
                }
                let why = match input.byte() % 6 {
                    0 => Ended::ByServer,
                    1 => Ended::FellBehind,
                    2 => Ended::Refused(-32601),
                    3 => Ended::Refused(-32602),
                    _ => Ended::Unavailable("503".into()),
                };
                let refusal = matches!(why, Ended::Refused(_));
                l.on_ended(why, now);
                m.held = None;
                if !refusal {
                    within_schedule(l.poll_timeout(), now);
                }
            }
            6 => {
                if let Some(at) = l.poll_timeout() {
                    now = now.max(at);
                }
            }
            _ => {
                now += Duration::from_millis(u64::from(input.byte()) * u64::from(input.byte()));
            }
        }
        log(&mut l, &mut m);
        assert_eq!(l.is_refused(), m.refused);
        if m.refused {
            assert_eq!(l.poll_timeout(), None);
            assert_eq!(
                l.poll_action(now),
                None,
                "a refused listen is never asked for again"
            );
        }
    }
}
