//! Resource bounds under load: `agentd run` holds 100 reference servers on loopback (50 at
//! 2025-11-25, 50 at 2026-07-28 serving MCP Events) with 256 bindings on the modern ones
//! (4 by webhook, the rest polling), while a sender puts up to 1,000 webhook requests a
//! second to its listener over 288 keep-alive connections, 32 past the 256 it serves at
//! once: signed deliveries among bad signatures, paths with no binding and wrong methods.
//!
//! The daemon's resources are sampled from `/proc/PID` before, during and after the load,
//! and each stays within the limit the README documents ("Limits"): the listener's
//! connections at most 256, descriptors within the descriptor budget, threads within the
//! runtimes' bound, resident memory within a bound; after the load, connections, descriptors
//! and threads go back to what they were. Every delivery answered 200 is in its stream
//! exactly once.
//!
//! `AGENTD_BOUNDS_SECS` sets how long the load lasts (3 s by default), `AGENTD_BOUNDS_RATE`
//! the requests a second (1,000 by default). The figures are printed at the end
//! (`--nocapture`).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::{Daemon, TempFile, Usage, blocking, connections_on, polled, store_dir, tail};
use mcp_events::webhook::Secret;
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Servers at 2025-11-25, and at 2026-07-28 (MCP Events).
const LEGACY: usize = 50;
const MODERN: usize = 50;

/// Bindings (the instance's bound), of which the first [`WEBHOOKS`] by webhook, each on a
/// server of its own.
const BINDINGS: usize = 256;
const WEBHOOKS: usize = 4;

/// Connections the sender keeps, each sending its requests one after the other: 32 more
/// than the listener serves at once, so that the listener is held at its bound and the
/// senders past it are turned away (503), dialing again for each request.
const SENDERS: usize = LISTENER_CONNECTIONS + 32;

/// The limits the README documents ("Limits"), as the daemon's `/proc` shows them.
///
/// The listener's connections served at once; one more is held while it is turned away
/// (accepted, answered 503 and closed without an await).
const LISTENER_CONNECTIONS: usize = 256;
const LISTENER_HELD: usize = LISTENER_CONNECTIONS + 1;
/// The descriptor budget of 100 servers and a listener: 64, 4 a server, 256.
const DESCRIPTORS: usize = 64 + 4 * (LEGACY + MODERN) + LISTENER_CONNECTIONS;
/// Threads: the main thread, the main runtime's workers (one per core) and at most 16
/// blocking threads, MCP Events' 4 workers and at most 4 blocking threads, the store's.
fn threads_limit() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    1 + cores + 16 + 4 + 4 + 1
}
/// Resident memory, in KiB.
const MEMORY_KIB: u64 = 256 * 1024;

/// How long the load lasts, and its rate.
fn load() -> (Duration, u64) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let secs = env("AGENTD_BOUNDS_SECS").unwrap_or(3);
    let rate = env("AGENTD_BOUNDS_RATE").unwrap_or(1000);
    (Duration::from_secs(secs), rate)
}

fn server_options(legacy: bool) -> Options {
    let mut options = Options::default();
    options.legacy = legacy;
    options.modern = !legacy;
    options.events = !legacy;
    // 252 poll bindings: about 50 polls a second.
    options.poll_ms = 5000;
    options
}

fn modern_name(i: usize) -> String {
    format!("m{i}")
}

fn config(
    legacy: &[ReferenceServer],
    modern: &[ReferenceServer],
    store: &std::path::Path,
) -> String {
    let mut text = format!(
        "instance = \"bounds\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n",
        store.display()
    );
    for (i, s) in legacy.iter().enumerate() {
        text += &format!("[[mcp.servers]]\nname = \"l{i}\"\nurl = \"{}\"\n", s.url());
    }
    for (i, s) in modern.iter().enumerate() {
        let name = modern_name(i);
        text += &format!(
            "[[mcp.servers]]\nname = \"{name}\"\nurl = \"{}\"\n",
            s.url()
        );
    }
    for b in 0..BINDINGS {
        let delivery = if b < WEBHOOKS { "webhook" } else { "poll" };
        text += &format!(
            "[[events.bindings]]\nserver = \"{}\"\nevent = \"ticket.created\"\n\
             into = \"b{b}\"\narguments = {{ project = \"ops\" }}\ndelivery = [\"{delivery}\"]\n",
            modern_name(b % MODERN)
        );
    }
    text
}

/// A webhook binding as the sender signs for it.
#[derive(Debug, Clone)]
struct Hook {
    stream: String,
    path: String,
    secret: Secret,
    subscription: String,
}

/// Webhook binding `b`'s route, secret and subscription, once its server verified it.
fn hook(server: &ReferenceServer, b: usize) -> Option<Hook> {
    let secret = server
        .log()
        .iter()
        .filter(|l| l.method.as_deref() == Some("events/subscribe"))
        .find_map(|l| {
            l.body["params"]["delivery"]["secret"]
                .as_str()
                .map(str::to_owned)
        })?;
    let subscription = server
        .delivered()
        .iter()
        .find_map(|(id, _)| id.strip_prefix("msg_verify_").map(str::to_owned))?;
    let arguments = json!({"project": "ops"});
    let stream = format!("b{b}");
    let key = mcp_events::binding::key_of(
        &modern_name(b % MODERN),
        "ticket.created",
        &stream,
        arguments.as_object()?,
    );
    Some(Hook {
        stream,
        path: format!("/hooks/_mcp/{key}"),
        secret: Secret::parse(&secret).ok()?,
        subscription,
    })
}

/// What a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Valid,
    BadSignature,
    NoBinding,
    WrongMethod,
}

impl Kind {
    fn of(n: u64) -> Self {
        match n % 4 {
            0 => Self::Valid,
            1 => Self::BadSignature,
            2 => Self::NoBinding,
            _ => Self::WrongMethod,
        }
    }
}

/// What the sender counted.
#[derive(Debug, Default)]
struct Counts {
    /// Answers by what was sent and the status (0: the connection ended first).
    answers: BTreeMap<(Kind, u16), u64>,
    /// The event ids answered 200, by stream.
    taken: BTreeMap<String, Vec<String>>,
    /// Connections the sender opened.
    connections: u64,
}

/// Request `n`: its head and body, and, valid, its stream and event id.
fn request(n: u64, hooks: &[Hook]) -> (Kind, Vec<u8>, Option<(String, String)>) {
    let kind = Kind::of(n);
    let hook = &hooks[(n / 4) as usize % hooks.len()];
    let id = format!("load-{n}");
    let timestamp = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let body = json!({"eventId": id, "name": "ticket.created", "timestamp": timestamp,
                      "data": {"n": n}})
    .to_string();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let signature = match kind {
        Kind::BadSignature => hook.secret.sign(&id, now, b"another body"),
        _ => hook.secret.sign(&id, now, body.as_bytes()),
    };
    let (method, path) = match kind {
        Kind::NoBinding => ("POST", "/hooks/_mcp/bnobody"),
        Kind::WrongMethod => ("PUT", hook.path.as_str()),
        _ => ("POST", hook.path.as_str()),
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         webhook-id: {id}\r\nwebhook-timestamp: {now}\r\nwebhook-signature: {signature}\r\n\
         X-MCP-Subscription-Id: {}\r\nContent-Length: {}\r\n\r\n",
        hook.subscription,
        body.len()
    );
    let valid = (kind == Kind::Valid).then(|| (hook.stream.clone(), id));
    (kind, [head.into_bytes(), body.into_bytes()].concat(), valid)
}

/// Reads one answer on `tcp`: its status, and whether the connection goes on.
async fn answer(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(u16, bool)> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let mut chunk = [0; 4096];
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let close = head.lines().any(|l| l.trim() == "connection: close");
    while buf.len() < end + length {
        let mut chunk = [0; 4096];
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..(end + length).min(buf.len()));
    Some((status, !close))
}

/// One sender: requests `first`, `first + SENDERS`, … each at its time on the schedule of
/// `rate` a second from `start`, on a kept connection (dialed again when it ends), until
/// `stop`.
async fn send(
    addr: String,
    hooks: Arc<Vec<Hook>>,
    first: u64,
    rate: u64,
    start: tokio::time::Instant,
    stop: Arc<AtomicBool>,
    counts: Arc<Mutex<Counts>>,
) {
    let mut tcp: Option<TcpStream> = None;
    let mut buf = Vec::new();
    let mut n = first;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep_until(start + Duration::from_secs_f64(n as f64 / rate as f64)).await;
        let (kind, bytes, valid) = request(n, &hooks);
        n += SENDERS as u64;
        if tcp.is_none() {
            tcp = TcpStream::connect(&addr).await.ok();
            buf.clear();
            counts.lock().unwrap().connections += 1;
        }
        let Some(conn) = tcp.as_mut() else { continue };
        let answered = match conn.write_all(&bytes).await {
            Ok(()) => answer(conn, &mut buf).await,
            Err(_) => None,
        };
        let status = answered.map_or(0, |(status, _)| status);
        if !answered.is_some_and(|(_, goes_on)| goes_on) {
            tcp = None;
        }
        let mut counts = counts.lock().unwrap();
        *counts.answers.entry((kind, status)).or_default() += 1;
        if let (200, Some((stream, id))) = (status, valid) {
            counts.taken.entry(stream).or_default().push(id);
        }
    }
}

/// The most of each resource seen while sampling.
#[derive(Debug, Default, Clone, Copy)]
struct Peak {
    connections: usize,
    fds: usize,
    sockets: usize,
    threads: usize,
    rss_kib: u64,
    samples: usize,
}

impl Peak {
    fn add(&mut self, usage: Usage, connections: usize) {
        self.connections = self.connections.max(connections);
        self.fds = self.fds.max(usage.fds);
        self.sockets = self.sockets.max(usage.sockets);
        self.threads = self.threads.max(usage.threads);
        self.rss_kib = self.rss_kib.max(usage.rss_kib);
        self.samples += 1;
    }
}

/// This process's soft descriptor limit raised to its hard one: the servers, their
/// connections and the senders' are about 800, past a soft limit of 1024 with the rest.
fn room_for_descriptors() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("the descriptor limit");
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("the soft limit raised");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_stay_within_their_limits_under_load() {
    room_for_descriptors();
    let (secs, rate) = load();
    let mut legacy = Vec::new();
    for _ in 0..LEGACY {
        legacy.push(ReferenceServer::start(server_options(true)).await);
    }
    let mut modern = Vec::new();
    for _ in 0..MODERN {
        modern.push(ReferenceServer::start(server_options(false)).await);
    }
    let dir = store_dir("bounds");
    let file = TempFile::new(&config(&legacy, &modern, dir.path()));
    let mut agentd = Daemon::run(&file);
    let addr = blocking(|| agentd.listener());
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let pid = agentd.pid();

    // Every server connected, every binding armed, every webhook verified.
    polled(Duration::from_secs(180), || {
        agentd.drain(Duration::ZERO);
        let armed = agentd.matching("mcp.events.armed", None).count();
        let connected = agentd.matching("mcp.connect", None).count();
        std::future::ready(match (armed, connected) {
            (BINDINGS, 100) => Ok(()),
            seen => Err(format!("bindings armed, servers connected: {seen:?}")),
        })
    })
    .await;
    let hooks = polled(Duration::from_secs(60), || {
        let hooks: Vec<Hook> = (0..WEBHOOKS).filter_map(|b| hook(&modern[b], b)).collect();
        std::future::ready(match hooks.len() {
            WEBHOOKS => Ok(hooks),
            n => Err(format!("{n} of {WEBHOOKS} webhooks verified")),
        })
    })
    .await;
    let before = agentd.usage();
    let connections_before = connections_on(pid, port);

    // The load, sampled every 100 ms on a thread of its own.
    let stop = Arc::new(AtomicBool::new(false));
    let sampling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = Peak::default();
            while !stop.load(Ordering::Relaxed) {
                peak.add(Usage::of(pid), connections_on(pid, port));
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        })
    };
    let counts = Arc::new(Mutex::new(Counts::default()));
    let hooks = Arc::new(hooks);
    let start = tokio::time::Instant::now();
    let senders: Vec<_> = (0..SENDERS as u64)
        .map(|first| {
            let (addr, hooks, stop, counts) =
                (addr.clone(), hooks.clone(), stop.clone(), counts.clone());
            tokio::spawn(send(addr, hooks, first, rate, start, stop, counts))
        })
        .collect();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.await.unwrap();
    }
    let sent_for = start.elapsed();
    let during = sampling.join().unwrap();

    // Back to what it was: the listener's connections, descriptors, threads.
    let after = polled(Duration::from_secs(60), || {
        let after = agentd.usage();
        let connections = connections_on(pid, port);
        std::future::ready(
            match connections <= connections_before
                && after.fds <= before.fds + 4
                && after.threads <= before.threads + 4
            {
                true => Ok(after),
                false => Err(format!(
                    "not back: {connections} connections, {after:?} of {before:?}"
                )),
            },
        )
    })
    .await;

    let counts = std::mem::take(&mut *counts.lock().unwrap());
    let sent: u64 = counts.answers.values().sum();
    // Every delivery answered 200 in its stream exactly once.
    let mut appended = 0;
    for (stream, taken) in &counts.taken {
        let mut expected: Vec<String> = taken
            .iter()
            .map(|id| format!("mcp/m{}/ticket.created/{id}", &stream[1..]))
            .collect();
        expected.sort();
        let mut ids: Vec<String> = blocking(|| tail(&file, stream))
            .iter()
            .map(|r| r["id"].as_str().unwrap_or("").to_owned())
            .collect();
        ids.sort();
        assert_eq!(
            ids, expected,
            "{stream}: every delivery taken, exactly once"
        );
        appended += ids.len();
    }
    assert!(blocking(|| agentd.terminate()).success());

    println!(
        "bounds: {} servers ({LEGACY} at 2025-11-25, {MODERN} at 2026-07-28), {BINDINGS} \
         bindings ({WEBHOOKS} webhook); {sent} requests in {:.1} s ({:.0}/s, asked {rate}/s) \
         on {} connections; by kind and status {:?}; {appended} deliveries appended, each once\n\
         daemon before: {before:?}, listener connections {connections_before}\n\
         daemon during ({} samples): listener connections <= {} (limit \
         {LISTENER_CONNECTIONS} served + 1 turned away), fds <= {} (budget {DESCRIPTORS}), sockets <= {}, threads \
         <= {} (limit {}), VmRSS <= {} KiB (limit {MEMORY_KIB})\n\
         daemon after: {after:?}",
        LEGACY + MODERN,
        sent_for.as_secs_f64(),
        sent as f64 / sent_for.as_secs_f64(),
        counts.connections,
        counts.answers,
        during.samples,
        during.connections,
        during.fds,
        during.sockets,
        during.threads,
        threads_limit(),
        during.rss_kib,
    );
    let unanswered: u64 = counts
        .answers
        .iter()
        .filter(|((_, status), _)| *status == 0)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        unanswered, 0,
        "every request answered: {:?}",
        counts.answers
    );
    for ((kind, status), n) in &counts.answers {
        let expected: &[u16] = match kind {
            Kind::Valid => &[200, 429, 503],
            Kind::BadSignature => &[401, 503],
            Kind::NoBinding => &[410, 503],
            Kind::WrongMethod => &[405, 503],
        };
        assert!(expected.contains(status), "{kind:?} answered {status} x{n}");
    }
    assert!(during.connections <= LISTENER_HELD, "{during:?}");
    assert!(during.fds <= DESCRIPTORS, "{during:?}");
    assert!(during.threads <= threads_limit(), "{during:?}");
    assert!(during.rss_kib <= MEMORY_KIB, "{during:?}");
    assert!(after.hwm_kib <= MEMORY_KIB, "{after:?}");
    drop((legacy, modern, dir));
}

/// The descriptor budget held against `RLIMIT_NOFILE` at start: one server and a listener
/// need 64 + 4 + 256; a daemon whose limit (soft and hard) is that many starts (and refuses
/// a reload to a second server), one whose soft limit is below it and hard limit past it
/// starts with the soft limit raised, one with one fewer exits 1 naming the budget and the
/// limit. The limits set are at most this process's hard limit (lowering it needs no
/// privilege); one too low to pass the budget fails the test, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_limit_below_the_budget_refuses_the_start() {
    let budget = 64 + 4 + LISTENER_CONNECTIONS;
    let (_, ours) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .expect("the descriptor limit");
    let ours = usize::try_from(ours).unwrap_or(usize::MAX);
    assert!(
        ours > budget,
        "this test sets RLIMIT_NOFILE up to {} (hard), and this process's hard limit is \
         {ours}: run it where `ulimit -Hn` is past {budget}",
        budget + 1
    );
    let server = ReferenceServer::start(server_options(false)).await;
    let dir = store_dir("descriptors");
    let file = TempFile::new(&format!(
        "instance = \"bounds\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [[mcp.servers]]\nname = \"m0\"\nurl = \"{}\"\n",
        dir.path().display(),
        server.url()
    ));
    let mut agentd = Daemon::run_after(&file, &format!("ulimit -n {budget} && exec \"$@\""));
    blocking(|| agentd.wait_for("mcp.connect", Some("m0")));
    // A reload to two servers, past the budget the limit holds: refused, the one kept.
    let first = std::fs::read_to_string(file.path()).unwrap();
    file.write(&format!(
        "{first}[[mcp.servers]]\nname = \"m1\"\nurl = \"{}\"\n",
        server.url()
    ));
    blocking(|| agentd.signal("HUP"));
    let refused = blocking(|| agentd.wait_for("reload.refused", None));
    let err = refused["err"].as_str().unwrap();
    assert!(
        err.starts_with(&format!("{} file descriptors are needed", budget + 4)),
        "{err}"
    );
    file.write(&first);
    assert!(blocking(|| agentd.terminate()).success());
    assert!(agentd.matching("mcp.connect", Some("m1")).next().is_none());

    // A soft limit below the budget, the hard one past it: raised, to the hard limit.
    let hard = (budget + 100).min(ours);
    let script = format!("ulimit -Sn 100 && ulimit -Hn {hard} && exec \"$@\"");
    let mut agentd = Daemon::run_after(&file, &script);
    blocking(|| agentd.wait_for("mcp.connect", Some("m0")));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", agentd.pid())).unwrap();
    let open_files = limits.lines().find(|l| l.starts_with("Max open files"));
    let soft_hard: Vec<&str> = open_files
        .unwrap()
        .split_whitespace()
        .skip(3)
        .take(2)
        .collect();
    assert_eq!(soft_hard, [hard.to_string(), hard.to_string()], "{limits}");
    assert!(blocking(|| agentd.terminate()).success());

    let script = format!("ulimit -n {} && exec \"$@\"", budget - 1);
    let mut agentd = Daemon::run_after(&file, &script);
    let status = polled(Duration::from_secs(15), || {
        std::future::ready(agentd.exited().ok_or("still running"))
    })
    .await;
    assert_eq!(status.code(), Some(1));
    blocking(|| agentd.drain(Duration::from_millis(500)));
    let said = format!(
        "agentd: cannot start: {budget} file descriptors are needed (64, 4 for each of \
         mcp.servers, 256 for the listener) but RLIMIT_NOFILE allows {}: raise it (`ulimit \
         -n`) or configure fewer servers",
        budget - 1
    );
    let lines: Vec<&serde_json::Value> = agentd.seen.iter().map(|(_, v)| v).collect();
    assert!(
        lines.iter().any(|l| l.as_str() == Some(said.as_str())),
        "{lines:#?}"
    );
    drop(dir);
}
