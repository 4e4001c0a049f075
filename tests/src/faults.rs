//! A fault-injecting TCP proxy on loopback, for tests that put it between a client and a
//! server: each connection it accepts gets a [`Fault`], scripted in order ([`Proxy::push`])
//! or drawn by a policy ([`Proxy::policy`], e.g. [`random_fault`] over a seeded [`Rng`]);
//! it can stop accepting altogether, so that dials are refused ([`Proxy::refuse`]), and end
//! the connections it holds ([`Proxy::interrupt`], [`Proxy::calm`]).
//!
//! ```no_run
//! # async fn demo(upstream: std::net::SocketAddr) -> std::io::Result<()> {
//! use agentd_tests::faults::{Fault, Proxy};
//!
//! let proxy = Proxy::start(upstream).await?;
//! proxy.push(Fault::CutBody); // the next connection: its first body cut half-way
//! proxy.push(Fault::Reset { after: 0 }); // the one after: reset as soon as it is accepted
//! let url = format!("http://{}/mcp", proxy.addr());
//! # Ok(()) }
//! ```
//!
//! Faults act on the bytes the server sends back (an answer, an event stream); what the
//! client sends is passed on as it comes until the fault fires. A connection ends when
//! either side closes it (the other side is closed too; an error there is passed on as a
//! reset), when its fault ends it, or when the proxy is dropped. The proxy binds
//! 127.0.0.1 port 0 and runs on the tokio runtime it was started on.

mod cut;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use cut::Cut;

/// What the proxy does to one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Passes bytes both ways, untouched.
    Pass,
    /// Resets both sides (RST) once `after` bytes have come from the server; with 0, as
    /// soon as the connection is accepted, before the server is dialed.
    Reset {
        /// The server's bytes passed before the reset.
        after: usize,
    },
    /// Passes `after` bytes from the server, then nothing either way for `hold`, then
    /// closes both sides (the kernel resets a side whose bytes were left unread). With 0,
    /// the client's request reaches the server and its answer does not come.
    Stall {
        /// The server's bytes passed before the stall.
        after: usize,
        /// How long the stall lasts before the connection is closed.
        hold: Duration,
    },
    /// Closes both sides half-way through the first body the server sends: at half its
    /// `Content-Length`, just after the `data:` of its first event (an event stream), or
    /// half-way through its first chunk. An answer without a body is passed over.
    CutBody,
    /// Delays each byte from the server by this much, one byte at a time.
    DelayBytes(Duration),
    /// Closes both sides once this many bytes have come from the server.
    CloseAfter(usize),
}

impl Fault {
    /// The fault's name, as [`Stats`] counts it: `pass`, `reset`, `stall`, `cut_body`,
    /// `delay_bytes`, `close_after`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Reset { .. } => "reset",
            Self::Stall { .. } => "stall",
            Self::CutBody => "cut_body",
            Self::DelayBytes(_) => "delay_bytes",
            Self::CloseAfter(_) => "close_after",
        }
    }
}

/// What a proxy has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Connections accepted.
    pub accepted: u64,
    /// Faults given to connections, by [`Fault::kind`] (`pass` included).
    pub drawn: BTreeMap<&'static str, u64>,
    /// Faults that acted, by kind: a `Reset { after: 5000 }` on a connection that closes
    /// sooner never does. A [`Fault::DelayBytes`] acts at its first byte.
    pub fired: BTreeMap<&'static str, u64>,
    /// Times the proxy stopped accepting ([`Proxy::refuse`]).
    pub refusals: u64,
    /// Live connections ended by [`Proxy::interrupt`] or [`Proxy::calm`].
    pub interrupted: u64,
}

impl Stats {
    /// Every fault that acted, of every kind.
    pub fn faults(&self) -> u64 {
        self.fired.values().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.accepted += other.accepted;
        self.refusals += other.refusals;
        self.interrupted += other.interrupted;
        for (kind, n) in &other.drawn {
            *self.drawn.entry(kind).or_default() += n;
        }
        for (kind, n) in &other.fired {
            *self.fired.entry(kind).or_default() += n;
        }
    }
}

/// A small seeded random number generator (SplitMix64): the same seed draws the same
/// faults.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// `true` `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A duration in `lo..=hi`, to the millisecond.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }
}

/// A fault drawn for a soak: [`Fault::Pass`] and [`Fault::CutBody`] one time in five each,
/// each other kind three times in twenty, its numbers drawn too: resets, stalls and closes
/// within the first 2 KiB from the server (a reset at once one time in four), stalls of
/// 0.2 to 3 s, delays of 1 or 2 ms a byte.
pub fn random_fault(rng: &mut Rng) -> Fault {
    let after = |rng: &mut Rng| rng.below(2048) as usize;
    match rng.below(20) {
        0..=3 => Fault::Pass,
        4..=7 => Fault::CutBody,
        8..=10 => Fault::Reset {
            after: if rng.chance(25) { 0 } else { after(rng) },
        },
        11..=13 => Fault::Stall {
            after: after(rng),
            hold: rng.between(Duration::from_millis(200), Duration::from_secs(3)),
        },
        14..=16 => Fault::DelayBytes(Duration::from_millis(1 + rng.below(2))),
        _ => Fault::CloseAfter(1 + after(rng)),
    }
}

/// A policy: the fault of each connection once the scripted ones are spent.
type Policy = Box<dyn FnMut() -> Fault + Send>;

/// How the connections are chosen their faults.
struct Script {
    queue: VecDeque<Fault>,
    policy: Option<Policy>,
}

impl Script {
    fn next(&mut self) -> Fault {
        match (self.queue.pop_front(), &mut self.policy) {
            (Some(fault), _) => fault,
            (None, Some(policy)) => policy(),
            (None, None) => Fault::Pass,
        }
    }
}

/// Whether the proxy accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accept {
    Yes,
    Refusing,
    Stopped,
}

/// How many times, [`REBIND_EVERY`] apart, the proxy tries to listen again on its address
/// once told to accept again, before it gives up with a [`RebindError`].
pub const REBIND_TRIES: u32 = 100;

/// How long the proxy waits between two tries to listen again.
pub const REBIND_EVERY: Duration = Duration::from_millis(20);

/// The proxy could not listen again on its address: it was taken at each of
/// [`REBIND_TRIES`] tries. The proxy refuses dials until told to accept again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebindError {
    /// The proxy's address.
    pub addr: SocketAddr,
    /// The tries made.
    pub tries: u32,
    /// What the last try failed with.
    pub kind: std::io::ErrorKind,
}

impl std::fmt::Display for RebindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "could not listen on {} again in {} tries: {}",
            self.addr, self.tries, self.kind
        )
    }
}

impl std::error::Error for RebindError {}

/// Whether the proxy's listening socket is open.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Listening {
    Open,
    Closed,
    /// Told to accept again; not listening yet.
    Opening,
    Failed(RebindError),
}

/// An order to end live connections: each order has a new serial.
#[derive(Debug, Clone, Copy, Default)]
struct End {
    serial: u64,
    /// Only the connections carrying a fault other than [`Fault::Pass`].
    faulted_only: bool,
}

/// What the proxy's tasks share.
struct Shared {
    upstream: SocketAddr,
    script: Mutex<Script>,
    stats: Mutex<Stats>,
    live: AtomicUsize,
    /// Whether the listening socket is open. [`Proxy::refuse`] changes what the accept loop
    /// is told only while holding this, and the loop says the socket is open or failed only
    /// while holding it and still told to accept: the two never disagree.
    listening: watch::Sender<Listening>,
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.stats.lock().expect("stats"));
    }
}

/// A fault-injecting TCP proxy in front of one server; dropping it stops it and resets
/// every connection it holds.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: watch::Sender<Accept>,
    end: watch::Sender<End>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .field("live", &self.live())
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy on 127.0.0.1 (an OS-chosen port) in front of `upstream`, passing every
    /// connection untouched until told otherwise.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            script: Mutex::new(Script {
                queue: VecDeque::new(),
                policy: None,
            }),
            stats: Mutex::default(),
            live: AtomicUsize::new(0),
            listening: watch::Sender::new(Listening::Open),
        });
        let (accept, accepting) = watch::channel(Accept::Yes);
        let (end, ends) = watch::channel(End::default());
        tokio::spawn(accept_loop(listener, addr, shared.clone(), accepting, ends));
        Ok(Self {
            addr,
            shared,
            accept,
            end,
        })
    }

    /// The address clients dial.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next connection accepted, after those pushed before, gets `fault`.
    pub fn push(&self, fault: Fault) {
        self.shared
            .script
            .lock()
            .expect("script")
            .queue
            .push_back(fault);
    }

    /// Connections accepted once the pushed faults are spent get what `policy` draws
    /// (until then, and without one, [`Fault::Pass`]).
    pub fn policy(&self, policy: impl FnMut() -> Fault + Send + 'static) {
        self.shared.script.lock().expect("script").policy = Some(Box::new(policy));
    }

    /// With `true`, the proxy closes its listening socket: dials are refused
    /// (`ECONNREFUSED`) and live connections go on. With `false`, it listens again on the
    /// same address, trying again while the port is taken, at most [`REBIND_TRIES`] times
    /// ([`Proxy::listening`] tells how that went).
    pub fn refuse(&self, refusing: bool) {
        let mut was = Accept::Yes;
        self.shared.listening.send_if_modified(|l| {
            let before = l.clone();
            if refusing {
                // Closed from now on, as far as [`Proxy::listening`] tells: the loop closes
                // the socket once it sees the order.
                *l = Listening::Closed;
                was = self.accept.send_replace(Accept::Refusing);
            } else {
                if *l != Listening::Open {
                    *l = Listening::Opening;
                }
                was = self.accept.send_replace(Accept::Yes);
            }
            *l != before
        });
        if refusing && was == Accept::Yes {
            self.shared.count(|s| s.refusals += 1);
        }
    }

    /// Once the proxy is no longer opening its listening socket again after
    /// [`Proxy::refuse`]`(false)`: whether it listens (or was told to refuse), or the typed
    /// error of its last try when it gave up. After `refuse(false)`, `Ok` means a dial is
    /// accepted.
    pub async fn listening(&self) -> Result<(), RebindError> {
        let mut listening = self.shared.listening.subscribe();
        let settled = listening.wait_for(|l| *l != Listening::Opening).await;
        match settled.as_deref() {
            Ok(Listening::Failed(e)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Resets every live connection (a network blip).
    pub fn interrupt(&self) {
        self.end.send_modify(|e| {
            e.serial += 1;
            e.faulted_only = false;
        });
    }

    /// Stops injecting: no more faults pushed or drawn, accepting again, and every live
    /// connection carrying a fault reset; the connections passed untouched go on.
    pub fn calm(&self) {
        {
            let mut script = self.shared.script.lock().expect("script");
            script.queue.clear();
            script.policy = None;
        }
        self.refuse(false);
        self.end.send_modify(|e| {
            e.serial += 1;
            e.faulted_only = true;
        });
    }

    /// How many connections the proxy holds now.
    pub fn live(&self) -> usize {
        self.shared.live.load(Ordering::SeqCst)
    }

    /// What the proxy has done so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats.lock().expect("stats").clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.send_replace(Accept::Stopped);
        self.interrupt();
    }
}

/// Accepts connections while told to, each relayed on a task of its own with the fault the
/// script gives it; refusing, the listening socket is closed, and bound again after.
async fn accept_loop(
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut accepting: watch::Receiver<Accept>,
    ends: watch::Receiver<End>,
) {
    let mut listener = Some(listener);
    // Says how the socket is, unless a newer order came since the loop read its last one
    // (that order is the next to act on).
    let tell = |accepting: &watch::Receiver<Accept>, now: Listening| {
        shared.listening.send_if_modified(|l| {
            let current = matches!(accepting.has_changed(), Ok(false));
            let told = current && *l != now;
            if told {
                *l = now;
            }
            told
        });
    };
    loop {
        let now = *accepting.borrow_and_update();
        match now {
            Accept::Stopped => return,
            Accept::Refusing => {
                listener = None;
                if accepting.changed().await.is_err() {
                    return;
                }
            }
            Accept::Yes => {
                let Some(bound) = &listener else {
                    tokio::select! {
                        bound = rebind(addr) => match bound {
                            Ok(bound) => listener = Some(bound),
                            Err(e) => {
                                tell(&accepting, Listening::Failed(e));
                                // Refusing until told to accept again.
                                if accepting.changed().await.is_err() {
                                    return;
                                }
                            }
                        },
                        changed = accepting.changed() => if changed.is_err() { return },
                    }
                    continue;
                };
                // Still open (told to refuse and to accept again before this loop saw it),
                // or open again.
                tell(&accepting, Listening::Open);
                tokio::select! {
                    accepted = bound.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let fault = shared.script.lock().expect("script").next();
                        shared.count(|s| {
                            s.accepted += 1;
                            *s.drawn.entry(fault.kind()).or_default() += 1;
                        });
                        tokio::spawn(relay(client, fault, shared.clone(), ends.clone()));
                    }
                    changed = accepting.changed() => if changed.is_err() { return },
                }
            }
        }
    }
}

/// Listens on `addr` again, trying again [`REBIND_EVERY`] later while the port is taken,
/// at most [`REBIND_TRIES`] times.
async fn rebind(addr: SocketAddr) -> Result<TcpListener, RebindError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match TcpListener::bind(addr).await {
            Ok(bound) => return Ok(bound),
            Err(e) if tries >= REBIND_TRIES => {
                return Err(RebindError {
                    addr,
                    tries,
                    kind: e.kind(),
                });
            }
            Err(_) => tokio::time::sleep(REBIND_EVERY).await,
        }
    }
}

/// Counts a connection live while it is held.
struct Live(Arc<Shared>);

impl Live {
    fn new(shared: Arc<Shared>) -> Self {
        shared.live.fetch_add(1, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a relayed connection ends.
enum Ending {
    /// Closed (FIN) on both sides.
    Close,
    /// Reset (RST) on both sides.
    Reset,
    /// Held silent, then closed.
    Stall(Duration),
}

/// Resolves once an order to end this connection comes.
async fn ended(ends: &mut watch::Receiver<End>, faulted: bool) {
    loop {
        if ends.changed().await.is_err() {
            return;
        }
        let end = *ends.borrow_and_update();
        if faulted || !end.faulted_only {
            return;
        }
    }
}

/// Relays one connection to the upstream server with `fault`.
async fn relay(
    mut client: TcpStream,
    fault: Fault,
    shared: Arc<Shared>,
    mut ends: watch::Receiver<End>,
) {
    let _live = Live::new(shared.clone());
    ends.borrow_and_update();
    let faulted = fault != Fault::Pass;
    if fault == (Fault::Reset { after: 0 }) {
        shared.count(|s| *s.fired.entry(fault.kind()).or_default() += 1);
        let _ = client.set_zero_linger();
        return;
    }
    let server = tokio::select! {
        server = TcpStream::connect(shared.upstream) => server,
        () = ended(&mut ends, faulted) => {
            shared.count(|s| s.interrupted += 1);
            Err(std::io::ErrorKind::Interrupted.into())
        }
    };
    let Ok(mut server) = server else {
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let ending = {
        let (mut client_read, client_write) = client.split();
        let (server_read, mut server_write) = server.split();
        let up = async {
            match tokio::io::copy(&mut client_read, &mut server_write).await {
                Ok(_) => Ending::Close,
                Err(_) => Ending::Reset,
            }
        };
        tokio::select! {
            ending = up => ending,
            ending = down(server_read, client_write, &fault, &shared) => ending,
            () = ended(&mut ends, faulted) => {
                shared.count(|s| s.interrupted += 1);
                Ending::Reset
            }
        }
    };
    match ending {
        Ending::Close => {}
        Ending::Reset => {
            let _ = client.set_zero_linger();
            let _ = server.set_zero_linger();
        }
        Ending::Stall(hold) => {
            tokio::select! {
                () = tokio::time::sleep(hold) => {}
                () = ended(&mut ends, faulted) => {
                    shared.count(|s| s.interrupted += 1);
                    let _ = client.set_zero_linger();
                    let _ = server.set_zero_linger();
                }
            }
        }
    }
}

/// Passes the server's bytes to the client as `fault` lets them: how the connection ends.
async fn down(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    fault: &Fault,
    shared: &Shared,
) -> Ending {
    let fired = || shared.count(|s| *s.fired.entry(fault.kind()).or_default() += 1);
    let mut buf = vec![0; 16 * 1024];
    let mut sent = 0;
    let mut cut = Cut::default();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => return Ending::Close,
            Ok(n) => n,
            Err(_) => return Ending::Reset,
        };
        let bytes = &buf[..n];
        // How many of these bytes pass, and how the connection ends after them.
        let (pass, then) = match fault {
            Fault::Pass => (n, None),
            Fault::Reset { after } => past(*after, sent, n, Ending::Reset),
            Fault::CloseAfter(after) => past(*after, sent, n, Ending::Close),
            Fault::Stall { after, hold } => past(*after, sent, n, Ending::Stall(*hold)),
            Fault::CutBody => match cut.feed(bytes) {
                Some(at) => (at, Some(Ending::Close)),
                None => (n, None),
            },
            Fault::DelayBytes(each) => {
                if sent == 0 {
                    fired();
                }
                for byte in bytes {
                    tokio::time::sleep(*each).await;
                    if to.write_all(std::slice::from_ref(byte)).await.is_err() {
                        return Ending::Reset;
                    }
                }
                sent += n;
                continue;
            }
        };
        if to.write_all(&bytes[..pass]).await.is_err() {
            return Ending::Reset;
        }
        sent += pass;
        if let Some(ending) = then {
            fired();
            return ending;
        }
    }
}

/// With `sent` bytes passed and `n` more come, a fault that acts `after` bytes: how many of
/// them pass, and the ending once it acts.
fn past(after: usize, sent: usize, n: usize, ending: Ending) -> (usize, Option<Ending>) {
    let room = after.saturating_sub(sent);
    if n >= room {
        (room, Some(ending))
    } else {
        (n, None)
    }
}
