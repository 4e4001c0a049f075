//! The listen machine, step by step in virtual time: the reference's "Listens" rows and the
//! listen row of "Retry schedules".

use std::time::{Duration, Instant};

use mcp_negotiate::listen::{Action, EndReason, Ended, IDLE, Interest, ListenEvent, Listener};
use mcp_wire::ListenFilter;

const TIMEOUT: Duration = Duration::from_secs(60);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn opened(action: Option<Action>) -> ListenFilter {
    match action {
        Some(Action::Open(filter)) => filter,
        other => panic!("expected an open, got {other:?}"),
    }
}

fn uris(filter: &ListenFilter) -> Vec<String> {
    filter.resource_subscriptions.clone().unwrap_or_default()
}

fn events(l: &mut Listener) -> Vec<ListenEvent> {
    std::iter::from_fn(|| l.poll_event()).collect()
}

fn agreed(uris: &[&str], tools: bool) -> ListenFilter {
    let mut f = ListenFilter::default();
    if tools {
        f.tools_list_changed = Some(true);
    }
    if !uris.is_empty() {
        f.resource_subscriptions = Some(uris.iter().map(|u| (*u).to_owned()).collect());
    }
    f
}

#[test]
fn list_changed_is_asked_for_from_connect() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, true, true);
    let filter = opened(l.poll_action(t0));
    assert_eq!(filter.tools_list_changed, Some(true));
    assert_eq!(filter.resource_subscriptions, None);
    assert_eq!(l.poll_action(t0), None, "one listen");

    let mut quiet = Listener::new(TIMEOUT, false, true);
    assert_eq!(quiet.poll_action(t0), None, "nothing to listen for");
}

#[test]
fn only_concrete_uris_and_only_where_the_server_subscribes() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, false, true);
    l.want(
        Interest::default()
            .with_uri("demo://a")
            .with_uri("demo://item/{id}"),
        t0,
    );
    assert_eq!(uris(&opened(l.poll_action(t0))), ["demo://a"]);

    let mut no_subscribe = Listener::new(TIMEOUT, false, false);
    no_subscribe.want(Interest::default().with_uri("demo://a"), t0);
    assert_eq!(no_subscribe.poll_action(t0), None);
}

#[test]
fn widening_and_narrowing_open_a_new_listen_and_nothing_wanted_closes_it() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, false, true);
    l.want(Interest::default().with_uri("demo://a"), t0);
    assert_eq!(uris(&opened(l.poll_action(t0))), ["demo://a"]);
    l.on_acknowledged(&agreed(&["demo://a"], false), t0);
    l.want(
        Interest::default()
            .with_uri("demo://a")
            .with_uri("demo://b"),
        t0,
    );
    assert_eq!(uris(&opened(l.poll_action(t0))), ["demo://a", "demo://b"]);
    l.want(Interest::default().with_uri("demo://b"), t0);
    assert_eq!(uris(&opened(l.poll_action(t0))), ["demo://b"]);
    // The same interest again changes nothing.
    l.want(Interest::default().with_uri("demo://b"), t0);
    assert_eq!(l.poll_action(t0), None);
    l.want(Interest::default(), t0);
    assert_eq!(l.poll_action(t0), Some(Action::Close));
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn uris_the_acknowledgment_leaves_out_are_reported_and_asked_for_again() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, false, true);
    l.want(
        Interest::default()
            .with_uri("demo://a")
            .with_uri("demo://b"),
        t0,
    );
    opened(l.poll_action(t0));
    l.on_acknowledged(&agreed(&["demo://a"], false), t0);
    assert_eq!(
        events(&mut l),
        [ListenEvent::Narrowed {
            dropped: vec!["demo://b".into()]
        }]
    );
    assert_eq!(l.poll_action(t0 + ms(249)), None);
    assert_eq!(l.poll_timeout(), Some(t0 + ms(250)));
    assert_eq!(
        uris(&opened(l.poll_action(t0 + ms(250)))),
        ["demo://a", "demo://b"]
    );
    // Left out again: asked for again after twice the wait.
    l.on_acknowledged(&agreed(&["demo://a"], false), t0 + ms(250));
    assert_eq!(l.poll_timeout(), Some(t0 + ms(750)));
}

#[test]
fn refused_list_changed_flags_are_reported_and_the_listen_goes_on_without_them() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, true, true);
    l.want(Interest::default().with_uri("demo://a"), t0);
    opened(l.poll_action(t0));
    l.on_acknowledged(&agreed(&["demo://a"], false), t0);
    assert_eq!(
        events(&mut l),
        [ListenEvent::FlagsRefused {
            flags: vec!["toolsListChanged"]
        }]
    );
    l.want(
        Interest::default()
            .with_uri("demo://a")
            .with_uri("demo://b"),
        t0,
    );
    assert_eq!(opened(l.poll_action(t0)).tools_list_changed, None);
}

#[test]
fn a_quiet_listen_is_reopened_after_ten_minutes_never_less_than_the_timeout() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, false, true);
    l.want(Interest::default().with_uri("demo://a"), t0);
    opened(l.poll_action(t0));
    l.on_acknowledged(&agreed(&["demo://a"], false), t0);
    // A notification at 5 minutes restarts the quiet spell.
    l.on_notification(t0 + Duration::from_secs(300));
    assert_eq!(l.poll_timeout(), Some(t0 + Duration::from_secs(300) + IDLE));
    assert_eq!(l.poll_action(t0 + IDLE), None);
    let at = t0 + Duration::from_secs(300) + IDLE;
    assert_eq!(uris(&opened(l.poll_action(at))), ["demo://a"]);
    assert_eq!(
        events(&mut l),
        [ListenEvent::Ended {
            reason: EndReason::Idle,
            retry_ms: 0
        }]
    );
    // Held again: every held URI is read again.
    l.on_acknowledged(&agreed(&["demo://a"], false), at);
    assert_eq!(events(&mut l), [ListenEvent::Resumed]);
    assert_eq!(
        l.poll_action(at),
        Some(Action::ReadAgain(vec!["demo://a".into()]))
    );

    let long = Duration::from_secs(1200);
    let mut slow = Listener::new(long, true, true);
    opened(slow.poll_action(t0));
    slow.on_acknowledged(&agreed(&[], true), t0);
    assert_eq!(slow.poll_timeout(), Some(t0 + long));
}

#[test]
fn an_ended_listen_is_reopened_on_the_schedule_and_its_uris_read_again() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, true, true);
    l.want(Interest::default().with_uri("demo://a"), t0);
    opened(l.poll_action(t0));
    l.on_acknowledged(&agreed(&["demo://a"], true), t0);
    l.on_ended(Ended::ByServer, t0 + ms(10));
    assert_eq!(
        events(&mut l),
        [ListenEvent::Ended {
            reason: EndReason::Server,
            retry_ms: 250
        }]
    );
    assert_eq!(l.poll_action(t0 + ms(259)), None);
    opened(l.poll_action(t0 + ms(260)));
    l.on_acknowledged(&agreed(&["demo://a"], true), t0 + ms(270));
    assert_eq!(events(&mut l), [ListenEvent::Resumed]);
    assert_eq!(
        l.poll_action(t0 + ms(270)),
        Some(Action::ReadAgain(vec!["demo://a".into()]))
    );
    // Held again: the schedule starts over.
    l.on_ended(Ended::FellBehind, t0 + ms(300));
    assert_eq!(
        events(&mut l),
        [ListenEvent::Ended {
            reason: EndReason::Behind,
            retry_ms: 250
        }]
    );
}

#[test]
fn an_unavailable_listen_is_logged_once_and_retried_doubling_to_thirty_seconds() {
    let t0 = Instant::now();
    let mut l = Listener::new(TIMEOUT, true, false);
    let mut now = t0;
    let mut waits = Vec::new();
    for _ in 0..10 {
        opened(l.poll_action(now));
        l.on_ended(Ended::Unavailable("503".into()), now);
        let at = l.poll_timeout().expect("a retry");
        waits.push((at - now).as_millis());
        now = at;
    }
    assert_eq!(
        waits,
        [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
    );
    assert_eq!(
        events(&mut l),
        [ListenEvent::Unavailable {
            reason: "503".into(),
            retry_ms: 250
        }]
    );
}

#[test]
fn a_listen_refused_outright_is_reported_once_and_never_asked_for_again() {
    for code in [-32601, -32602] {
        let t0 = Instant::now();
        let mut l = Listener::new(TIMEOUT, true, true);
        opened(l.poll_action(t0));
        l.on_ended(Ended::Refused(code), t0);
        assert_eq!(events(&mut l), [ListenEvent::Refused { code }]);
        l.want(Interest::default().with_uri("demo://a"), t0);
        assert_eq!(l.poll_action(t0 + Duration::from_secs(3600)), None);
        assert_eq!(l.poll_timeout(), None);
        assert!(events(&mut l).is_empty());
    }
}

#[test]
fn events_list_changed_is_asked_for_when_declared_and_dropped_when_refused() {
    let now = Instant::now();
    // Nothing else wanted: the events flag alone opens a listen.
    let mut l = Listener::new(TIMEOUT, false, false).with_events_list_changed();
    let filter = opened(l.poll_action(now));
    assert_eq!(filter.events_list_changed, Some(true));
    assert_eq!(filter.tools_list_changed, None);

    let mut l = Listener::new(TIMEOUT, true, true).with_events_list_changed();
    opened(l.poll_action(now));
    // The server agrees to tools only.
    l.on_acknowledged(&agreed(&[], true), now);
    assert_eq!(
        events(&mut l),
        [ListenEvent::FlagsRefused {
            flags: vec!["eventsListChanged"]
        }]
    );
    l.want(Interest::default().with_uri("a://x"), now);
    let next = opened(l.poll_action(now));
    assert_eq!(next.events_list_changed, None, "not asked for again");
    assert_eq!(next.tools_list_changed, Some(true));
}
