//! A hostile webhook sender against `agentd run`'s receiver (a webhook binding of the
//! reference server): bad and missing signatures, replays inside and outside the 5-minute
//! window, the binding's old secret, oversize bodies with and without `Content-Length`,
//! bodies that stop coming, slow-loris heads, wrong methods and paths, bodies that are not
//! JSON or not an object, a burst past the binding's queue, a store that does not save, and
//! a flood of connections past the listener's bound; valid deliveries sent among them all.
//!
//! Each hostile request gets the reference's status (401, 405, 410, 413, 429, 503; 404 off
//! the routes; 408 for a body that stops coming), or, a head that never ends, its
//! connection closed unanswered: each waited for within a generous bound, no time asserted.
//! The daemon's peak memory stays within a bound of what it was before; and every valid delivery, the sender's and
//! the server's, is appended exactly once (a valid one answered 429 or 503 is sent again,
//! as a sender does). `AGENTD_SOAK_SECS` repeats the rounds of all of them for that long
//! (one round by default). The figures are printed at the end (`--nocapture`).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use common::{Daemon, TempFile, Usage, store_dir, tail, until, wait_for_stream};
use mcp_events::webhook::Secret;
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// How long the sender waits for an answer (the receiver waits up to 10 s for a binding's
/// task): generous, a wait's limit and not a timing asserted.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The receiver's bounds on a request's head, and on its body once the head has come.
const HEAD_WITHIN: Duration = Duration::from_secs(30);
const BODY_WITHIN: Duration = Duration::from_secs(30);

/// Room past those bounds, on a loaded machine: the sender waits that much longer.
const SLACK: Duration = Duration::from_secs(60);

/// One webhook body's bound.
const BODY_MAX: usize = 256 * 1024;

/// How many connections the flood opens at once (fewer when this process may not open as
/// many descriptors), and how many the listener serves.
const FLOOD: usize = 5000;
const CONNECTIONS: usize = 256;

/// The flood's size: [`FLOOD`], or what this process's descriptor limit leaves room for.
fn flood_size() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|l| l.split_whitespace().next()?.parse::<usize>().ok());
    let size = soft.map_or(FLOOD, |soft| FLOOD.min(soft.saturating_sub(200)));
    assert!(
        size > CONNECTIONS,
        "a descriptor limit too low for a flood: {soft:?}"
    );
    size
}

/// How far the daemon's peak resident memory may rise above what it was before. What the
/// listener serves at once (256 connections, each with its buffers, the odd body at its
/// bound) is far less; a connection served past that bound costs about 13 KiB.
const MEMORY_KIB: u64 = 32 * 1024;

/// An answer: its status (0 when the connection ended without one) and its `Retry-After`.
#[derive(Debug, Clone, Copy)]
struct Answer {
    status: u16,
    retry_after: Option<u64>,
}

impl Answer {
    fn read(text: &[u8]) -> Self {
        let text = String::from_utf8_lossy(text);
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok());
        let retry_after = text.lines().find_map(|l| {
            let l = l.to_ascii_lowercase();
            l.strip_prefix("retry-after:")?.trim().parse().ok()
        });
        Self {
            status: status.unwrap_or(0),
            retry_after,
        }
    }
}

/// Reads `read` until the connection ends (every request says `Connection: close`), at
/// most `bound`; what came.
async fn to_end(read: &mut (impl AsyncReadExt + Unpin), bound: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    let reading = async {
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let ended = tokio::time::timeout(bound, reading).await.is_ok();
    assert!(ended, "no answer and no close within {bound:?}");
    got
}

/// Sends `head` and `body` on a connection of its own; the answer.
async fn exchange(addr: &str, head: &str, body: &[u8]) -> Answer {
    let mut tcp = TcpStream::connect(addr).await.expect("the listener");
    let _ = tcp.write_all(head.as_bytes()).await;
    let _ = tcp.write_all(body).await;
    Answer::read(&to_end(&mut tcp, ANSWER_WITHIN).await)
}

fn now_secs() -> i64 {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    now.map_or(0, |d| d.as_secs() as i64)
}

/// An occurrence of `ticket.created` with `eventId` `id`.
fn occurrence(id: &str, n: u64) -> Vec<u8> {
    let timestamp = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let occurrence =
        json!({"eventId": id, "name": "ticket.created", "timestamp": timestamp, "data": {"id": n}});
    occurrence.to_string().into_bytes()
}

/// The sender: where it sends, what it signs with, and what it counted.
struct Sender {
    addr: String,
    /// The binding's key, and its route.
    key: String,
    path: String,
    secret: Secret,
    /// The binding's secret before the binding was made again.
    old: Secret,
    subscription: String,
    /// The last valid occurrence's number.
    made: AtomicU64,
    /// Hostile requests by what they were and the status they got.
    hostile: Mutex<BTreeMap<(&'static str, u16), usize>>,
    /// The event ids of the valid deliveries taken (200).
    valid: Mutex<Vec<String>>,
    /// Valid deliveries answered 429 or 503 and sent again, by that status.
    retried: Mutex<BTreeMap<u16, usize>>,
}

impl Sender {
    /// A new valid occurrence: its event id and number.
    fn next(&self) -> (String, u64) {
        let n = self.made.fetch_add(1, Ordering::Relaxed) + 1;
        (format!("h-{n}"), n)
    }

    /// A POST head to `path` with `headers` and a `Content-Length` of `len`.
    fn post(&self, path: &str, headers: &str, len: usize) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Content-Type: application/json\r\n{headers}Content-Length: {len}\r\n\r\n",
            self.addr
        )
    }

    /// The four Standard Webhooks headers of `body`, signed with `secret` at `ts`.
    fn signed(&self, id: &str, ts: i64, body: &[u8], secret: &Secret) -> String {
        format!(
            "webhook-id: {id}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {}\r\n\
             X-MCP-Subscription-Id: {}\r\n",
            secret.sign(id, ts, body),
            self.subscription
        )
    }

    /// A POST of `body` to the binding's route, signed with the binding's secret now.
    fn valid(&self, id: &str, body: &[u8]) -> String {
        let signed = self.signed(id, now_secs(), body, &self.secret);
        self.post(&self.path, &signed, body.len())
    }

    async fn count(&self, what: &'static str, status: u16, n: usize) {
        *self.hostile.lock().await.entry((what, status)).or_default() += n;
    }

    /// Sends a hostile request, checks its status, and counts it under `what`.
    async fn expect(&self, what: &'static str, status: u16, head: &str, body: &[u8]) {
        let got = exchange(&self.addr, head, body).await;
        assert_eq!(got.status, status, "{what}: {got:?}");
        if matches!(status, 429 | 503) {
            assert!(got.retry_after.is_some(), "{what}: {got:?}");
        }
        self.count(what, status, 1).await;
    }

    /// A valid delivery answered `status` (429 or 503), to be sent again.
    async fn turned(&self, answer: Answer) {
        assert!(matches!(answer.status, 429 | 503), "{answer:?}");
        assert!(answer.retry_after.is_some(), "{answer:?}");
        *self.retried.lock().await.entry(answer.status).or_default() += 1;
    }

    /// Delivers occurrence `id` as a sender that retries does: sent again (signed afresh)
    /// after each 429 or 503, as its `Retry-After` says, until it is taken.
    async fn deliver(&self, id: &str, n: u64) {
        let body = occurrence(id, n);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = exchange(&self.addr, &self.valid(id, &body), &body).await;
            if got.status == 200 {
                break;
            }
            self.turned(got).await;
            let wait = got.retry_after.unwrap_or(1).min(5);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            assert!(Instant::now() < deadline, "{id} not taken within 60 s");
        }
        self.valid.lock().await.push(id.to_owned());
    }

    /// A new valid occurrence, delivered.
    async fn deliver_next(&self) {
        let (id, n) = self.next();
        self.deliver(&id, n).await;
    }
}

/// Slow-loris heads, one byte a second, never ended: each one's end (status 0: closed
/// unanswered), waited for past the head's bound.
fn slow_heads(s: &Sender, n: usize) -> Vec<JoinHandle<Answer>> {
    let head = format!("POST {} HTTP/1.1\r\nHost: x\r\nX-Padding: ", s.path);
    let loris = |addr: String, head: String| async move {
        let tcp = TcpStream::connect(&addr).await.expect("the listener");
        let (mut read, mut write) = tcp.into_split();
        let trickling = tokio::spawn(async move {
            let _ = write.write_all(head.as_bytes()).await;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if write.write_all(b"a").await.is_err() {
                    return;
                }
            }
        });
        let got = to_end(&mut read, HEAD_WITHIN + SLACK).await;
        trickling.abort();
        Answer::read(&got)
    };
    (0..n)
        .map(|_| tokio::spawn(loris(s.addr.clone(), head.clone())))
        .collect()
}

/// Bodies that stop coming, signed: a chunked one never ended, a declared length never
/// reached; each one's answer.
fn stalled_bodies(s: &Sender, n: usize) -> Vec<JoinHandle<Answer>> {
    let stall = |addr: String, head: String, start: Vec<u8>| async move {
        let mut tcp = TcpStream::connect(&addr).await.expect("the listener");
        let _ = tcp.write_all(head.as_bytes()).await;
        let _ = tcp.write_all(&start).await;
        Answer::read(&to_end(&mut tcp, BODY_WITHIN + SLACK).await)
    };
    (0..n)
        .map(|i| {
            let id = format!("stall-{i}");
            let body = occurrence(&id, 0);
            let signed = s.signed(&id, now_secs(), &body, &s.secret);
            let (head, start) = match i % 2 {
                0 => (
                    format!(
                        "POST {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{signed}\
                         Transfer-Encoding: chunked\r\n\r\n",
                        s.path
                    ),
                    b"5\r\nhello\r\n".to_vec(),
                ),
                _ => (s.post(&s.path, &signed, body.len()), body[..10].to_vec()),
            };
            tokio::spawn(stall(s.addr.clone(), head, start))
        })
        .collect()
}

/// Missing headers, bad signatures, the old secret, replays inside and outside the window.
async fn signatures(s: &Sender) {
    let (id, n) = s.next();
    let body = occurrence(&id, n);
    let good = s.signed(&id, now_secs(), &body, &s.secret);
    s.deliver(&id, n).await;
    // The same bytes again, inside the window: taken, as a duplicate.
    let replay = s.post(&s.path, &good, body.len());
    s.expect("a replay inside the window", 200, &replay, &body)
        .await;
    let headers = [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "X-MCP-Subscription-Id",
    ];
    for missing in headers {
        let rest: String = good
            .split_inclusive("\r\n")
            .filter(|l| !l.starts_with(missing))
            .collect();
        let head = s.post(&s.path, &rest, body.len());
        s.expect("a missing header", 401, &head, &body).await;
        s.deliver_next().await;
    }

    let (id, n) = s.next();
    let body = occurrence(&id, n);
    let ts = now_secs();
    let real = s.secret.sign(&id, ts, &body);
    let bad = [
        "v1,AAAA".to_owned(),
        "garbage".to_owned(),
        real.replacen("v1,", "v2,", 1),
        format!("v1,{}", "A".repeat(400)),
        s.secret.sign(&id, ts, b"another body"),
    ];
    for signature in &bad {
        let headers = format!(
            "webhook-id: {id}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {signature}\r\n\
             X-MCP-Subscription-Id: {}\r\n",
            s.subscription
        );
        let head = s.post(&s.path, &headers, body.len());
        s.expect("a bad signature", 401, &head, &body).await;
    }
    let old = s.post(&s.path, &s.signed(&id, ts, &body, &s.old), body.len());
    s.expect("the old secret", 401, &old, &body).await;
    for (what, off) in [
        ("a replay outside the window", -301),
        ("a timestamp ahead of the window", 301),
    ] {
        let signed = s.signed(&id, now_secs() + off, &body, &s.secret);
        let head = s.post(&s.path, &signed, body.len());
        s.expect(what, 401, &head, &body).await;
    }
    s.deliver(&id, n).await;
    // A replay of one taken, signed long ago: refused all the same.
    let signed = s.signed(&id, now_secs() - 400, &body, &s.secret);
    let head = s.post(&s.path, &signed, body.len());
    s.expect("a replay outside the window", 401, &head, &body)
        .await;
}

/// Bodies that are not JSON, not an object, or not an occurrence: signed, so read (410);
/// unsigned, never used (401).
async fn bodies(s: &Sender) {
    let not = [
        ("a body that is not JSON", &b"not json at all"[..]),
        ("a body that is not an object", b"[1,2,3]"),
        ("a body that is not an object", b"\"text\""),
        ("a body that is not an object", b"null"),
        ("a malformed occurrence", br#"{"name":"ticket.created"}"#),
    ];
    for (what, body) in not {
        s.expect(what, 410, &s.valid("not-1", body), body).await;
        s.deliver_next().await;
    }
    let unsigned = s.post(&s.path, "", 3);
    s.expect("an unsigned body that is not JSON", 401, &unsigned, b"xyz")
        .await;
}

/// Methods other than POST (405), paths with no binding (410), paths off the routes (404).
async fn methods_and_paths(s: &Sender) {
    let (id, n) = s.next();
    let body = occurrence(&id, n);
    let signed = s.signed(&id, now_secs(), &body, &s.secret);
    for method in ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let head = format!(
            "{method} {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{signed}\
             Content-Length: {}\r\n\r\n",
            s.path,
            body.len()
        );
        s.expect("a wrong method", 405, &head, &body).await;
    }
    let unbound = [
        "/hooks/_mcp/bnobody".to_owned(),
        "/hooks/_mcp/".to_owned(),
        format!("{}/more", s.path),
        format!("/hooks/_mcp/../_mcp/{}", s.key),
    ];
    for path in &unbound {
        let head = s.post(path, &signed, body.len());
        s.expect("no binding at the path", 410, &head, &body).await;
    }
    for path in ["/elsewhere", "/", &format!("/x{}", s.path)] {
        let head = s.post(path, &signed, body.len());
        s.expect("off the routes", 404, &head, &body).await;
    }
    s.deliver(&id, n).await;
}

/// Bodies past the bound: declared (413 before the body is sent), and in chunks without
/// a length (413 once past the bound).
async fn oversize(s: &Sender) {
    let (id, n) = s.next();
    let big = vec![b' '; BODY_MAX + 1];
    let signed = s.signed(&id, now_secs(), &big, &s.secret);
    let declared = s.post(&s.path, &signed, big.len());
    s.expect("an oversize body, declared", 413, &declared, b"")
        .await;

    let head = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{signed}\
         Transfer-Encoding: chunked\r\n\r\n",
        s.path
    );
    let tcp = TcpStream::connect(&s.addr).await.expect("the listener");
    let (mut read, mut write) = tcp.into_split();
    let sending = tokio::spawn(async move {
        let _ = write.write_all(head.as_bytes()).await;
        // Twice the bound, then the end, while the connection takes it.
        let chunk = vec![b' '; 16 * 1024];
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        for _ in 0..2 * BODY_MAX / chunk.len() {
            if write.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
    });
    let got = Answer::read(&to_end(&mut read, ANSWER_WITHIN).await);
    sending.abort();
    assert_eq!(got.status, 413, "an oversize body in chunks: {got:?}");
    s.count("an oversize body, chunked", 413, 1).await;
    s.deliver(&id, n).await;
}

/// A burst of valid deliveries while another writer holds the store: past the binding's
/// queue they are answered 429 at once; the rest are taken once the store is free. Each
/// one turned away is sent again.
async fn burst(s: &Arc<Sender>, db: PathBuf) {
    const BURST: usize = 120;
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (locked, is_locked) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let db = rusqlite::Connection::open(db).unwrap();
        db.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked.send(()).unwrap();
        let _ = released.recv();
        db.execute_batch("ROLLBACK").unwrap();
    });
    is_locked.recv().unwrap();
    let sent: Vec<(String, u64)> = (0..BURST).map(|_| s.next()).collect();
    let answers: Vec<JoinHandle<Answer>> = sent
        .iter()
        .map(|(id, n)| {
            let (s, id, n) = (s.clone(), id.clone(), *n);
            tokio::spawn(async move {
                let body = occurrence(&id, n);
                exchange(&s.addr, &s.valid(&id, &body), &body).await
            })
        })
        .collect();
    // One is committing, 64 wait in the queue: the others are answered at once.
    until("the burst met the binding's queue full", || {
        answers.iter().filter(|a| a.is_finished()).count() >= BURST - 65
    })
    .await;
    release.send(()).unwrap();
    holder.join().unwrap();
    let mut pressured = 0;
    for ((id, n), answer) in sent.iter().zip(answers) {
        let a = answer.await.unwrap();
        if a.status == 200 {
            s.valid.lock().await.push(id.clone());
            continue;
        }
        s.count("a burst past the binding's queue", a.status, 1)
            .await;
        pressured += usize::from(a.status == 429);
        s.turned(a).await;
        s.deliver(id, *n).await;
    }
    assert!(pressured > 0, "no 429 in the burst");
}

/// A store that does not save: 503 (the round's `mcp.events.hook.unsaved`); taken once it
/// is back.
async fn unsaved(s: &Sender, agentd: &mut Daemon, db: PathBuf, round: usize) {
    let db = rusqlite::Connection::open(db).unwrap();
    db.execute_batch("ALTER TABLE events RENAME TO events_away")
        .unwrap();
    let (id, n) = s.next();
    let body = occurrence(&id, n);
    let got = exchange(&s.addr, &s.valid(&id, &body), &body).await;
    assert_eq!(got.status, 503, "{got:?}");
    s.turned(got).await;
    agentd.wait_for_nth("mcp.events.hook.unsaved", None, round);
    db.execute_batch("ALTER TABLE events_away RENAME TO events")
        .unwrap();
    s.deliver(&id, n).await;
}

/// A flood of idle connections at once: past the listener's bound each is answered 503 as
/// it comes, and closed; a valid delivery among them is turned away too (unless one held
/// before closed meanwhile), and taken once the flood is gone. The daemon's resources under
/// the flood.
async fn flood(s: &Sender, agentd: &Daemon) -> Usage {
    let size = flood_size();
    let mut flood = Vec::new();
    for _ in 0..size {
        flood.push(TcpStream::connect(&s.addr).await.expect("a connection"));
    }
    let during = agentd.usage();
    let (id, n) = s.next();
    let body = occurrence(&id, n);
    let got = exchange(&s.addr, &s.valid(&id, &body), &body).await;
    let taken = got.status == 200;
    if !taken {
        s.turned(got).await;
    }
    let answered: Vec<JoinHandle<Option<Vec<u8>>>> = flood
        .into_iter()
        .map(|mut tcp| {
            tokio::spawn(async move {
                let mut got = Vec::new();
                let read = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut got));
                // Still open after that: served, and idle; closed once dropped here.
                read.await.ok().map(|_| got)
            })
        })
        .collect();
    let (mut turned_away, mut served) = (0, 0);
    for answer in answered {
        match answer.await.unwrap() {
            Some(text) => {
                let a = Answer::read(&text);
                assert_eq!((a.status, a.retry_after), (503, Some(1)), "{a:?}");
                turned_away += 1;
            }
            None => served += 1,
        }
    }
    assert!(served <= CONNECTIONS, "{served} connections served at once");
    assert_eq!(turned_away + served, size);
    s.count("a connection past the listener's bound", 503, turned_away)
        .await;
    match taken {
        true => s.valid.lock().await.push(id),
        false => s.deliver(&id, n).await,
    }
    during
}

fn server_options() -> Options {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options
}

fn config(url: &str, store: &std::path::Path, binding: bool) -> String {
    let mut text = format!(
        "instance = \"hostile\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\n",
        store.display()
    );
    if binding {
        text += "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\n\
                 into = \"tickets\"\narguments = { project = \"ops\" }\n\
                 delivery = [\"webhook\"]\n";
    }
    text
}

/// The secrets of the server's webhook subscriptions, in the order they were first asked
/// for: a subscription asked for again (a retry, a lease renewed) keeps its secret.
fn secrets(server: &ReferenceServer) -> Vec<String> {
    let log = server.log();
    let subscribes = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("events/subscribe"));
    let mut secrets: Vec<String> = Vec::new();
    for secret in subscribes.filter_map(|l| l.body["params"]["delivery"]["secret"].as_str()) {
        if !secrets.iter().any(|s| s == secret) {
            secrets.push(secret.to_owned());
        }
    }
    secrets
}

/// Emits `n` occurrences from the server and waits for each to be answered 200.
async fn emit(server: &ReferenceServer, n: u64) -> Vec<String> {
    let ids: Vec<String> = (0..n)
        .map(|i| server.emit("ticket.created", json!({"id": 1000 + i})))
        .collect();
    until("the server's deliveries taken", || {
        let delivered = server.delivered();
        ids.iter()
            .all(|id| delivered.iter().any(|(d, s)| d == id && *s == 200))
    })
    .await;
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_sender_gets_its_statuses_and_loses_no_valid_delivery() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("hostile");
    let db = dir.path().join("agentd.sqlite3");
    let file = TempFile::new(&config(&server.url(), dir.path(), true));
    let mut agentd = Daemon::run(&file);
    let armed = agentd.wait_for("mcp.events.armed", Some("ref"));
    assert_eq!(armed["mode"], "webhook");
    let addr = agentd.listener();

    // The binding made again: a new secret, and the old one to sign with.
    file.write(&config(&server.url(), dir.path(), false));
    agentd.signal("HUP");
    agentd.wait_for("mcp.events.removed", Some("ref"));
    file.write(&config(&server.url(), dir.path(), true));
    agentd.signal("HUP");
    agentd.wait_for_nth("mcp.events.armed", Some("ref"), 2);
    let made = secrets(&server);
    assert_eq!(made.len(), 2, "{made:?}");
    assert_ne!(made[0], made[1], "a new secret");
    let delivered = server.delivered();
    let subscription = delivered
        .iter()
        .rev()
        .find_map(|(id, _)| id.strip_prefix("msg_verify_"))
        .expect("a verified subscription");
    let arguments = json!({"project": "ops"});
    let key = mcp_events::binding::key_of(
        "ref",
        "ticket.created",
        "tickets",
        arguments.as_object().unwrap(),
    );
    let s = Arc::new(Sender {
        addr,
        path: format!("/hooks/_mcp/{key}"),
        key,
        secret: Secret::parse(&made[1]).unwrap(),
        old: Secret::parse(&made[0]).unwrap(),
        subscription: subscription.to_owned(),
        made: AtomicU64::new(0),
        hostile: Mutex::default(),
        valid: Mutex::default(),
        retried: Mutex::default(),
    });
    let before = agentd.usage();
    let mut from_server = emit(&server, 3).await;

    // Rounds of every kind, for AGENTD_SOAK_SECS (one round by default).
    let secs = std::env::var("AGENTD_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok());
    let until = Instant::now() + Duration::from_secs(secs.unwrap_or(0));
    let mut rounds = 0;
    let mut during = before;
    while rounds == 0 || Instant::now() < until {
        rounds += 1;
        // In the background from the round's start, to the end of their bounds.
        let heads = slow_heads(&s, 20);
        let stalled = stalled_bodies(&s, 10);

        // One kind after the other, valid deliveries among them.
        signatures(&s).await;
        bodies(&s).await;
        methods_and_paths(&s).await;
        oversize(&s).await;
        burst(&s, db.clone()).await;
        unsaved(&s, &mut agentd, db.clone(), rounds).await;
        during = flood(&s, &agentd).await;

        for head in heads {
            let a = head.await.unwrap();
            assert_eq!(a.status, 0, "a head that never ends is not answered: {a:?}");
            s.count("a slow-loris head, closed", 0, 1).await;
        }
        for body in stalled {
            let a = body.await.unwrap();
            assert_eq!(a.status, 408, "a body that stops coming: {a:?}");
            s.count("a body that stops coming", 408, 1).await;
        }
        from_server.extend(emit(&server, 3).await);
        let now = agentd.usage();
        assert!(
            now.hwm_kib <= before.rss_kib + MEMORY_KIB,
            "memory after {rounds} rounds: {before:?} before, {now:?} now"
        );
    }
    let after = agentd.usage();

    // Every valid delivery appended exactly once.
    let valid = s.valid.lock().await.clone();
    let mut expected: Vec<String> = valid
        .iter()
        .chain(&from_server)
        .map(|id| format!("mcp/ref/ticket.created/{id}"))
        .collect();
    expected.sort();
    let records = wait_for_stream(&file, "tickets", expected.len());
    let mut ids: Vec<String> = records
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, expected, "every valid delivery exactly once");
    assert!(agentd.terminate().success());
    assert_eq!(tail(&file, "tickets").len(), expected.len());

    let hostile = s.hostile.lock().await.clone();
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for ((_, status), n) in &hostile {
        *by_status.entry(*status).or_default() += n;
    }
    let cases: Vec<String> = hostile
        .iter()
        .map(|((what, status), n)| format!("  {status} x{n}: {what}"))
        .collect();
    println!(
        "hostile: {rounds} rounds, {} requests, by status {by_status:?} (0: closed \
         unanswered)\n{}\n\
         valid deliveries: {} from the sender, {} from the server, appended {} (each exactly \
         once); turned away and sent again: {:?}\n\
         daemon: VmRSS {} KiB before, {} KiB under a flood of {} connections, {} KiB \
         after; VmHWM {} KiB; fds {} -> {} -> {}",
        hostile.values().sum::<usize>(),
        cases.join("\n"),
        valid.len(),
        from_server.len(),
        ids.len(),
        s.retried.lock().await,
        before.rss_kib,
        during.rss_kib,
        flood_size(),
        after.rss_kib,
        after.hwm_kib,
        before.fds,
        during.fds,
        after.fds,
    );
    drop(dir);
}
