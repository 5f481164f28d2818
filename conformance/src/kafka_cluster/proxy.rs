//! A TCP proxy for one network link, which the nemesis can hold or cut: a
//! listener on 127.0.0.1 that forwards each connection to one upstream
//! address. Each broker reaches the controller through a proxy of its own,
//! so a broker can be partitioned from the controller while it still
//! serves clients and followers.
//!
//! - `Open`: bytes flow both ways.
//! - `Held`: nothing is read or written; connections stay open, so the
//!   peers see silence (their requests time out), as behind a dead switch.
//! - `Cut`: every open connection is shut down and new ones are closed at
//!   once, as behind a firewall that resets.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

struct Shared {
    link: AtomicU8,
    stop: AtomicBool,
    /// Both ends of every connection forwarded, to shut them on a cut.
    streams: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn link(&self) -> Link {
        Link::from(self.link.load(Ordering::SeqCst))
    }

    fn closing(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.link() == Link::Cut
    }

    fn shut_all(&self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        for s in streams.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
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
            stop: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
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

    pub fn link(&self) -> Link {
        self.shared.link()
    }

    /// Sets the link; a cut shuts every connection now.
    pub fn set(&self, link: Link) {
        self.shared.link.store(link as u8, Ordering::SeqCst);
        if link == Link::Cut {
            self.shared.shut_all();
        }
    }

    /// Stops accepting and shuts every connection.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.shut_all();
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
                let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2))
                else {
                    // The upstream is down: the client sees its connection close.
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                forward(client, server, &shared);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Copies both ways on two threads until either side closes or the link
/// is cut.
fn forward(client: TcpStream, server: TcpStream, shared: &Arc<Shared>) {
    let ends = [client.try_clone(), server.try_clone()];
    let [Ok(client2), Ok(server2)] = ends else {
        return;
    };
    {
        let mut streams = shared.streams.lock().unwrap_or_else(|e| e.into_inner());
        for s in [&client, &server] {
            if let Ok(s) = s.try_clone() {
                streams.push(s);
            }
        }
    }
    for (from, to) in [(client, server2), (server, client2)] {
        let s = shared.clone();
        let _ = std::thread::Builder::new()
            .name("proxy-copy".into())
            .spawn(move || copy(from, to, &s));
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if shared.closing() {
            break;
        }
        if shared.link() == Link::Held {
            std::thread::sleep(POLL);
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// An echo server on 127.0.0.1, one line per connection at a time.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    for line in std::io::BufReader::new(s).lines().map_while(|l| l.ok()) {
                        if writeln!(w, "{line}").is_err() {
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

    #[test]
    fn a_link_forwards_holds_and_cuts() {
        let proxy = Proxy::start(echo()).unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], proxy.port()).into();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
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
        let mut again = TcpStream::connect(addr).unwrap();
        again
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        assert!(ask(&mut again, "three").map_or(true, |a| a.is_empty()));

        // Open again: new connections flow.
        proxy.set(Link::Open);
        let mut fresh = TcpStream::connect(addr).unwrap();
        fresh
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(ask(&mut fresh, "four").unwrap(), "four");
    }
}
