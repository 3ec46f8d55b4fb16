//! A delaying TCP forwarder: the latency of a test network.
//!
//! This machine's kernel has no `netem` (`CONFIG_NET_SCH_NETEM` is not set:
//! `tc qdisc add … netem` fails with "Specified qdisc kind is unknown"), and
//! the qdiscs it has do not delay: `tbf` and `htb` shape a rate, they hold a
//! packet only while a bucket refills, so they add no fixed latency to a
//! trickle of small queries. So the delay is made here, in user space, on
//! the one path the tests care about (a host's connections to a database):
//! each direction of a forwarded connection delivers every chunk it reads at
//! its arrival time plus a one-way delay drawn from `rtt / 2 ± jitter / 2`,
//! but never before the chunk ahead of it (bytes stay in order). A request
//! and its answer each cross once, so a round trip gains `rtt ± jitter`.
//!
//! Timers are tokio's, whose resolution is 1 ms: a sleep ends on a
//! millisecond tick after its deadline, measured here 1.1–1.3 ms late on
//! average (sleeps of 1–3 ms on a 1-thread runtime, load 5 on 2 cores), so
//! each direction asks for 1 ms less than its delay. A round trip's delay is
//! then about right on average and off by up to ±1 ms (plus the scheduling
//! latency of a loaded machine), inside the jitter of a realistic setting;
//! the tests print the round trips they measure.
//!
//! A path can also be frozen ([`Delay::freeze`]): its connections stay open
//! and new ones are accepted, but nothing is delivered either way until it
//! is thawed — what a client sees of a server that was SIGSTOPped, or of a
//! forwarder that stopped forwarding. What was read meanwhile is delivered,
//! in order, after the thaw.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// The added latency of a path, shared by every connection through it and
/// changeable while they run (a change applies to the next chunk); and
/// whether the path is frozen.
#[derive(Debug, Clone)]
pub struct Delay {
    rtt_jitter: Arc<Mutex<(Duration, Duration)>>,
    frozen: Arc<watch::Sender<bool>>,
}

impl Default for Delay {
    fn default() -> Self {
        Self {
            rtt_jitter: Arc::default(),
            frozen: Arc::new(watch::Sender::new(false)),
        }
    }
}

impl Delay {
    /// Stops delivering anything either way, on every connection of the
    /// path, the open ones staying open and new ones accepted, until
    /// [`thaw`](Self::thaw).
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Delivers again, starting with what arrived while frozen.
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Waits while the path is frozen.
    async fn unfrozen(frozen: &mut watch::Receiver<bool>) {
        let _ = frozen.wait_for(|frozen| !*frozen).await;
    }

    /// A round trip gains `rtt ± jitter` (each direction `rtt / 2 ± jitter / 2`,
    /// uniformly). `jitter` is capped at `rtt`.
    pub fn set(&self, rtt: Duration, jitter: Duration) {
        *self.lock() = (rtt, jitter.min(rtt));
    }

    /// The round trip's added delay and jitter.
    pub fn get(&self) -> (Duration, Duration) {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Duration, Duration)> {
        self.rtt_jitter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One direction's delay for the next chunk, less the timer's average
    /// lateness.
    fn one_way(&self) -> Duration {
        let (rtt, jitter) = self.get();
        if rtt.is_zero() {
            return Duration::ZERO;
        }
        let half = rtt.as_secs_f64() / 2.0 - TIMER_LATENESS.as_secs_f64();
        let spread = jitter.as_secs_f64() / 2.0;
        let secs = if spread > 0.0 {
            half + rand::random_range(-spread..=spread)
        } else {
            half
        };
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// About how late a tokio sleep ends (its 1 ms tick, rounded up).
const TIMER_LATENESS: Duration = Duration::from_millis(1);

/// A listening forwarder; stops listening and cuts every connection it
/// forwards when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `listen` (port 0: any free one) and forwards every
    /// connection to `target`, delayed by `delay`, on `runtime`'s threads.
    pub fn start(
        runtime: &Handle,
        listen: SocketAddr,
        target: SocketAddr,
        delay: Delay,
    ) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let task = runtime.spawn(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => accept_loop(listener, target, delay).await,
                Err(error) => tracing::warn!(%error, "test network proxy: cannot listen"),
            }
        });
        Ok(Self { addr, task })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept loop owns the connections' tasks (a JoinSet): aborting
        // it drops them all.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, delay: Delay) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(forward(client, target, delay.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "test network proxy: accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Forwards one connection both ways until both directions end.
async fn forward(client: TcpStream, target: SocketAddr, delay: Delay) {
    let Ok(server) = TcpStream::connect(target).await else {
        return; // dropping `client` closes it: the caller sees a refused connection
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = direction(client_read, server_write, delay.clone());
    let down = direction(server_read, client_write, delay);
    tokio::pin!(up, down);
    // A clean end of one direction (a half-close) waits for the other; an
    // error in either ends the connection (dropping all halves closes both
    // sockets).
    tokio::select! {
        result = &mut up => if result.is_ok() { let _ = down.await; },
        result = &mut down => if result.is_ok() { let _ = up.await; },
    }
}

/// One direction: a reader stamps each chunk with its delivery time, a
/// writer delivers it then. `None` in the channel is the end of the stream.
async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay: Delay,
) -> std::io::Result<()> {
    let (send, mut receive) = mpsc::channel::<(Instant, Option<Vec<u8>>)>(1024);
    let mut frozen = delay.frozen.subscribe();
    let reader = async move {
        let mut last = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = from.read(&mut buf).await?;
            let due = (Instant::now() + delay.one_way()).max(last);
            last = due;
            let chunk = (n > 0).then(|| buf[..n].to_vec());
            let end = chunk.is_none();
            if send.send((due, chunk)).await.is_err() || end {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = receive.recv().await {
            // A sleep, even to a deadline passed, ends on a timer tick.
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            Delay::unfrozen(&mut frozen).await;
            match chunk {
                Some(bytes) => to.write_all(&bytes).await?,
                None => {
                    to.shutdown().await?;
                    break;
                }
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let (read, write) = tokio::join!(reader, writer);
    read.and(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn localhost() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    /// An echo server on loopback; its address.
    async fn echo() -> (SocketAddr, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, task)
    }

    /// Round trips of one byte through `proxy`, each timed.
    async fn round_trips(proxy: &Proxy, n: usize) -> Vec<Duration> {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut times = Vec::with_capacity(n);
        let mut byte = [0u8; 1];
        for i in 0..n {
            let start = std::time::Instant::now();
            stream.write_all(&[i as u8]).await.expect("write");
            stream.read_exact(&mut byte).await.expect("read");
            assert_eq!(byte[0], i as u8, "echoed in order");
            times.push(start.elapsed());
        }
        times
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_trip_gains_the_set_delay_within_its_jitter() {
        let (target, _echo) = echo().await;
        let delay = Delay::default();
        delay.set(Duration::from_millis(5), Duration::from_millis(2));
        let proxy =
            Proxy::start(&Handle::current(), localhost(), target, delay.clone()).expect("proxy");
        let times = round_trips(&proxy, 200).await;
        delay.set(Duration::ZERO, Duration::ZERO);
        let fast = round_trips(&proxy, 200).await;
        let base = fast.iter().sum::<Duration>() / fast.len() as u32;
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        let min = *times.iter().min().unwrap();
        let max = *times.iter().max().unwrap();
        println!(
            "round trips through the proxy: {base:?} without delay; at 5 ms ± 2 ms min {min:?}, mean {mean:?}, max {max:?}"
        );
        assert!(base < Duration::from_millis(2), "without delay: {base:?}");
        // rtt - jitter is the floor (less the timer's ±½ ms each way).
        assert!(min >= Duration::from_millis(2), "min {min:?}");
        // The mean is rtt (± the timer's rounding), plus the base round
        // trip and a loaded machine's scheduling latency.
        assert!(
            mean >= Duration::from_millis(4)
                && mean <= Duration::from_millis(5) + base * 2 + Duration::from_millis(2),
            "mean {mean:?}"
        );
        // Spread: not all the same (jitter is applied).
        assert!(max - min >= Duration::from_millis(1), "{min:?}..{max:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_keeps_its_byte_order_and_its_end_under_jitter() {
        let (target, _echo) = echo().await;
        let delay = Delay::default();
        delay.set(Duration::from_millis(4), Duration::from_millis(4));
        let proxy = Proxy::start(&Handle::current(), localhost(), target, delay).expect("proxy");
        let stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        let (mut r, mut w) = stream.into_split();
        let sent: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let writer = tokio::spawn(async move {
            for chunk in sent.chunks(1000) {
                w.write_all(chunk).await.expect("write");
            }
            w.shutdown().await.expect("half-close");
        });
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), r.read_to_end(&mut got))
            .await
            .expect("the echo ends after the half-close")
            .expect("read");
        writer.await.expect("writer");
        assert!(
            got == expected,
            "bytes reordered or lost: {} of {}",
            got.len(),
            expected.len()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_frozen_path_delivers_nothing_until_thawed_and_then_everything() {
        let (target, _echo) = echo().await;
        let delay = Delay::default();
        let proxy =
            Proxy::start(&Handle::current(), localhost(), target, delay.clone()).expect("proxy");
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        stream.write_all(b"a").await.expect("write");
        let mut byte = [0u8; 1];
        stream
            .read_exact(&mut byte)
            .await
            .expect("echo before the freeze");
        delay.freeze();
        stream
            .write_all(b"b")
            .await
            .expect("a write still goes out");
        let waited =
            tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut byte)).await;
        assert!(waited.is_err(), "nothing comes back while frozen");
        // A new connection is accepted, and answered only after the thaw.
        let mut late = TcpStream::connect(proxy.addr())
            .await
            .expect("connect while frozen");
        late.write_all(b"c").await.expect("write");
        delay.thaw();
        stream
            .read_exact(&mut byte)
            .await
            .expect("echo after the thaw");
        assert_eq!(&byte, b"b");
        late.read_exact(&mut byte)
            .await
            .expect("the late connection's echo");
        assert_eq!(&byte, b"c");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_proxy_closes_its_connections() {
        let (target, _echo) = echo().await;
        let proxy =
            Proxy::start(&Handle::current(), localhost(), target, Delay::default()).expect("proxy");
        let addr = proxy.addr();
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(b"x").await.expect("write");
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.expect("echo");
        drop(proxy);
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
            .await
            .expect("closed within 5 s");
        assert!(n.is_err() || rest.is_empty(), "nothing after the drop");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer listening"
        );
    }
}
