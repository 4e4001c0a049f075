//! The fault-injecting proxy against a plain HTTP/1.1 server: each fault does what it says
//! to the bytes the server sends, refusals refuse, and ended connections are no longer held.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use agentd_tests::faults::{Fault, Proxy, REBIND_TRIES, RebindError, Rng, random_fault};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The body every answer carries.
const BODY: [u8; 100] = [b'x'; 100];

fn answer() -> Vec<u8> {
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        BODY.len()
    )
    .into_bytes();
    answer.extend_from_slice(&BODY);
    answer
}

/// A server on 127.0.0.1 that answers every request head with [`answer`], keeping the
/// connection; it stops when the test's runtime does.
async fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0; 1024];
                while let Ok(n) = tcp.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        if tcp.write_all(&answer()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

const REQUEST: &[u8] = b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n";

/// Sends one request through `proxy`: every byte read until the connection ended, and how
/// it ended (`None`: closed).
async fn exchange(proxy: &Proxy) -> (Vec<u8>, Option<ErrorKind>) {
    let mut tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    let _ = tcp.write_all(REQUEST).await;
    read_to_end(&mut tcp).await
}

async fn read_to_end(tcp: &mut TcpStream) -> (Vec<u8>, Option<ErrorKind>) {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) => return (got, None),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, Some(e.kind())),
        }
    }
}

/// Reads exactly `n` bytes.
async fn read_n(tcp: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0; n];
    tcp.read_exact(&mut got).await.unwrap();
    got
}

async fn proxy() -> Proxy {
    Proxy::start(upstream().await).await.unwrap()
}

/// Waits, at most 10 s, until `proxy` holds `n` connections.
async fn until_live(proxy: &Proxy, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while proxy.live() != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} live, not {n}",
            proxy.live()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_passed_connection_carries_every_answer() {
    let proxy = proxy().await;
    let mut tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    for _ in 0..3 {
        tcp.write_all(REQUEST).await.unwrap();
        assert_eq!(read_n(&mut tcp, answer().len()).await, answer());
    }
    drop(tcp);
    until_live(&proxy, 0).await;
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.faults()), (1, 0));
}

#[tokio::test]
async fn a_reset_at_once_and_one_after_some_bytes() {
    let proxy = proxy().await;
    proxy.push(Fault::Reset { after: 0 });
    proxy.push(Fault::Reset { after: 10 });
    let (got, how) = exchange(&proxy).await;
    assert_eq!((got.len(), how), (0, Some(ErrorKind::ConnectionReset)));
    let (got, how) = exchange(&proxy).await;
    assert_eq!(got, answer()[..10]);
    assert_eq!(how, Some(ErrorKind::ConnectionReset));
    assert_eq!(proxy.stats().fired["reset"], 2);
}

#[tokio::test]
async fn a_close_after_n_bytes() {
    let proxy = proxy().await;
    proxy.push(Fault::CloseAfter(20));
    let (got, how) = exchange(&proxy).await;
    assert_eq!((got.as_slice(), how), (&answer()[..20], None));
}

#[tokio::test]
async fn a_body_cut_half_way() {
    let proxy = proxy().await;
    proxy.push(Fault::CutBody);
    let (got, how) = exchange(&proxy).await;
    let half = answer().len() - BODY.len() / 2;
    assert_eq!((got.as_slice(), how), (&answer()[..half], None));
    assert_eq!(proxy.stats().fired["cut_body"], 1);
}

/// A stall passes its bytes, holds the connection silent (a request sent meanwhile is not
/// passed on), then ends it.
#[tokio::test]
async fn a_stall_holds_then_closes() {
    let proxy = proxy().await;
    let hold = Duration::from_millis(300);
    proxy.push(Fault::Stall { after: 5, hold });
    let mut tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    tcp.write_all(REQUEST).await.unwrap();
    assert_eq!(read_n(&mut tcp, 5).await, answer()[..5]);
    let _ = tcp.write_all(REQUEST).await;
    // Ended: closed, or reset since the request sent meanwhile was never read.
    let (rest, how) = read_to_end(&mut tcp).await;
    assert!(rest.is_empty());
    assert!(
        matches!(how, None | Some(ErrorKind::ConnectionReset)),
        "{how:?}"
    );
    until_live(&proxy, 0).await;
    assert_eq!(proxy.stats().fired["stall"], 1);
}

/// In virtual time: each byte comes at least its delay after the one before.
#[tokio::test(start_paused = true)]
async fn slow_bytes_all_come_each_after_its_delay() {
    let proxy = proxy().await;
    proxy.push(Fault::DelayBytes(Duration::from_millis(2)));
    let mut tcp = TcpStream::connect(proxy.addr()).await.unwrap();
    tcp.write_all(REQUEST).await.unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(read_n(&mut tcp, answer().len()).await, answer());
    let n = u32::try_from(answer().len()).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(2) * n);
    assert_eq!(proxy.stats().fired["delay_bytes"], 1);
}

#[tokio::test]
async fn a_refusing_proxy_refuses_dials_then_listens_again() {
    let proxy = proxy().await;
    let addr = proxy.addr();
    let held = TcpStream::connect(addr).await.unwrap();
    until_live(&proxy, 1).await;
    proxy.refuse(true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    // The listening socket closes on the proxy's task.
    loop {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            _ => assert!(tokio::time::Instant::now() < deadline, "still accepting"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(proxy.live(), 1, "the live connection goes on");
    proxy.refuse(false);
    proxy.listening().await.expect("listening again");
    TcpStream::connect(addr).await.expect("accepting again");
    assert_eq!(proxy.stats().refusals, 1);
    drop(held);
}

/// Told to refuse and then to accept again, whenever its accept loop sees the orders (both
/// at once, the refusal alone, or the socket closed in between), the proxy says it listens
/// only once it does: the dial right after is accepted, each of many rounds. The orders
/// are given off the runtime, while the loop runs on it, a pause apart that sweeps, two
/// hundred rounds over, the time the loop takes to wake and close its socket: enough
/// rounds that a proxy saying it listens while its loop is still closing the socket is
/// caught, in all but a few runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_again_is_told_only_once_a_dial_is_accepted() {
    const ROUNDS: u64 = 20_000;
    let proxy = proxy().await;
    for round in 0..ROUNDS {
        tokio::task::block_in_place(|| {
            proxy.refuse(true);
            for _ in 0..(round % 200) * 40 {
                std::hint::spin_loop();
            }
            proxy.refuse(false);
        });
        proxy.listening().await.expect("listening again");
        let dialed = TcpStream::connect(proxy.addr()).await;
        assert!(dialed.is_ok(), "round {round}: {dialed:?}");
    }
    assert_eq!(proxy.stats().refusals, ROUNDS);
}

/// A proxy told to accept again while its port is taken tries [`REBIND_TRIES`] times, then
/// gives up with a typed error and refuses; told again once the port is free, it listens.
#[tokio::test]
async fn a_proxy_whose_port_is_taken_gives_up_listening_again() {
    let proxy = proxy().await;
    let addr = proxy.addr();
    proxy.refuse(true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    // The port, once the proxy's task has closed its listening socket.
    let taken = loop {
        match TcpListener::bind(addr).await {
            Ok(taken) => break taken,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    proxy.refuse(false);
    let e = proxy.listening().await.expect_err("the port is taken");
    assert_eq!(
        e,
        RebindError {
            addr,
            tries: REBIND_TRIES,
            kind: ErrorKind::AddrInUse
        }
    );
    drop(taken);
    proxy.refuse(false);
    proxy.listening().await.expect("listening again");
    let mut tcp = TcpStream::connect(addr).await.expect("accepting again");
    tcp.write_all(REQUEST).await.unwrap();
    assert_eq!(read_n(&mut tcp, answer().len()).await, answer());
}

/// An interruption resets every live connection; a calm resets only the faulted ones,
/// and the next connections are passed untouched.
#[tokio::test]
async fn interruptions_and_calm_end_the_connections_they_name() {
    let proxy = proxy().await;
    let mut passed = TcpStream::connect(proxy.addr()).await.unwrap();
    until_live(&proxy, 1).await;
    proxy.interrupt();
    let (_, how) = read_to_end(&mut passed).await;
    assert_eq!(how, Some(ErrorKind::ConnectionReset));
    until_live(&proxy, 0).await;

    proxy.push(Fault::Pass);
    proxy.policy(|| Fault::Stall {
        after: 0,
        hold: Duration::from_secs(600),
    });
    let mut passed = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut stalled = TcpStream::connect(proxy.addr()).await.unwrap();
    stalled.write_all(REQUEST).await.unwrap();
    until_live(&proxy, 2).await;
    proxy.calm();
    let (got, how) = read_to_end(&mut stalled).await;
    assert_eq!((got.len(), how), (0, Some(ErrorKind::ConnectionReset)));
    passed.write_all(REQUEST).await.unwrap();
    assert_eq!(read_n(&mut passed, answer().len()).await, answer());
    let mut next = TcpStream::connect(proxy.addr()).await.unwrap();
    next.write_all(REQUEST).await.unwrap();
    assert_eq!(
        read_n(&mut next, answer().len()).await,
        answer(),
        "passed after the calm"
    );
    assert_eq!(proxy.stats().interrupted, 2);
}

#[test]
fn the_same_seed_draws_the_same_faults() {
    let draw = |seed| {
        let mut rng = Rng::new(seed);
        (0..64).map(|_| random_fault(&mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
    let kinds: std::collections::BTreeSet<_> = draw(7).iter().map(Fault::kind).collect();
    assert_eq!(kinds.len(), 6, "{kinds:?}");
}
