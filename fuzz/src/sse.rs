//! Feeds arbitrary bytes to the event-stream decoder, whole and in chunks whose sizes come
//! from the input. Oracle: nothing panics; both feedings give the same events (or the same
//! error); no event passes the bound.

use mcp_transport::sse::Decoder;

const LIMIT: usize = 4096;

fn events(chunks: &[&[u8]]) -> Vec<Result<mcp_transport::sse::Event, mcp_transport::Error>> {
    let mut decoder = Decoder::new(LIMIT);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.push(chunk);
        while let Some(event) = decoder.next_event() {
            out.push(event.cloned());
        }
    }
    out
}

/// The `sse` target: see the module docs.
pub fn sse(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = events(&[stream]);
    let size = usize::from(seed % 17) + 1;
    let chunks: Vec<&[u8]> = stream.chunks(size).collect();
    let chunked = events(&chunks);
    // An error ends the stream at the point it is found, which chunking may move: compare up
    // to the first error.
    let ok = |v: &[Result<_, _>]| v.iter().take_while(|e| e.is_ok()).count();
    let n = ok(&whole).min(ok(&chunked));
    assert_eq!(whole[..n], chunked[..n]);
    if whole.iter().all(Result::is_ok) && chunked.iter().all(Result::is_ok) {
        assert_eq!(whole, chunked);
    }
    for event in whole.iter().flatten() {
        assert!(event.data.len() <= LIMIT);
    }
}
