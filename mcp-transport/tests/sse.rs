//! The event-stream decoder: the format's rules one by one, the size bound at and past the
//! limit, and (property) that any chunking of the same bytes gives the same events.

use mcp_transport::Error;
use mcp_transport::sse::{Decoder, Event};
use proptest::prelude::*;

const LIMIT: usize = 1 << 16;

/// Every event of `stream` fed as one chunk, and whether the decoder ended idle.
fn events(stream: &[u8]) -> Vec<Event> {
    chunked(stream, &[stream.len()]).expect("no error")
}

/// Every event of `stream` fed in chunks of the given sizes (the last one takes the rest).
fn chunked(stream: &[u8], sizes: &[usize]) -> Result<Vec<Event>, Error> {
    let mut decoder = Decoder::new(LIMIT);
    let mut out = Vec::new();
    let mut rest = stream;
    for &size in sizes {
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        decoder.push(chunk);
        while let Some(event) = decoder.next_event() {
            out.push(event?.clone());
        }
    }
    decoder.push(rest);
    while let Some(event) = decoder.next_event() {
        out.push(event?.clone());
    }
    Ok(out)
}

fn data(d: &str) -> Event {
    Event {
        data: d.into(),
        ..Event::default()
    }
}

#[test]
fn data_lines_are_joined_with_newlines() {
    assert_eq!(
        events(b"data: YHOO\ndata: +2\ndata: 10\n\n"),
        [data("YHOO\n+2\n10")]
    );
}

#[test]
fn cr_lf_and_crlf_all_end_lines() {
    let expected = [data("a\nb"), data("c")];
    for stream in [
        &b"data: a\ndata: b\n\ndata: c\n\n"[..],
        b"data: a\rdata: b\r\rdata: c\r\r",
        b"data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n",
        b"data: a\r\ndata: b\r\rdata: c\n\r\n",
    ] {
        assert_eq!(
            events(stream),
            expected,
            "{:?}",
            String::from_utf8_lossy(stream)
        );
    }
}

#[test]
fn a_crlf_split_across_chunks_is_one_line_end() {
    let stream = b"data: a\r\n\r\ndata: b\r\n\r\n";
    for at in 0..stream.len() {
        assert_eq!(
            chunked(stream, &[at]).unwrap(),
            [data("a"), data("b")],
            "split at {at}"
        );
    }
}

#[test]
fn a_leading_bom_is_dropped_and_only_there() {
    assert_eq!(events(b"\xEF\xBB\xBFdata: x\n\n"), [data("x")]);
    // Split inside the BOM.
    assert_eq!(
        chunked(b"\xEF\xBB\xBFdata: x\n\n", &[1, 1]).unwrap(),
        [data("x")]
    );
    // A BOM later is not a BOM: it starts a line with an unknown field name.
    assert_eq!(events(b"data: x\n\n\xEF\xBB\xBFdata: y\n\n"), [data("x")]);
}

#[test]
fn comments_are_skipped() {
    assert_eq!(
        events(b": keep-alive\n\n:\n\ndata: x\n: inside\n\n"),
        [data("x")]
    );
}

#[test]
fn id_event_and_retry_are_read() {
    let got = events(b"id: 7\nevent: message\nretry: 1500\ndata: {}\n\n");
    assert_eq!(
        got,
        [Event {
            id: Some("7".into()),
            event: Some("message".into()),
            data: "{}".into(),
            retry: Some(1500),
        }]
    );
    assert!(got[0].is_message());
}

#[test]
fn an_id_holding_nul_is_ignored() {
    let got = events(b"id: a\0b\ndata: x\n\n");
    assert_eq!(got, [data("x")]);
}

#[test]
fn a_retry_that_is_not_digits_is_ignored() {
    for bad in [
        "retry: 12a",
        "retry: -5",
        "retry:",
        "retry:  100",
        "retry: 1.5",
    ] {
        let stream = format!("{bad}\ndata: x\n\n");
        assert_eq!(events(stream.as_bytes()), [data("x")], "{bad}");
    }
    let huge = events(b"retry: 99999999999999999999999\n\n");
    assert_eq!(huge[0].retry, Some(u64::MAX));
}

#[test]
fn colon_and_space_rules() {
    // No colon: the whole line is the field name, the value empty.
    assert_eq!(events(b"data\n\n"), [data("")]);
    // Only one leading space is dropped.
    assert_eq!(events(b"data:  two\n\n"), [data(" two")]);
    assert_eq!(events(b"data:none\n\n"), [data("none")]);
    // Later colons belong to the value.
    assert_eq!(events(b"data: a:b: c\n\n"), [data("a:b: c")]);
    // Unknown fields are ignored and do not make an event.
    assert_eq!(events(b"foo: bar\n\n"), []);
}

#[test]
fn the_priming_event_is_an_event_but_not_a_message() {
    let got = events(b"id: 4a99\ndata:\n\n");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id.as_deref(), Some("4a99"));
    assert_eq!(got[0].data, "");
    assert!(!got[0].is_message());
    // A replayed priming event as `data: {}` is data; the layer above decides it is no
    // JSON-RPC message.
    assert!(events(b"data: {}\n\n")[0].is_message());
}

#[test]
fn named_events_other_than_message_are_not_messages() {
    let got = events(b"event: endpoint\ndata: /messages\n\n");
    assert!(!got[0].is_message());
}

#[test]
fn an_unfinished_event_is_not_handed_over() {
    let mut decoder = Decoder::new(LIMIT);
    decoder.push(b"data: x\n");
    assert!(decoder.next_event().is_none());
    assert!(!decoder.is_idle());
    decoder.push(b"\n");
    assert_eq!(decoder.next_event(), Some(Ok(&data("x"))));
    assert!(decoder.is_idle());
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    assert_eq!(events(b"data: a\xFFb\n\n"), [data("a\u{FFFD}b")]);
}

#[test]
fn an_event_at_the_bound_passes_and_one_byte_more_fails() {
    // The bound counts data bytes plus one newline per data line.
    let at = format!("data: {}\n\n", "x".repeat(99));
    let past = format!("data: {}\n\n", "x".repeat(100));
    let mut decoder = Decoder::new(100);
    decoder.push(at.as_bytes());
    assert_eq!(decoder.next_event().unwrap().unwrap().data.len(), 99);
    let mut decoder = Decoder::new(100);
    decoder.push(past.as_bytes());
    assert_eq!(
        decoder.next_event(),
        Some(Err(Error::EventTooLarge { limit: 100 }))
    );
    assert_eq!(decoder.next_event(), None, "nothing after an error");
}

#[test]
fn invalid_bytes_count_as_the_replacement_characters_they_become() {
    // Four bytes received, each held as U+FFFD (three bytes), plus the line's newline.
    let stream = b"data: \xFF\xFF\xFF\xFF\n\n";
    let mut decoder = Decoder::new(13);
    decoder.push(stream);
    assert_eq!(
        decoder.next_event(),
        Some(Ok(&data("\u{FFFD}".repeat(4).as_str())))
    );
    let mut decoder = Decoder::new(12);
    decoder.push(stream);
    assert_eq!(
        decoder.next_event(),
        Some(Err(Error::EventTooLarge { limit: 12 }))
    );
}

#[test]
fn an_event_keeps_nothing_of_the_one_before() {
    let got = events(b"id: 1\nevent: x\nretry: 5\ndata: a\ndata: b\n\ndata: c\n\nid: 2\n\n");
    let id = |id: &str| Event {
        id: Some(id.into()),
        ..Event::default()
    };
    let first = Event {
        event: Some("x".into()),
        retry: Some(5),
        data: "a\nb".into(),
        ..id("1")
    };
    assert_eq!(got, [first, data("c"), id("2")]);
}

#[test]
fn many_data_lines_count_toward_the_bound() {
    let stream = "data: 123456789\n".repeat(11) + "\n";
    let mut decoder = Decoder::new(100);
    decoder.push(stream.as_bytes());
    assert_eq!(
        decoder.next_event(),
        Some(Err(Error::EventTooLarge { limit: 100 }))
    );
}

#[test]
fn an_endless_line_fails_without_waiting_for_its_end() {
    let mut decoder = Decoder::new(100);
    decoder.push(&[b'a'; 100]);
    assert_eq!(
        decoder.next_event(),
        None,
        "a line of exactly the bound may still end"
    );
    decoder.push(b"a");
    assert_eq!(
        decoder.next_event(),
        Some(Err(Error::EventTooLarge { limit: 100 }))
    );
}

#[test]
fn a_long_line_fed_a_byte_at_a_time_is_scanned_once() {
    // 256 KiB one byte at a time: quadratic rescanning would take minutes.
    let line = format!("data: {}\n\n", "y".repeat(256 * 1024));
    let mut decoder = Decoder::new(1 << 20);
    for b in line.as_bytes() {
        decoder.push(std::slice::from_ref(b));
        if let Some(event) = decoder.next_event() {
            assert_eq!(event.unwrap().data.len(), 256 * 1024);
        }
    }
}

// ----- property: any chunking gives the same events -----

fn field_value() -> impl Strategy<Value = String> {
    "[a-z0-9 {}\":,\\[\\]é€]{0,24}"
}

fn block() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        field_value().prop_map(|v| format!("data: {v}")),
        field_value().prop_map(|v| format!("data:{v}")),
        "[a-z0-9]{0,8}".prop_map(|v| format!("id: {v}")),
        "[a-z]{0,8}".prop_map(|v| format!("event: {v}")),
        (0u32..100_000).prop_map(|v| format!("retry: {v}")),
        field_value().prop_map(|v| format!(": {v}")),
        Just("data".to_string()),
    ];
    prop::collection::vec(line, 0..5).prop_map(|lines| lines.join("\n"))
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        prop::collection::vec(
            (block(), prop_oneof![Just("\n"), Just("\r"), Just("\r\n")]),
            0..8,
        ),
    )
        .prop_map(|(bom, blocks)| {
            let mut out = Vec::new();
            if bom {
                out.extend_from_slice(b"\xEF\xBB\xBF");
            }
            for (block, eol) in blocks {
                out.extend_from_slice(block.replace('\n', eol).as_bytes());
                out.extend_from_slice(eol.as_bytes());
                out.extend_from_slice(eol.as_bytes());
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(512) })]

    #[test]
    fn any_chunking_gives_the_same_events(
        stream in stream(),
        sizes in prop::collection::vec(0usize..16, 0..64),
    ) {
        let whole = chunked(&stream, &[stream.len()]).unwrap();
        prop_assert_eq!(chunked(&stream, &sizes).unwrap(), whole.clone());
        let bytewise = vec![1; stream.len()];
        prop_assert_eq!(chunked(&stream, &bytewise).unwrap(), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        sizes in prop::collection::vec(0usize..32, 0..32),
    ) {
        let mut decoder = Decoder::new(64);
        let mut rest = &bytes[..];
        for size in sizes {
            let (chunk, tail) = rest.split_at(size.min(rest.len()));
            rest = tail;
            decoder.push(chunk);
            while let Some(event) = decoder.next_event() {
                if let Ok(event) = event {
                    prop_assert!(event.data.len() <= 64);
                }
            }
        }
    }
}
