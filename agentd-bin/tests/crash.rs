//! Crash consistency at random points: `agentd run` SIGKILLed, many times, at moments a
//! seeded generator draws, while it takes MCP Events by poll (the reference server emits
//! on, into `tickets`) and by webhook (signed deliveries sent concurrently, into `hooks`),
//! durable tool writes (`memory.set`, `memory.push`, `artifact.create`), and workflow runs
//! (started by the occurrences of both streams, and by `workflow.run`), each with an
//! `mcp.tool` step. Some rounds kill it again while it restores, before it answers. The
//! moment of each kill is the point of the test: it is drawn, not waited for.
//!
//! After each restart, nothing acknowledged is lost: every delivery answered 200 is in its
//! stream, every write answered is read back, every run answered exists, every occurrence
//! of either stream started its run; and nothing is duplicated: each occurrence is in its
//! stream once, each push once, each occurrence started one run. Deliveries not answered
//! 200 are sent again, as a sender does, and must then be taken once. At the end every run
//! completes, and the idempotency keys the server saw are those of runs that exist, one
//! each.
//!
//! The checks are incremental, so that a round costs the same however long the run: each
//! reads only the records its stream gained since the check before (from the store's file,
//! after the last sequence number read), and checks that those read before are all still
//! there by their count; what was acknowledged is looked for once, then only counted.
//!
//! `AGENTD_CRASH_ROUNDS` sets how many rounds (3 by default), `AGENTD_CRASH_SEED` the seed
//! of every draw (printed; by default taken from the clock). The figures are printed at the
//! end (`--nocapture`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use agentd_tests::faults::Rng;
use common::{Daemon, TempFile, agentd_async, store_dir, until_up};
use mcp_events::webhook::Secret;
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a state is waited for.
const WITHIN: Duration = Duration::from_secs(30);

/// How long the load runs at most before the kill, and how long a restore at most before
/// an early one.
const LOAD_MAX: Duration = Duration::from_millis(2500);
const RESTORE_MAX: Duration = Duration::from_millis(400);

/// In how many rounds of a hundred the daemon is killed while it restores.
const EARLY_PERCENT: u64 = 20;

/// How many webhook senders deliver at once, and how long each waits between two
/// deliveries (a pace that leaves the machine to the other writers).
const SENDERS: usize = 4;
const PACE: Duration = Duration::from_millis(20);

const WORKFLOWS: &str = r#"
[[workflows]]
name = "on_ticket"
starts = [{ id = "ticket", event = { stream = "tickets" } }]
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = 1, b = 2 }
[[workflows]]
name = "on_hook"
starts = [{ id = "hook", event = { stream = "hooks" } }]
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = 3, b = 4 }
[[workflows]]
name = "manual"
input = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
[[workflows.steps]]
id = "add"
type = "mcp.tool"
server = "ref"
tool = "add"
arguments = { a = "{{input.n}}", b = 1 }
"#;

fn config(url: &str, store: &std::path::Path) -> TempFile {
    TempFile::new(&format!(
        "instance = \"crash\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\n\
         [[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"tickets\"\n\
         arguments = {{ project = \"ops\" }}\n\
         [[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"hooks\"\n\
         arguments = {{ project = \"hooks\" }}\ndelivery = [\"webhook\"]\n{WORKFLOWS}",
        store.display()
    ))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn now_secs() -> i64 {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    now.map_or(0, |d| d.as_secs() as i64)
}

/// `agentd tool call TOOL ARGUMENTS`: its result when it answered.
async fn call(file: &TempFile, tool: &str, arguments: Value) -> Option<Value> {
    let arguments = arguments.to_string();
    let out = agentd_async(file, &["tool", "call", tool, &arguments]).await;
    match out.status.success() {
        true => Some(serde_json::from_slice(&out.stdout).expect("a JSON result")),
        false => None,
    }
}

/// [`call`] of a daemon that is up: its result.
async fn ask(file: &TempFile, tool: &str, arguments: Value) -> Value {
    let what = format!("{tool} {arguments}");
    call(file, tool, arguments).await.expect(&what)
}

/// Where the webhook senders deliver, as the daemon now up says.
#[derive(Clone)]
struct Route {
    addr: String,
    path: String,
    secret: Arc<Secret>,
    subscription: String,
}

impl Route {
    /// The route of the webhook binding of the daemon up, once it is armed. Its secret and
    /// subscription are the server's: of those the server holds (a restart on another port
    /// makes another subscription; one on a port used before finds the one made then), the
    /// pair a probe delivery is taken with.
    async fn of(daemon: &mut Daemon, server: &ReferenceServer, incarnation: u64) -> Self {
        let deadline = Instant::now() + WITHIN;
        while !daemon
            .matching("mcp.events.armed", Some("ref"))
            .any(|(_, l)| l["mode"] == "webhook")
        {
            assert!(
                Instant::now() < deadline,
                "the webhook binding not armed ({incarnation}): {:#?}",
                daemon.of_server("ref").collect::<Vec<_>>()
            );
            daemon.drain(Duration::from_millis(100));
        }
        let newest_first = |all: Vec<String>| {
            let mut seen = BTreeSet::new();
            let all = all.into_iter().rev();
            all.filter(|s| seen.insert(s.clone())).collect::<Vec<_>>()
        };
        let log = server.log();
        let secrets = newest_first(
            log.iter()
                .filter(|l| l.method.as_deref() == Some("events/subscribe"))
                .filter_map(|l| l.body["params"]["delivery"]["secret"].as_str())
                .map(str::to_owned)
                .collect(),
        );
        let subscriptions = newest_first(
            server
                .delivered()
                .iter()
                .filter_map(|(id, _)| id.strip_prefix("msg_verify_"))
                .map(str::to_owned)
                .collect(),
        );
        let arguments = json!({"project": "hooks"});
        let arguments = arguments.as_object().expect("an object");
        let key = mcp_events::binding::key_of("ref", "ticket.created", "hooks", arguments);
        let addr = daemon.listener();
        for (i, secret) in secrets.iter().take(4).enumerate() {
            for subscription in &subscriptions {
                let route = Self {
                    addr: addr.clone(),
                    path: format!("/hooks/_mcp/{key}"),
                    secret: Arc::new(Secret::parse(secret).expect("a secret")),
                    subscription: subscription.clone(),
                };
                let probe = format!("probe-{incarnation}-{i}-{subscription}");
                if route.deliver(&probe, 0).await == 200 {
                    return route;
                }
            }
        }
        panic!("no secret and subscription the daemon takes ({incarnation})");
    }

    /// Delivers occurrence `id` once, signed now: the status answered (0 for none).
    async fn deliver(&self, id: &str, n: u64) -> u16 {
        let timestamp = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let body = json!({"eventId": id, "name": "ticket.created", "timestamp": timestamp,
                          "data": {"ok": true, "n": n}})
        .to_string();
        let ts = now_secs();
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             webhook-id: {id}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {}\r\n\
             X-MCP-Subscription-Id: {}\r\nContent-Length: {}\r\n\r\n",
            self.path,
            self.addr,
            self.secret.sign(id, ts, body.as_bytes()),
            self.subscription,
            body.len()
        );
        let exchange = async {
            let mut tcp = TcpStream::connect(&self.addr).await.ok()?;
            tcp.write_all(head.as_bytes()).await.ok()?;
            tcp.write_all(body.as_bytes()).await.ok()?;
            let mut got = Vec::new();
            let _ = tcp.read_to_end(&mut got).await;
            let text = String::from_utf8_lossy(&got).into_owned();
            text.split(' ').nth(1).and_then(|c| c.parse().ok())
        };
        let answered = tokio::time::timeout(WITHIN, exchange).await;
        answered.expect("an answer or a close").unwrap_or(0)
    }
}

/// What was acknowledged, and what was sent and not.
#[derive(Default)]
struct Acked {
    /// Webhook deliveries answered 200, by event id, and of those the ones no check has
    /// looked for yet; and those that were not, with their number, to be sent again.
    delivered: BTreeSet<String>,
    unchecked: Vec<String>,
    undelivered: BTreeMap<String, u64>,
    /// The statuses of the deliveries not answered 200 (0: none, the daemon gone).
    turned: BTreeMap<u16, u64>,
    /// `memory.set` keys with their value, `memory.push` values, `artifact.create` names,
    /// in the order they were answered.
    set: Vec<(String, u64)>,
    pushed: BTreeSet<u64>,
    artifacts: Vec<String>,
    /// Runs `agentd workflow run` answered, in that order.
    runs: Vec<String>,
    /// The ids of the occurrences the server emitted.
    emitted: Vec<String>,
}

/// What the checks have seen: both streams as far as read, the occurrence (with its
/// workflow) of each event-started run, every run by its workflow, the last run listed,
/// the occurrences whose run is still to be seen, and how far the checks of the emitted
/// occurrences and of the writes went.
struct Seen {
    tickets: Stream,
    hooks: Stream,
    started: BTreeSet<(String, String)>,
    runs: BTreeMap<String, String>,
    listed: Option<String>,
    unstarted: Vec<(String, String)>,
    checked_emitted: usize,
    checked_set: usize,
    checked_artifacts: usize,
    checked_runs: usize,
}

impl Seen {
    fn new(store: &std::path::Path) -> Self {
        Self {
            tickets: Stream::new(store, "tickets", "on_ticket"),
            hooks: Stream::new(store, "hooks", "on_hook"),
            started: BTreeSet::new(),
            runs: BTreeMap::new(),
            listed: None,
            unstarted: Vec::new(),
            checked_emitted: 0,
            checked_set: 0,
            checked_artifacts: 0,
            checked_runs: 0,
        }
    }
}

/// A stream of the store as far as the checks read it: the ids of its records, each once.
struct Stream {
    db: std::path::PathBuf,
    name: &'static str,
    /// The workflow each of its occurrences starts.
    workflow: &'static str,
    /// The last sequence number read.
    after: i64,
    ids: BTreeSet<String>,
}

impl Stream {
    fn new(store: &std::path::Path, name: &'static str, workflow: &'static str) -> Self {
        Self {
            db: store.join("agentd.sqlite3"),
            name,
            workflow,
            after: 0,
            ids: BTreeSet::new(),
        }
    }

    /// Reads the records appended since the last read: their ids, each new to the stream.
    /// Those read before must all still be there.
    fn read(&mut self) -> Vec<String> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = rusqlite::Connection::open_with_flags(&self.db, flags).expect("the store");
        // One read transaction: the count and the new records of one snapshot.
        db.execute_batch("BEGIN").expect("a read transaction");
        let count = "SELECT COUNT(*) FROM events WHERE stream = ?1 AND seq <= ?2";
        let kept: i64 = db
            .query_row(count, (self.name, self.after), |r| r.get(0))
            .expect("a count");
        let read = i64::try_from(self.ids.len()).expect("a count");
        assert_eq!(kept, read, "records of {} gone", self.name);
        let mut select = db
            .prepare("SELECT seq, body FROM events WHERE stream = ?1 AND seq > ?2 ORDER BY seq")
            .expect("a query");
        let rows = select
            .query_map((self.name, self.after), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .expect("the records");
        let mut new = Vec::new();
        for row in rows {
            let (seq, body) = row.expect("a record");
            let record: Value = serde_json::from_slice(&body).expect("a JSON record");
            let id = record["id"].as_str().expect("a record id").to_owned();
            assert!(self.ids.insert(id.clone()), "{id} twice in {}", self.name);
            self.after = seq;
            new.push(id);
        }
        new
    }

    /// [`Self::read`], the occurrences read added to those whose run is to be seen.
    fn read_into(&mut self, unstarted: &mut Vec<(String, String)>) {
        let workflow = self.workflow;
        let new = self.read();
        unstarted.extend(new.into_iter().map(|id| (workflow.to_owned(), id)));
    }
}

/// What was sent, counted across rounds.
#[derive(Debug, Default)]
struct Counts {
    deliveries_sent: AtomicU64,
    deliveries_sent_again: AtomicU64,
    tool_writes: AtomicU64,
    manual_runs: AtomicU64,
}

/// The load of one round, until `stop`.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What the end found.
struct Settled {
    runs: usize,
    completed: usize,
    calls: usize,
    keys: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_or_duplicated_across_random_sigkills() {
    let rounds = env_u64("AGENTD_CRASH_ROUNDS").unwrap_or(3);
    let seed = env_u64("AGENTD_CRASH_SEED").unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64)
    });
    println!("crash: seed {seed}, {rounds} rounds (AGENTD_CRASH_SEED={seed} draws them again)");
    let mut rng = Rng::new(seed);

    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options.poll_ms = 100;
    let server = Arc::new(ReferenceServer::start(options).await);
    let dir = store_dir("crash");
    let file = Arc::new(config(&server.url(), dir.path()));
    let acked = Arc::new(Mutex::new(Acked::default()));
    let counts = Arc::new(Counts::default());
    let made = Arc::new(AtomicU64::new(0));
    let mut seen = Seen::new(dir.path());
    let began = Instant::now();
    let (mut kills, mut early) = (0, 0);

    for round in 0..rounds {
        let mut daemon = Daemon::run(&file);
        if rng.chance(EARLY_PERCENT) {
            // Killed while it restores: the runs it resumes, the bindings it arms.
            tokio::time::sleep(rng.between(Duration::ZERO, RESTORE_MAX)).await;
            daemon.kill();
            (kills, early) = (kills + 1, early + 1);
            continue;
        }
        until_up(&file);
        let route = Route::of(&mut daemon, &server, round).await;
        check(&file, &route, &acked, &counts, &mut seen).await;
        progress(round, kills, early, &acked.lock().unwrap(), &seen, began);

        let draws: Vec<u64> = (0..64).map(|_| rng.next_u64()).collect();
        let load = load(&file, &server, &route, &acked, &counts, &made, draws);
        tokio::time::sleep(rng.between(Duration::from_millis(50), LOAD_MAX)).await;
        daemon.kill();
        kills += 1;
        load.stop.store(true, Ordering::SeqCst);
        for task in load.tasks {
            task.await.expect("a load task");
        }
    }

    // The last restart: everything checked, then everything settled.
    let mut daemon = Daemon::run(&file);
    until_up(&file);
    let route = Route::of(&mut daemon, &server, rounds).await;
    check(&file, &route, &acked, &counts, &mut seen).await;
    let settled = settle(&file, &server, &acked, &mut seen).await;
    assert!(daemon.terminate().success());

    let acked = acked.lock().unwrap();
    let count = |n: &AtomicU64| n.load(Ordering::SeqCst);
    println!(
        "crash: seed {seed}: {rounds} rounds, {kills} kills ({early} while restoring); \
         webhook: {} deliveries sent, {} not answered 200 (by status: {:?}) and sent again, \
         {} acknowledged (200), {} in the stream; poll: {} occurrences emitted, {} appended; tools: {} writes sent, {} \
         acknowledged ({} set, {} pushed, {} artifacts), all found; runs: {} started by \
         occurrences, {} manual sent, {} acknowledged, {} in all, {} completed; the server saw \
         {} mcp.tool calls under {} distinct idempotency keys",
        count(&counts.deliveries_sent),
        count(&counts.deliveries_sent_again),
        acked.turned,
        acked.delivered.len(),
        seen.hooks.ids.len(),
        acked.emitted.len(),
        seen.tickets.ids.len(),
        count(&counts.tool_writes),
        acked.set.len() + acked.pushed.len() + acked.artifacts.len(),
        acked.set.len(),
        acked.pushed.len(),
        acked.artifacts.len(),
        seen.started.len(),
        count(&counts.manual_runs),
        acked.runs.len(),
        settled.runs,
        settled.completed,
        settled.calls,
        settled.keys,
    );
    drop(dir);
}

/// What the checks found so far, a line a round: the figures of a run cut short.
fn progress(round: u64, kills: u64, early: u64, acked: &Acked, seen: &Seen, began: Instant) {
    println!(
        "crash: round {round} checked at {} s: {kills} kills ({early} while restoring); {} deliveries \
         acknowledged, all found once; {} occurrences emitted, all appended once; {} tool \
         writes acknowledged, all found; {} runs, {} started by occurrences (one each), {} \
         manual acknowledged, all there",
        began.elapsed().as_secs(),
        acked.delivered.len(),
        acked.emitted.len(),
        acked.set.len() + acked.pushed.len() + acked.artifacts.len(),
        seen.runs.len(),
        seen.started.len(),
        acked.runs.len(),
    );
}

/// Starts the round's load on the daemon up: the server emitting, the webhook senders, the
/// tool writes (of the kinds `draws` says) and the manual runs, each until `stop`.
fn load(
    file: &Arc<TempFile>,
    server: &Arc<ReferenceServer>,
    route: &Route,
    acked: &Arc<Mutex<Acked>>,
    counts: &Arc<Counts>,
    made: &Arc<AtomicU64>,
    draws: Vec<u64>,
) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    {
        let (server, stop, acked) = (server.clone(), stop.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let id = server.emit("ticket.created", json!({"n": n}));
                acked.lock().unwrap().emitted.push(id);
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    for _ in 0..SENDERS {
        let (route, stop, acked) = (route.clone(), stop.clone(), acked.clone());
        let (made, counts) = (made.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let n = made.fetch_add(1, Ordering::SeqCst) + 1;
                let id = format!("b-{n}");
                counts.deliveries_sent.fetch_add(1, Ordering::SeqCst);
                let status = route.deliver(&id, n).await;
                {
                    let mut acked = acked.lock().unwrap();
                    if status == 200 {
                        acked.delivered.insert(id.clone());
                        acked.unchecked.push(id);
                    } else {
                        // Sent again after the restart.
                        *acked.turned.entry(status).or_default() += 1;
                        acked.undelivered.insert(id, n);
                    }
                }
                if status == 0 {
                    // The daemon is gone.
                    break;
                }
                tokio::time::sleep(PACE).await;
            }
        }));
    }
    {
        let (file, stop, acked) = (file.clone(), stop.clone(), acked.clone());
        let (made, counts) = (made.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            for draw in draws.iter().cycle() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let n = made.fetch_add(1, Ordering::SeqCst) + 1;
                counts.tool_writes.fetch_add(1, Ordering::SeqCst);
                let (tool, arguments) = match draw % 3 {
                    0 => ("memory.set", json!({"key": format!("k-{n}"), "value": n})),
                    1 => ("memory.push", json!({"key": "pushed", "value": n})),
                    _ => (
                        "artifact.create",
                        json!({"name": format!("a-{n}"), "media_type": "text/plain",
                               "text": format!("artifact {n}")}),
                    ),
                };
                if call(&file, tool, arguments).await.is_none() {
                    // The daemon is gone.
                    break;
                }
                let mut acked = acked.lock().unwrap();
                match draw % 3 {
                    0 => acked.set.push((format!("k-{n}"), n)),
                    1 => {
                        acked.pushed.insert(n);
                    }
                    _ => acked.artifacts.push(format!("a-{n}")),
                }
            }
        }));
    }
    {
        let (file, stop, acked) = (file.clone(), stop.clone(), acked.clone());
        let (made, counts) = (made.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let n = made.fetch_add(1, Ordering::SeqCst) + 1;
                counts.manual_runs.fetch_add(1, Ordering::SeqCst);
                let input = json!({"workflow": "manual", "input": {"n": n}});
                let Some(run) = call(&file, "workflow.run", input).await else {
                    // The daemon is gone.
                    break;
                };
                let id = run["run"].as_str().expect("a run id").to_owned();
                acked.lock().unwrap().runs.push(id);
            }
        }));
    }
    Load { stop, tasks }
}

/// The record id of the server's occurrence `id`, of a delivery `id`.
fn ticket(id: &str) -> String {
    format!("mcp/ref/ticket.created/{id}")
}
fn hook(id: &str) -> String {
    format!("mcp/ref/ticket.created/{id}")
}

/// Waits, at most [`WITHIN`], until `ask` answers `Ok`; an `Err` says what it saw instead.
async fn within<T>(what: &str, mut ask: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + WITHIN;
    loop {
        let seen = match ask().await {
            Ok(answer) => return answer,
            Err(seen) => seen,
        };
        assert!(
            Instant::now() < deadline,
            "not within {WITHIN:?}: {what}: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The checks after a restart, the daemon up: nothing acknowledged lost, nothing twice;
/// the deliveries not taken sent again, and taken.
async fn check(
    file: &TempFile,
    route: &Route,
    acked: &Mutex<Acked>,
    counts: &Counts,
    seen: &mut Seen,
) {
    // Every delivery answered 200 was appended before it was answered.
    seen.hooks.read_into(&mut seen.unstarted);
    let lost = |seen: &Seen, ids: &[String]| {
        let lost = ids.iter().filter(|id| !seen.hooks.ids.contains(&hook(id)));
        lost.cloned().collect::<Vec<String>>()
    };
    let unchecked = std::mem::take(&mut acked.lock().unwrap().unchecked);
    let gone = lost(seen, &unchecked);
    assert!(
        gone.is_empty(),
        "deliveries answered 200 and lost: {gone:?}"
    );
    // Those not answered are sent again, as a sender does; a 200 now, once.
    let again = std::mem::take(&mut acked.lock().unwrap().undelivered);
    let mut taken = Vec::new();
    for (id, n) in again {
        counts.deliveries_sent_again.fetch_add(1, Ordering::SeqCst);
        within(&format!("{id} taken"), async || {
            match route.deliver(&id, n).await {
                200 => Ok(()),
                status => Err(format!("answered {status}")),
            }
        })
        .await;
        acked.lock().unwrap().delivered.insert(id.clone());
        taken.push(id);
    }
    seen.hooks.read_into(&mut seen.unstarted);
    let gone = lost(seen, &taken);
    assert!(
        gone.is_empty(),
        "deliveries sent again, answered 200 and lost: {gone:?}"
    );

    // Every occurrence the server emitted is appended once, from the cursor kept.
    let (emitted, all): (Vec<String>, usize) = {
        let acked = acked.lock().unwrap();
        let emitted = acked.emitted[seen.checked_emitted..].iter();
        (emitted.map(|i| ticket(i)).collect(), acked.emitted.len())
    };
    within("every occurrence emitted appended", async || {
        seen.tickets.read_into(&mut seen.unstarted);
        let have = &seen.tickets.ids;
        let missing: Vec<&String> = emitted.iter().filter(|id| !have.contains(*id)).collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(format!("missing {missing:?}")),
        }
    })
    .await;
    seen.checked_emitted = all;
    assert_eq!(seen.tickets.ids.len(), all, "only the occurrences emitted");

    // Every write answered is there.
    let (set, pushed, artifacts, runs) = {
        let acked = acked.lock().unwrap();
        (
            acked.set[seen.checked_set..].to_vec(),
            acked.pushed.clone(),
            acked.artifacts[seen.checked_artifacts..].to_vec(),
            acked.runs[seen.checked_runs..].to_vec(),
        )
    };
    for (key, n) in &set {
        let got = ask(file, "memory.get", json!({"key": key})).await;
        assert_eq!(got["value"], json!(n), "memory.set {key} answered and lost");
    }
    seen.checked_set += set.len();
    let list = ask(file, "memory.get", json!({"key": "pushed"})).await;
    let list: Vec<u64> = serde_json::from_value(list["value"].clone()).unwrap_or_default();
    let distinct: BTreeSet<u64> = list.iter().copied().collect();
    assert_eq!(distinct.len(), list.len(), "a push twice: {list:?}");
    let missing: Vec<&u64> = pushed.difference(&distinct).collect();
    assert!(missing.is_empty(), "pushes answered and lost: {missing:?}");
    for name in &artifacts {
        let got = call(file, "artifact.get", json!({"name": name})).await;
        assert!(got.is_some(), "artifact {name} answered and lost");
    }
    seen.checked_artifacts += artifacts.len();
    for run in &runs {
        let got = call(file, "workflow.status", json!({"run": run})).await;
        assert!(got.is_some(), "run {run} answered and lost");
    }
    seen.checked_runs += runs.len();

    // Every occurrence of either stream started one run.
    within("a run of every occurrence", async || {
        list_runs(file, seen).await;
        let started = &seen.started;
        seen.unstarted.retain(|o| !started.contains(o));
        match seen.unstarted.is_empty() {
            true => Ok(()),
            false => Err(format!("no run of {:?}", seen.unstarted)),
        }
    })
    .await;
}

/// Lists the runs after the last listed, and reads the occurrence of each event-started
/// one: each occurrence starts one run.
async fn list_runs(file: &TempFile, seen: &mut Seen) {
    loop {
        let mut arguments = json!({"limit": 100});
        if let Some(after) = &seen.listed {
            arguments["after"] = json!(after);
        }
        let page = ask(file, "workflow.list", arguments).await;
        let runs = page["runs"].as_array().expect("runs").clone();
        for run in &runs {
            let (id, workflow) = (
                run["run"].as_str().unwrap(),
                run["workflow"].as_str().unwrap(),
            );
            seen.runs.insert(id.to_owned(), workflow.to_owned());
            if workflow != "manual" {
                let status = ask(file, "workflow.status", json!({"run": id})).await;
                let occurrence = status["input"]["id"].as_str().expect("an occurrence");
                let started = (workflow.to_owned(), occurrence.to_owned());
                let twice = !seen.started.insert(started.clone());
                assert!(!twice, "{started:?} started a second run, {id}");
            }
            seen.listed = Some(id.to_owned());
        }
        if page["next"].is_null() {
            return;
        }
    }
}

/// The end, the daemon up and checked: every run completes; the server saw the
/// idempotency key of each and of no other.
async fn settle(
    file: &TempFile,
    server: &ReferenceServer,
    acked: &Mutex<Acked>,
    seen: &mut Seen,
) -> Settled {
    let unsettled = async || {
        for status in ["running", "paused"] {
            let page = ask(file, "workflow.list", json!({"status": status, "limit": 1})).await;
            if !page["runs"].as_array().unwrap().is_empty() {
                return Err(format!("runs {status}: {page}"));
            }
        }
        Ok(())
    };
    within("every run ended", unsettled).await;
    list_runs(file, seen).await;
    for status in ["failed", "cancelled"] {
        let page = ask(file, "workflow.list", json!({"status": status})).await;
        assert_eq!(page["runs"], json!([]), "runs {status}");
    }
    let log = server.log();
    let keys: Vec<String> = log
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"))
        .map(|l| {
            l.body["params"]["_meta"]["agent/idempotency_key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let distinct: BTreeSet<&String> = keys.iter().collect();
    let expected: BTreeSet<String> = seen.runs.keys().map(|run| format!("{run}:add")).collect();
    assert_eq!(
        distinct,
        expected.iter().collect(),
        "the keys the server saw are the runs'"
    );
    let acked = acked.lock().unwrap();
    let manual: BTreeSet<&String> = seen
        .runs
        .iter()
        .filter(|(_, w)| *w == "manual")
        .map(|(r, _)| r)
        .collect();
    assert!(
        acked.runs.iter().all(|r| manual.contains(r)),
        "every run answered exists"
    );
    // The streams hold what they held, and no more.
    assert_eq!(
        seen.tickets.read(),
        Vec::<String>::new(),
        "tickets after the end"
    );
    assert_eq!(
        seen.hooks.read(),
        Vec::<String>::new(),
        "hooks after the end"
    );
    Settled {
        runs: seen.runs.len(),
        completed: seen.runs.len(),
        calls: keys.len(),
        keys: distinct.len(),
    }
}
