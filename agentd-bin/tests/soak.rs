//! The soak: `agentd run` holds 20 reference servers, ten at 2025-11-25 and ten at
//! 2026-07-28 serving MCP Events (a poll binding each), every one behind a fault-injecting
//! proxy, for a bounded time under random faults: connections reset, stalled, cut half-way
//! through a body or an event, slowed byte by byte, closed after some bytes, dials refused,
//! live connections interrupted, and sessions expired by the servers, while the modern ones
//! emit occurrences. Then the faults stop, and:
//!
//! - every server is connected again (a legacy session with its GET stream, a modern listen);
//! - every lost session was dialed again on the session schedule (1 s, doubling to 30 s), and
//!   every retry the log announces is on its schedule (listens, polls);
//! - every occurrence a server produced is in its binding's stream exactly once;
//! - nothing leaked: no socket left in `CLOSE_WAIT`, sockets and threads back to what they
//!   were once every server was first connected, and the proxies hold nothing once the
//!   daemon exits.
//!
//! `AGENTD_SOAK_SECS` sets how long the faults last (10 s by default), `AGENTD_SOAK_SEED` the
//! seed of every random draw (printed; by default taken from the clock). The figures are
//! printed at the end (`--nocapture`).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use agentd_tests::faults::{Proxy, Rng, Stats, random_fault};
use common::{Daemon, TempFile, Usage, store_dir, tail};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};

/// Servers at 2025-11-25, and at 2026-07-28.
const LEGACY: usize = 10;
const MODERN: usize = 10;

/// The session schedule: 1 s, doubling to 30 s.
const REDIAL_FIRST: Duration = Duration::from_secs(1);
const REDIAL_MAX: Duration = Duration::from_secs(30);

/// How much later than its backoff a re-dial may come: its turn behind the nine other
/// legacy servers' handshakes (2 s each), its own handshake (2 s), and the tools listed
/// again through the faults, with room for a loaded machine.
const REDIAL_SLACK: Duration = Duration::from_secs(30);

/// A server, the proxy in front of it, and what it is.
struct Held {
    name: String,
    legacy: bool,
    server: ReferenceServer,
    proxy: Proxy,
    /// The event ids it emitted (modern servers).
    emitted: Vec<String>,
    /// Times its sessions were expired (legacy servers).
    expired: usize,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

async fn hold(i: usize) -> Held {
    let legacy = i < LEGACY;
    let mut options = Options::default();
    options.legacy = legacy;
    options.modern = !legacy;
    options.events = !legacy;
    options.poll_ms = 1000;
    // Half of each era answers with event streams, to be cut inside an event.
    options.sse = i % 2 == 1;
    // Bytes on quiet streams, so that byte-counted faults reach them and a dead one is
    // noticed.
    options.keepalive = Some(Duration::from_secs(2));
    let server = ReferenceServer::start(options).await;
    let proxy = Proxy::start(server.addr()).await.expect("a proxy");
    Held {
        name: format!("{}{i}", if legacy { "l" } else { "m" }),
        legacy,
        server,
        proxy,
        emitted: Vec::new(),
        expired: 0,
    }
}

fn config(held: &[Held], store: &std::path::Path) -> String {
    let mut text = format!(
        "instance = \"soak\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        store.display()
    );
    for h in held {
        let url = format!("http://{}/mcp", h.proxy.addr());
        text += &format!("[[mcp.servers]]\nname = \"{}\"\nurl = \"{url}\"\n", h.name);
    }
    for h in held.iter().filter(|h| !h.legacy) {
        text += &format!(
            "[[events.bindings]]\nserver = \"{}\"\nevent = \"ticket.created\"\n\
             into = \"soak-{}\"\narguments = {{ project = \"ops\" }}\n",
            h.name, h.name
        );
    }
    text
}

/// Every server connected: a legacy session with its GET stream attached, a modern listen
/// open; the ones that are not, named.
fn unconnected(held: &[Held]) -> Vec<&str> {
    held.iter()
        .filter(|h| match h.legacy {
            true => h.server.get_streams() != 1,
            false => h.server.listens() != 1,
        })
        .map(|h| h.name.as_str())
        .collect()
}

/// When a log line was written (its `ts`, to the millisecond).
fn ts(line: &Value) -> SystemTime {
    line["ts"]
        .as_str()
        .and_then(|ts| humantime::parse_rfc3339_weak(ts).ok())
        .expect("a line with a ts")
}

/// What the re-dials of one legacy server came to.
#[derive(Debug, Default)]
struct Redials {
    /// Sessions lost (`mcp.disconnect`, reason `session_lost`).
    lost: usize,
    /// Re-dials that failed (`mcp.connect.fail`, reason `session_lost`).
    failed: usize,
    /// Sessions dialed again (`mcp.connect`, reason `session_lost`).
    redialed: usize,
    /// Whether a session is lost and not dialed again yet.
    pending: bool,
}

/// Reads one server's connection lines in order, checking every re-dial against the
/// session schedule: the outcome of the `k`th try comes at least `min(1 s × 2^(k-1), 30 s)`
/// after the outcome before it (the loss, for the first), and not more than
/// [`REDIAL_SLACK`] later than that.
fn redials(lines: &[&Value], server: &str) -> Result<Redials, String> {
    let mut r = Redials::default();
    // The last outcome of the loss under way, and the backoff of its next try.
    let mut under_way: Option<(SystemTime, Duration)> = None;
    for line in lines {
        let lost = line["reason"] == "session_lost";
        let at = ts(line);
        let event = line["event"].as_str().unwrap_or("");
        match (event, lost, under_way) {
            ("mcp.disconnect", true, None) => {
                r.lost += 1;
                under_way = Some((at, REDIAL_FIRST));
            }
            ("mcp.connect.fail" | "mcp.connect", true, Some((before, backoff))) => {
                let gap = at.duration_since(before).unwrap_or_default();
                // Stamps are cut to the millisecond.
                if gap + Duration::from_millis(1) < backoff {
                    return Err(format!(
                        "{server}: a re-dial {gap:?} after the one before, its backoff {backoff:?}: {line}"
                    ));
                }
                if gap > backoff + REDIAL_SLACK {
                    return Err(format!(
                        "{server}: a re-dial {gap:?} after the one before, its backoff {backoff:?}: {line}"
                    ));
                }
                if event == "mcp.connect" {
                    r.redialed += 1;
                    under_way = None;
                } else {
                    r.failed += 1;
                    under_way = Some((at, (backoff * 2).min(REDIAL_MAX)));
                }
            }
            ("mcp.disconnect" | "mcp.connect.fail" | "mcp.connect", true, _) => {
                return Err(format!("{server}: out of order: {line}"));
            }
            _ => {}
        }
    }
    r.pending = under_way.is_some();
    Ok(r)
}

/// Whether `retry_ms` is a wait of a doubling schedule from `first` to `max` (ms), moved by
/// up to ±`jitter`%.
fn on_schedule(retry_ms: u64, first: u64, max: u64, jitter: u64) -> bool {
    let mut wait = first;
    loop {
        let (lo, hi) = (wait * (100 - jitter) / 100, wait * (100 + jitter) / 100 + 1);
        if (lo..=hi).contains(&retry_ms) {
            return true;
        }
        if wait >= max {
            return false;
        }
        wait = (wait * 2).min(max);
    }
}

/// Every retry the log announces, checked against its schedule in the reference: a listen
/// (and a legacy GET stream) 250 ms doubling to 30 s; an MCP Events request 1 s doubling to
/// 5 min, ±10%. How many of each were seen.
fn retries(seen: &[(Instant, Value)]) -> BTreeMap<&'static str, usize> {
    let mut counted = BTreeMap::new();
    for (_, line) in seen {
        let (event, retry) = (line["event"].as_str().unwrap_or(""), &line["retry_ms"]);
        let (name, first, max, jitter) = match event {
            "mcp.listen.unavailable" => ("mcp.listen.unavailable", 250, 30_000, 0),
            "mcp.listen.ended" => ("mcp.listen.ended", 250, 30_000, 0),
            "mcp.events.poll.fail" => ("mcp.events.poll.fail", 1000, 300_000, 10),
            "mcp.events.list.fail" => ("mcp.events.list.fail", 1000, 300_000, 10),
            "mcp.events.arm.fail" => ("mcp.events.arm.fail", 1000, 300_000, 10),
            _ => continue,
        };
        *counted.entry(name).or_default() += 1;
        // An idle listen is reopened at once; a refused one is not retried.
        if retry.is_null() || line["reason"] == "idle" {
            continue;
        }
        let retry_ms = retry.as_u64().expect("retry_ms a number");
        assert!(
            on_schedule(retry_ms, first, max, jitter),
            "{event}: retry_ms {retry_ms} is off its schedule: {line}"
        );
    }
    counted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_servers_behind_faults_recover_and_lose_nothing() {
    let secs = env_u64("AGENTD_SOAK_SECS").unwrap_or(10);
    let seed = env_u64("AGENTD_SOAK_SEED").unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64)
    });
    println!("soak: seed {seed}, faults for {secs} s (AGENTD_SOAK_SEED={seed} draws them again)");
    let mut rng = Rng::new(seed);
    let mut held = Vec::new();
    for i in 0..LEGACY + MODERN {
        held.push(hold(i).await);
    }
    let dir = store_dir("soak");
    let file = TempFile::new(&config(&held, dir.path()));
    let mut agentd = Daemon::run(&file);
    for h in &held {
        agentd.wait_for("mcp.connect", Some(&h.name));
    }
    agentd.wait_for_nth("mcp.events.armed", None, MODERN);
    let settled = Instant::now() + Duration::from_secs(30);
    while !unconnected(&held).is_empty() {
        assert!(
            Instant::now() < settled,
            "not connected: {:?}",
            unconnected(&held)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = agentd.usage();

    // The faults.
    for h in &held {
        let mut draws = Rng::new(rng.next_u64());
        h.proxy.policy(move || random_fault(&mut draws));
    }
    let until = Instant::now() + Duration::from_secs(secs);
    let mut refusals = tokio::task::JoinSet::new();
    let modern: Vec<usize> = (LEGACY..LEGACY + MODERN).collect();
    let mut emitted = 0u64;
    // About ten times a second, one of: an occurrence emitted (5 in 10), a legacy server's
    // sessions expired (1 in 10), a proxy refusing dials for 0.2 to 2 s (1 in 10), a
    // proxy's live connections reset (2 in 10), nothing; besides the fault each new
    // connection draws.
    while Instant::now() < until {
        tokio::time::sleep(rng.between(Duration::from_millis(50), Duration::from_millis(150)))
            .await;
        match rng.below(10) {
            0..=4 => {
                let h = &mut held[modern[rng.below(MODERN as u64) as usize]];
                emitted += 1;
                let id = h.server.emit("ticket.created", json!({"id": emitted}));
                h.emitted.push(id);
            }
            5 => {
                let h = &mut held[rng.below(LEGACY as u64) as usize];
                h.server.expire_sessions();
                h.expired += 1;
            }
            6 => {
                let i = rng.below(held.len() as u64) as usize;
                let hold = rng.between(Duration::from_millis(200), Duration::from_secs(2));
                held[i].proxy.refuse(true);
                refusals.spawn(async move {
                    tokio::time::sleep(hold).await;
                    i
                });
            }
            7 | 8 => held[rng.below(held.len() as u64) as usize]
                .proxy
                .interrupt(),
            _ => {}
        }
        while let Some(Ok(i)) = refusals.try_join_next() {
            held[i].proxy.refuse(false);
        }
        agentd.drain(Duration::ZERO);
    }
    // Calm: every refusal over, no fault more, the faulted connections reset.
    while let Some(Ok(i)) = refusals.join_next().await {
        held[i].proxy.refuse(false);
    }
    for h in &held {
        h.proxy.calm();
        h.proxy.listening().await.expect("a proxy listening again");
    }
    let calmed = Instant::now();
    for &i in &modern {
        let h = &mut held[i];
        emitted += 1;
        let id = h.server.emit("ticket.created", json!({"id": emitted}));
        h.emitted.push(id);
    }

    // Recovery: a bound past the longest backoff the faults can have reached (the poll's,
    // doubling while they lasted), and the time to dial again through a loaded machine.
    let bound = Duration::from_secs(60) + Duration::from_secs(secs.min(300)) * 11 / 10;
    let mut last_tail = Instant::now() - Duration::from_secs(10);
    let mut appended: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    loop {
        agentd.drain(Duration::from_millis(100));
        let mut waiting: Vec<String> = unconnected(&held).iter().map(|s| s.to_string()).collect();
        for h in held.iter().filter(|h| h.legacy) {
            let lines: Vec<&Value> = agentd.of_server(&h.name).collect();
            match redials(&lines, &h.name) {
                Ok(r) if r.pending => {
                    waiting.push(format!("{}: a session not dialed again", h.name))
                }
                Ok(_) => {}
                Err(e) => panic!("{e}"),
            }
        }
        if waiting.is_empty() && last_tail.elapsed() >= Duration::from_secs(1) {
            last_tail = Instant::now();
            for h in held.iter().filter(|h| !h.legacy) {
                let records = tail(&file, &format!("soak-{}", h.name));
                if records.len() < h.emitted.len() {
                    waiting.push(format!(
                        "{}: {} of {} occurrences",
                        h.name,
                        records.len(),
                        h.emitted.len()
                    ));
                }
                appended.insert(h.name.clone(), records);
            }
            if waiting.is_empty() {
                break;
            }
        } else if waiting.is_empty() {
            waiting.push("the streams".into());
        }
        assert!(
            calmed.elapsed() < bound,
            "not recovered within {bound:?}: {waiting:?}"
        );
    }
    let recovered = calmed.elapsed();

    // Every occurrence exactly once.
    let (mut produced, mut taken) = (0, 0);
    for h in held.iter().filter(|h| !h.legacy) {
        let mut ids: Vec<String> = appended[&h.name]
            .iter()
            .map(|r| r["id"].as_str().unwrap_or("").to_owned())
            .collect();
        ids.sort();
        let mut expected: Vec<String> = h
            .emitted
            .iter()
            .map(|id| format!("mcp/{}/ticket.created/{id}", h.name))
            .collect();
        expected.sort();
        assert_eq!(ids, expected, "{}: every occurrence exactly once", h.name);
        produced += h.emitted.len();
        taken += ids.len();
    }

    // Every re-dial on its schedule, every retry announced on its own.
    let mut sessions = Redials::default();
    let mut expired = 0;
    for h in held.iter().filter(|h| h.legacy) {
        let lines: Vec<&Value> = agentd.of_server(&h.name).collect();
        let r = redials(&lines, &h.name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.lost, r.redialed,
            "{}: every lost session dialed again",
            h.name
        );
        sessions.lost += r.lost;
        sessions.failed += r.failed;
        sessions.redialed += r.redialed;
        expired += h.expired;
    }
    let retried = retries(&agentd.seen);

    // Nothing leaked: no socket the daemon no longer reads, sockets and threads back to
    // what they were before the faults (a pooled connection more per server at most).
    let settle = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now = agentd.usage();
        let back = now.close_wait == 0
            && now.threads <= before.threads
            && now.sockets <= before.sockets + held.len();
        if back {
            break now;
        }
        assert!(
            Instant::now() < settle,
            "leaked: before {before:?}, now {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(agentd.terminate().success());
    let mut proxies = Stats::default();
    let closed = Instant::now() + Duration::from_secs(15);
    for h in &held {
        while h.proxy.live() > 0 {
            assert!(
                Instant::now() < closed,
                "{}: {} connections held after the daemon exited",
                h.name,
                h.proxy.live()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        proxies.add(&h.proxy.stats());
    }

    report(&Report {
        seed,
        secs,
        proxies: &proxies,
        expired,
        sessions: &sessions,
        retried: &retried,
        produced,
        taken,
        before,
        after,
        recovered,
    });
    drop(dir);
}

/// The soak's figures.
struct Report<'a> {
    seed: u64,
    secs: u64,
    proxies: &'a Stats,
    expired: usize,
    sessions: &'a Redials,
    retried: &'a BTreeMap<&'static str, usize>,
    produced: usize,
    taken: usize,
    before: Usage,
    after: Usage,
    recovered: Duration,
}

fn report(r: &Report<'_>) {
    let kinds: Vec<String> = r
        .proxies
        .fired
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let (b, a) = (r.before, r.after);
    println!(
        "soak: seed {}, {} s of faults, {} servers ({LEGACY} at 2025-11-25, {MODERN} at 2026-07-28)\n\
         faults injected: {} ({}); connections accepted {}, dials refused in {} windows, \
         connections interrupted {}\n\
         sessions: expired by the servers {}, lost {}, re-dials failed {}, re-dialed {} (all on \
         the schedule)\n\
         retries announced (each on its schedule): {:?}\n\
         occurrences: produced {}, appended {} (each exactly once)\n\
         recovered {:.1} s after the faults stopped\n\
         daemon before -> after: fds {} -> {}, sockets {} -> {}, CLOSE_WAIT {} -> {}, \
         threads {} -> {}, VmRSS {} -> {} KiB, VmHWM {} KiB",
        r.seed,
        r.secs,
        LEGACY + MODERN,
        r.proxies.faults(),
        kinds.join(", "),
        r.proxies.accepted,
        r.proxies.refusals,
        r.proxies.interrupted,
        r.expired,
        r.sessions.lost,
        r.sessions.failed,
        r.sessions.redialed,
        r.retried,
        r.produced,
        r.taken,
        r.recovered.as_secs_f64(),
        b.fds,
        a.fds,
        b.sockets,
        a.sockets,
        b.close_wait,
        a.close_wait,
        b.threads,
        a.threads,
        b.rss_kib,
        a.rss_kib,
        a.hwm_kib,
    );
}
