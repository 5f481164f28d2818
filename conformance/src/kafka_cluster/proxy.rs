//! A TCP proxy in front of one Kafka listener, whose links the nemesis can
//! hold or cut: a listener on 127.0.0.1 that forwards each connection to
//! one upstream address. Two uses:
//!
//! - Each broker reaches the controller through a proxy of its own, so a
//!   broker can be partitioned from the controller while it still serves
//!   clients and followers: the whole proxy's link is set ([`Proxy::set`]).
//! - Each broker's inter-broker listener (the one its followers fetch
//!   from) is behind a proxy, so that the link from one broker to another
//!   can be held or cut alone ([`Proxy::set_from`]). Every peer connects to
//!   the same advertised address, so the source address does not say who
//!   connects; the proxy reads the header of each connection's first
//!   request instead. Kafka's inter-broker clients name their broker in
//!   their client id: a replica fetcher is `broker-<id>-fetcher-<n>`
//!   (`ReplicaFetcherManager.createFetcherThread`, Kafka 4.4).
//!
//! A link is:
//!
//! - `Open`: bytes flow both ways.
//! - `Held`: nothing is read or written; connections stay open, so the
//!   peers see silence (their requests time out), as behind a dead switch.
//! - `Cut`: every open connection is shut down and new ones are closed at
//!   once, as behind a firewall that resets.
//!
//! A connection whose first bytes are not a Kafka request header, or that
//! names no broker, has no source: only the whole proxy's link applies to
//! it. Nothing a peer sends can make the proxy panic.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Result;

/// Ordered from the least to the most severe: a connection takes the most
/// severe of its proxy's link and its source's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Link {
    Open = 0,
    Held = 1,
    Cut = 2,
}

impl Link {
    fn from(v: u8) -> Link {
        match v {
            1 => Link::Held,
            2 => Link::Cut,
            _ => Link::Open,
        }
    }
}

/// How often a waiting thread looks at the link's state again.
const POLL: Duration = Duration::from_millis(50);

/// How long the proxy waits for a connection's first request header; a
/// connection that has not sent one by then is forwarded without a source.
const HEADER_WAIT: Duration = Duration::from_secs(2);

/// Kafka's largest request by default (`socket.request.max.bytes`).
const MAX_REQUEST: i32 = 100 * 1024 * 1024;

/// What the first bytes of a connection say, read as a Kafka request:
/// `int32 size, int16 api_key, int16 api_version, int32 correlation_id,
/// nullable string client_id` (an `int16` length, -1 for null, then UTF-8).
/// Request header versions 1 and 2 both start so (version 2 adds tagged
/// fields after the client id, and keeps the client id non-compact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Header {
    /// The bytes so far are a prefix of a header.
    Short,
    /// A header, with its client id (None: null).
    ClientId(Option<String>),
    /// Not a Kafka request header.
    Malformed(&'static str),
}

/// The header at the start of `bytes`.
pub fn read_header(bytes: &[u8]) -> Header {
    let i16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
    };
    let Some(size) = bytes
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    else {
        return Header::Short;
    };
    // api_key, api_version, correlation_id and the client id's length.
    if size < 10 {
        return Header::Malformed("request shorter than a header");
    }
    if size > MAX_REQUEST {
        return Header::Malformed("request larger than Kafka takes");
    }
    let (Some(api_key), Some(api_version)) = (i16_at(4), i16_at(6)) else {
        return Header::Short;
    };
    if api_key < 0 || api_version < 0 {
        return Header::Malformed("negative api key or version");
    }
    let Some(len) = i16_at(12) else {
        return Header::Short;
    };
    if len == -1 {
        return Header::ClientId(None);
    }
    if len < -1 || 10 + i32::from(len) > size {
        return Header::Malformed("client id length out of the request");
    }
    let Some(id) = bytes.get(14..14 + len as usize) else {
        return Header::Short;
    };
    match std::str::from_utf8(id) {
        Ok(id) => Header::ClientId(Some(id.to_string())),
        Err(_) => Header::Malformed("client id not UTF-8"),
    }
}

/// The broker a client id names: Kafka's inter-broker clients call
/// themselves `broker-<id>-...` (`broker-2-fetcher-0`).
pub fn source_broker(client_id: &str) -> Option<u32> {
    let rest = client_id.strip_prefix("broker-")?;
    let (id, _) = rest.split_once('-')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// One forwarded connection, to shut on a cut.
struct Conn {
    id: u64,
    source: Option<u32>,
    ends: [TcpStream; 2],
}

struct Shared {
    /// Every connection's link.
    link: AtomicU8,
    /// Links of the connections from one source broker.
    from: Mutex<BTreeMap<u32, Link>>,
    stop: AtomicBool,
    conns: Mutex<Vec<Conn>>,
    next_conn: AtomicU64,
    /// How many connections began with each client id (or why none was read).
    clients: Mutex<BTreeMap<String, u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn link(&self) -> Link {
        Link::from(self.link.load(Ordering::SeqCst))
    }

    /// The link of a connection from `source`.
    fn link_for(&self, source: Option<u32>) -> Link {
        let own = source.and_then(|s| lock(&self.from).get(&s).copied());
        self.link().max(own.unwrap_or(Link::Open))
    }

    fn closing(&self, source: Option<u32>) -> bool {
        self.stop.load(Ordering::SeqCst) || self.link_for(source) == Link::Cut
    }

    /// Shuts the connections whose link is now cut (all, when stopping).
    fn shut_cut(&self) {
        let stopping = self.stop.load(Ordering::SeqCst);
        let mut conns = lock(&self.conns);
        conns.retain(|c| {
            let shut = stopping || self.link_for(c.source) == Link::Cut;
            if shut {
                for s in &c.ends {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
            !shut
        });
    }

    fn forget(&self, id: u64) {
        lock(&self.conns).retain(|c| c.id != id);
    }
}

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("proxy: cannot listen on 127.0.0.1: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("proxy: {e}"))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("proxy: {e}"))?;
        let shared = Arc::new(Shared {
            link: AtomicU8::new(Link::Open as u8),
            from: Mutex::new(BTreeMap::new()),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            clients: Mutex::new(BTreeMap::new()),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name(format!("proxy-{port}"))
            .spawn(move || accept_loop(listener, upstream, s))
            .map_err(|e| format!("proxy: cannot start its thread: {e}"))?;
        Ok(Proxy {
            port,
            shared,
            accept: Some(accept),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The link of every connection.
    pub fn link(&self) -> Link {
        self.shared.link()
    }

    /// Sets the link of every connection; a cut shuts them now.
    pub fn set(&self, link: Link) {
        self.shared.link.store(link as u8, Ordering::SeqCst);
        self.shared.shut_cut();
    }

    /// The link of the connections from broker `source`.
    pub fn link_from(&self, source: u32) -> Link {
        lock(&self.shared.from)
            .get(&source)
            .copied()
            .unwrap_or(Link::Open)
    }

    /// Sets the link of the connections from broker `source` (those open
    /// and those to come); a cut shuts its open ones now.
    pub fn set_from(&self, source: u32, link: Link) {
        {
            let mut from = lock(&self.shared.from);
            if link == Link::Open {
                from.remove(&source);
            } else {
                from.insert(source, link);
            }
        }
        self.shared.shut_cut();
    }

    /// The sources whose link is not open, with their links.
    pub fn closed_sources(&self) -> Vec<(u32, Link)> {
        lock(&self.shared.from)
            .iter()
            .map(|(s, l)| (*s, *l))
            .collect()
    }

    /// How many connections began with each client id: `(null)` for a
    /// null one, `(short)` when the header did not come in time, and
    /// `(malformed: why)`.
    pub fn clients(&self) -> Vec<(String, u64)> {
        lock(&self.shared.clients)
            .iter()
            .map(|(c, n)| (c.clone(), *n))
            .collect()
    }

    /// Stops accepting and shuts every connection.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.shut_cut();
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                if shared.link() == Link::Cut {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                // The header may take a while: each connection on its own thread.
                let s = shared.clone();
                let _ = std::thread::Builder::new()
                    .name("proxy-conn".into())
                    .spawn(move || serve(client, upstream, &s));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Reads the connection's first request header (bounded by [`HEADER_WAIT`]
/// and by the header's size), learns its source, and forwards it, the bytes
/// already read first.
fn serve(mut client: TcpStream, upstream: SocketAddr, shared: &Arc<Shared>) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(POLL));
    let deadline = Instant::now() + HEADER_WAIT;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let header = loop {
        if shared.closing(None) {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        match read_header(&head) {
            Header::Short if Instant::now() < deadline => {}
            h => break h,
        }
        match client.read(&mut buf) {
            // The peer sent what it had and closed its side: forward that.
            Ok(0) => break read_header(&head),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
        }
    };
    let (name, source) = match &header {
        Header::ClientId(Some(id)) => (id.clone(), source_broker(id)),
        Header::ClientId(None) => ("(null)".to_string(), None),
        Header::Short => ("(short)".to_string(), None),
        Header::Malformed(why) => (format!("(malformed: {why})"), None),
    };
    *lock(&shared.clients).entry(name).or_insert(0) += 1;
    if shared.closing(source) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
        // The upstream is down: the client sees its connection close.
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    forward(client, server, head, source, shared);
}

/// Copies both ways on two threads until either side closes or the link
/// is cut; `head` (read from the client already) goes first.
fn forward(
    client: TcpStream,
    server: TcpStream,
    head: Vec<u8>,
    source: Option<u32>,
    shared: &Arc<Shared>,
) {
    let ends = [
        client.try_clone(),
        server.try_clone(),
        client.try_clone(),
        server.try_clone(),
    ];
    let [Ok(client2), Ok(server2), Ok(client3), Ok(server3)] = ends else {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    };
    let id = shared.next_conn.fetch_add(1, Ordering::SeqCst);
    lock(&shared.conns).push(Conn {
        id,
        source,
        ends: [client3, server3],
    });
    // A cut that came between the check and the registration.
    if shared.closing(source) {
        shared.shut_cut();
    }
    let s = shared.clone();
    let ended = Arc::new(AtomicU8::new(0));
    let e = ended.clone();
    let _ = std::thread::Builder::new()
        .name("proxy-copy".into())
        .spawn(move || copy(server, client2, Vec::new(), source, (id, &e), &s));
    copy(client, server2, head, source, (id, &ended), shared);
}

fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    mut pending: Vec<u8>,
    source: Option<u32>,
    // The connection, and how many of its two directions have ended.
    (id, ended): (u64, &AtomicU8),
    shared: &Shared,
) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if shared.closing(source) {
            break;
        }
        if shared.link_for(source) == Link::Held {
            std::thread::sleep(POLL);
            continue;
        }
        if !pending.is_empty() {
            if to.write_all(&pending).is_err() {
                break;
            }
            pending.clear();
        }
        match from.read(&mut buf) {
            // This side is done sending: say so, and let the other direction finish.
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                if ended.fetch_add(1, Ordering::SeqCst) == 1 {
                    shared.forget(id);
                }
                return;
            }
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    ended.fetch_add(1, Ordering::SeqCst);
    shared.forget(id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::BufRead;

    /// An echo server on 127.0.0.1: every byte back, as it comes.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    let mut r = s;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = r.read(&mut buf) {
                        if n == 0 || w.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn ask(s: &mut TcpStream, text: &str) -> std::io::Result<String> {
        writeln!(s, "{text}")?;
        let mut line = String::new();
        std::io::BufReader::new(s.try_clone()?).read_line(&mut line)?;
        Ok(line.trim().to_string())
    }

    /// A Kafka request (an ApiVersions v3, as a client's first) from `client_id`.
    fn request(client_id: Option<&str>) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&18i16.to_be_bytes());
        body.extend_from_slice(&3i16.to_be_bytes());
        body.extend_from_slice(&7i32.to_be_bytes());
        match client_id {
            Some(id) => {
                body.extend_from_slice(&(id.len() as i16).to_be_bytes());
                body.extend_from_slice(id.as_bytes());
            }
            None => body.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        body.extend_from_slice(&[0, 4, b'j', b'a', b'v', b'a', 0]);
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    fn addr(proxy: &Proxy) -> SocketAddr {
        ([127, 0, 0, 1], proxy.port()).into()
    }

    /// Connects to the proxy and sends `first`, then checks it comes back.
    fn connect(proxy: &Proxy, first: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(addr(proxy)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(first).unwrap();
        let mut back = vec![0u8; first.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, first);
        s
    }

    /// Whether `text` comes back within `wait`.
    fn answered(s: &mut TcpStream, text: &str, wait: Duration) -> bool {
        s.set_read_timeout(Some(wait)).unwrap();
        ask(s, text).is_ok_and(|a| a == text)
    }

    #[test]
    fn a_link_forwards_holds_and_cuts() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut s = TcpStream::connect(addr(&proxy)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        // Not a Kafka header (its size is huge): forwarded all the same.
        assert_eq!(ask(&mut s, "one").unwrap(), "one");

        // Held: no answer while held; it comes once the link opens again.
        proxy.set(Link::Held);
        std::thread::sleep(POLL * 3);
        assert!(ask(&mut s, "two").is_err(), "an answer through a held link");
        proxy.set(Link::Open);
        let mut line = String::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::BufReader::new(s.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "two");

        // Cut: the open connection ends, and a new one is closed at once.
        proxy.set(Link::Cut);
        let mut end = [0u8; 1];
        assert_eq!(
            s.read(&mut end).unwrap_or(0),
            0,
            "the connection survived a cut"
        );
        let mut again = TcpStream::connect(addr(&proxy)).unwrap();
        again
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        assert!(ask(&mut again, "three").map_or(true, |a| a.is_empty()));

        // Open again: new connections flow.
        proxy.set(Link::Open);
        let mut fresh = TcpStream::connect(addr(&proxy)).unwrap();
        fresh
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(ask(&mut fresh, "four").unwrap(), "four");
    }

    #[test]
    fn a_link_from_one_broker_is_held_and_cut_while_the_others_flow() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut two = connect(&proxy, &request(Some("broker-2-fetcher-0")));
        let mut three = connect(&proxy, &request(Some("broker-3-fetcher-0")));
        let mut anon = connect(&proxy, &request(None));
        let quick = Duration::from_millis(300);
        let long = Duration::from_secs(5);

        // Broker 2's link held: its bytes stop, broker 3's and the anonymous flow.
        proxy.set_from(2, Link::Held);
        assert_eq!(proxy.link_from(2), Link::Held);
        std::thread::sleep(POLL * 3);
        assert!(!answered(&mut two, "a", quick), "held, yet answered");
        assert!(answered(&mut three, "b", long));
        assert!(answered(&mut anon, "c", long));
        // A new connection from broker 2 is held too (its header was read).
        let mut two_again = TcpStream::connect(addr(&proxy)).unwrap();
        two_again
            .write_all(&request(Some("broker-2-fetcher-1")))
            .unwrap();
        two_again.set_read_timeout(Some(quick)).unwrap();
        assert!(two_again.read(&mut [0u8; 1]).is_err(), "held, yet answered");

        // Healed: what was held arrives.
        proxy.set_from(2, Link::Open);
        assert!(proxy.closed_sources().is_empty());
        let mut line = String::new();
        two.set_read_timeout(Some(long)).unwrap();
        std::io::BufReader::new(two.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "a");

        // Broker 2's link cut: its connections end and new ones close; 3's flow.
        proxy.set_from(2, Link::Cut);
        let mut end = [0u8; 1];
        assert_eq!(two.read(&mut end).unwrap_or(0), 0, "survived a cut");
        assert!(answered(&mut three, "d", long));
        let mut refused = TcpStream::connect(addr(&proxy)).unwrap();
        refused.set_read_timeout(Some(long)).unwrap();
        let _ = refused.write_all(&request(Some("broker-2-fetcher-0")));
        assert_eq!(refused.read(&mut end).unwrap_or(0), 0, "a cut let it in");
        let _ = connect(&proxy, &request(Some("broker-3-fetcher-0")));

        proxy.set_from(2, Link::Open);
        let _ = connect(&proxy, &request(Some("broker-2-fetcher-0")));
        let clients: BTreeMap<String, u64> = proxy.clients().into_iter().collect();
        assert_eq!(clients.get("broker-2-fetcher-0"), Some(&3));
        assert_eq!(clients.get("broker-3-fetcher-0"), Some(&2));
        assert_eq!(clients.get("(null)"), Some(&1));
    }

    #[test]
    fn short_and_malformed_headers_pass_without_a_source() {
        let proxy = Proxy::start(echo()).unwrap();
        proxy.set_from(2, Link::Cut);
        // A negative size, a huge client id length, invalid UTF-8: passed.
        let mut bad = request(Some("broker-2-fetcher-0"));
        bad[12] = 0x7f;
        let mut not_utf8 = request(Some("broker-2-fetcher-0"));
        not_utf8[14] = 0xff;
        for first in [vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3], bad, not_utf8] {
            let _ = connect(&proxy, &first);
        }
        // Three bytes, then silence: forwarded once the wait for a header ends.
        let mut short = TcpStream::connect(addr(&proxy)).unwrap();
        short.write_all(&[0, 0, 0]).unwrap();
        short
            .set_read_timeout(Some(HEADER_WAIT + Duration::from_secs(3)))
            .unwrap();
        let mut back = [0u8; 3];
        short.read_exact(&mut back).unwrap();
        assert_eq!(back, [0, 0, 0]);
        // Three bytes and the write side closed: forwarded at once.
        let mut closed = TcpStream::connect(addr(&proxy)).unwrap();
        closed.write_all(&[0, 0, 0]).unwrap();
        closed.shutdown(Shutdown::Write).unwrap();
        closed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut all = Vec::new();
        closed.read_to_end(&mut all).unwrap();
        assert_eq!(all, [0, 0, 0]);
        let clients: BTreeMap<String, u64> = proxy.clients().into_iter().collect();
        assert_eq!(clients.get("(short)"), Some(&2), "{clients:?}");
        assert_eq!(clients.values().sum::<u64>(), 5, "{clients:?}");
    }

    #[test]
    fn a_header_names_its_client_and_the_client_its_broker() {
        let full = request(Some("broker-12-fetcher-3"));
        assert_eq!(
            read_header(&full),
            Header::ClientId(Some("broker-12-fetcher-3".into()))
        );
        // Every proper prefix is short; the header does not need the body.
        for n in 0..14 + "broker-12-fetcher-3".len() {
            assert_eq!(read_header(&full[..n]), Header::Short, "prefix of {n}");
        }
        assert_eq!(read_header(&request(None)), Header::ClientId(None));
        assert!(matches!(
            read_header(&[0, 0, 0, 9, 0, 0]),
            Header::Malformed(_)
        ));
        assert!(matches!(
            read_header(&[0, 0, 0, 20, 0xff, 0xff, 0, 0]),
            Header::Malformed(_)
        ));

        assert_eq!(source_broker("broker-12-fetcher-3"), Some(12));
        assert_eq!(source_broker("broker-1-to-controller"), Some(1));
        for not in [
            "broker--fetcher-0",
            "broker-x-fetcher-0",
            "broker-1",
            "producer-1",
            "broker-+1-fetcher-0",
            "broker-99999999999-fetcher-0",
            "",
        ] {
            assert_eq!(source_broker(not), None, "{not:?}");
        }
    }

    proptest! {
        /// Whatever the bytes, the parse answers, and a header it names
        /// stays named however many bytes follow.
        #[test]
        fn any_bytes_read_as_a_header_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), more in proptest::collection::vec(any::<u8>(), 0..16)) {
            let h = read_header(&bytes);
            if !matches!(h, Header::Short) {
                let mut longer = bytes.clone();
                longer.extend(more);
                prop_assert_eq!(read_header(&longer), h.clone());
            }
            if let Header::ClientId(Some(id)) = h {
                let _ = source_broker(&id);
            }
        }
    }
}
