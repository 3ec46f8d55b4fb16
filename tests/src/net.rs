//! Test networks: "hosts" made of Linux network namespaces on a bridge.
//!
//! [`Network::create`] makes, in the root namespace, a bridge with an IPv4
//! gateway address, and N network namespaces, each joined to the bridge by a
//! veth pair, with its own address and `lo` up. A process runs on a host
//! through [`Host::command`] (`ip netns exec`). Hosts reach each other and
//! the gateway over the bridge; the test process (root namespace) reaches a
//! host at its address.
//!
//! - **Databases.** The machine's MariaDB and PostgreSQL listen on 127.0.0.1
//!   only, which a namespace cannot reach. [`Host::url_via`] starts a
//!   forwarder in the root namespace on the gateway address to the URL's
//!   server and rewrites the URL to it; the server sees a client on
//!   127.0.0.1, so grants and `pg_hba` rules stay as they are.
//!   [`Network::url_via`] is the same for every host without delay.
//! - **Latency.** The kernel has no `netem`; a host's forwarders delay every
//!   chunk in user space ([`proxy`]): [`Host::set_delay`]`(rtt, jitter)` makes
//!   that host's round trips to its forwarded servers `rtt ± jitter` longer.
//! - **Partitions.** [`Host::cut`] sets the root-side end of the host's veth
//!   pair down: packets are dropped both ways, silently (no reset, no ICMP
//!   to the peer), so established TCP connections stay open and stall;
//!   [`Host::heal`] sets it up again and they carry on once TCP retransmits
//!   (within about as long again as the cut lasted: retransmissions back off
//!   exponentially). Checked by this module's tests.
//!
//! Names are unique per instance and across processes: each network takes a
//! free *slot* `n`, an exclusive `flock` on `/tmp/jobq-net/slot-<n>`, held
//! until it is dropped (or its process dies), giving subnet
//! `10.<200+n>.0.0/24`, bridge `jq<n>b`, host links `jq<n>v<i>` and
//! namespaces `jq<n>-<prefix>-h<i>`. Whatever a crashed run left in a slot
//! is removed before the slot is used again. Dropping a [`Network`] kills
//! every process left in its namespaces, deletes them, the links and the
//! bridge, and stops its forwarders.
//!
//! Creating namespaces needs root and iproute2: [`available`] says whether
//! this process can, and [`usable`] is what a test calls first (a skip with a
//! message outside CI, a failure under `CI=true`).

pub mod proxy;

use std::collections::HashMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use proxy::{Delay, Proxy};

/// Where the slot locks live.
const SLOT_DIR: &str = "/tmp/jobq-net";
/// Slots 0..SLOTS: subnets 10.200.0.0/24 to 10.254.0.0/24.
const SLOTS: u8 = 55;
/// Host `i`'s address is `10.<200+slot>.0.<FIRST_HOST + i>`.
const FIRST_HOST: u8 = 10;

/// Whether this process can create network namespaces (root, `ip` from
/// iproute2, namespaces and veth in the kernel), found once by making and
/// deleting a probe namespace; why not if it cannot.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let root = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|uids| uids.split_whitespace().nth(1))
                == Some("0");
            if !root {
                return Err("network namespaces need root (effective uid 0)".into());
            }
            let probe = format!("jqprobe{}", std::process::id());
            ip(&["netns", "add", &probe])
                .map_err(|e| format!("cannot create a network namespace: {e}"))?;
            let veth = ip(&[
                "link", "add", &probe, "type", "veth", "peer", "name", "eth0", "netns", &probe,
            ]);
            let _ = ip(&["netns", "del", &probe]);
            veth.map(drop)
                .map_err(|e| format!("cannot create a veth pair: {e}"))
        })
        .clone()
}

/// What a test calls before it makes a network: `true` if it can. If it
/// cannot, prints why and returns `false` (the test skips), except under
/// `CI=true`, where it panics: CI never loses these tests silently.
pub fn usable(test: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: under CI=true the machine must create network namespaces: {why}")
        }
        Err(why) => {
            eprintln!("skipped: {test} needs network namespaces: {why}");
            false
        }
    }
}

/// Runs `ip args…`; its stderr on failure.
fn ip(args: &[&str]) -> Result<String, String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The names of the network namespaces (`ip netns list`).
fn namespaces() -> Vec<String> {
    ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The names of the root namespace's links (`ip -o link`), without `@peer`.
fn links() -> Vec<String> {
    ip(&["-o", "link"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect()
}

/// The processes (their pids) for which `keep` holds.
fn processes(keep: impl Fn(&str) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| keep(pid))
        .collect()
}

/// The processes on their way into namespace `ns`: `ip netns exec ns …`
/// not yet replaced by its program (it may have opened or even entered the
/// namespace; `ip netns pids` lists it only once it has entered).
fn entering(ns: &str) -> Vec<String> {
    processes(|pid| {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        args.len() > 4
            && args[0].rsplit(|b| *b == b'/').next() == Some(b"ip".as_slice())
            && args[1..4] == [b"netns".as_slice(), b"exec", ns.as_bytes()]
    })
}

/// The processes in the network namespace whose nsfs inode is `inode`
/// (`/proc/<pid>/ns/net` reads `net:[<inode>]`): found also once the
/// namespace has no name any more.
fn in_namespace(inode: u64) -> Vec<String> {
    let wanted = format!("net:[{inode}]");
    processes(|pid| {
        std::fs::read_link(format!("/proc/{pid}/ns/net"))
            .is_ok_and(|link| link.as_os_str() == wanted.as_str())
    })
}

/// SIGKILLs `pids`, if any; whether there were any.
fn kill_all(pids: &[String]) -> bool {
    if pids.is_empty() {
        return false;
    }
    let _ = Command::new("kill")
        .arg("-9")
        .args(pids)
        .stderr(Stdio::null())
        .status();
    std::thread::sleep(Duration::from_millis(20));
    true
}

/// Kills every process in namespace `ns` (SIGKILL), and every process on
/// its way in ([`entering`]), then deletes it, then kills what still got
/// in. A process forked but not yet replaced by `ip netns exec` shows its
/// parent's command line, so no scan before the delete can see it; once
/// it runs `ip`, that may open the namespace just before the delete and
/// enter it just after. So after the delete, until none is left: the
/// processes on their way in, and those in the namespace found by its
/// inode (read before the delete). No process can open the namespace
/// after the delete, so this ends.
///
/// The namespace is held open meanwhile: freed, its inode number goes to
/// the next namespace made (the kernel hands out the lowest free one), and
/// a scan by that number killed the processes of another test's network
/// made a moment later (a listener on a host of `net.rs`'s dropping test,
/// in two full CI runs: "host 2 does not reach host 1").
fn remove_namespace(ns: &str) {
    use std::os::unix::fs::MetadataExt;
    let held = File::open(format!("/run/netns/{ns}")).ok();
    let inode = held
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map(|m| m.ino());
    for _ in 0..50 {
        let mut pids = entering(ns);
        let listed = ip(&["netns", "pids", ns]).unwrap_or_default();
        pids.extend(listed.split_whitespace().map(str::to_owned));
        if !kill_all(&pids) {
            break;
        }
    }
    let _ = ip(&["netns", "del", ns]);
    for _ in 0..50 {
        let mut pids = entering(ns);
        if let Some(inode) = inode {
            pids.extend(in_namespace(inode));
        }
        if !kill_all(&pids) {
            break;
        }
    }
    // Freed now, once its last process is gone.
    drop(held);
}

/// Removes every object of slot `slot`: namespaces (and what runs in them),
/// host links, the bridge.
fn clear_slot(slot: u8) {
    let ns_prefix = format!("jq{slot}-");
    for ns in namespaces().iter().filter(|n| n.starts_with(&ns_prefix)) {
        remove_namespace(ns);
    }
    let bridge = format!("jq{slot}b");
    let link_prefix = format!("jq{slot}v");
    for link in links() {
        let host_link = link
            .strip_prefix(&link_prefix)
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
        if link == bridge || host_link {
            let _ = ip(&["link", "del", &link]);
        }
    }
}

/// Takes the first free slot: its lock file, held while the file is open.
fn take_slot() -> Result<(u8, File), String> {
    std::fs::create_dir_all(SLOT_DIR).map_err(|e| format!("{SLOT_DIR}: {e}"))?;
    for slot in 0..SLOTS {
        let path = PathBuf::from(SLOT_DIR).join(format!("slot-{slot}"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            return Ok((slot, file));
        }
    }
    Err(format!(
        "all {SLOTS} test network slots in {SLOT_DIR} are taken"
    ))
}

/// What a network's hosts share with it: the forwarders' runtime and the
/// gateway address.
#[derive(Debug)]
struct Shared {
    gateway: Ipv4Addr,
    runtime: tokio::runtime::Handle,
}

/// A test network: a bridge and its hosts. Removed when dropped.
#[derive(Debug)]
pub struct Network {
    slot: u8,
    prefix: String,
    hosts: Vec<Host>,
    shared: Arc<Shared>,
    /// Forwarders shared by every host (no delay), by target.
    forwards: Mutex<HashMap<SocketAddr, Proxy>>,
    /// Runs the forwarders; its own threads, so a network can be made and
    /// used from sync code and from any test runtime.
    runtime: Option<tokio::runtime::Runtime>,
    _lock: File,
}

impl Network {
    /// Makes a bridge with a gateway address and `hosts` namespaces joined
    /// to it; `prefix` (letters and digits, up to 12 are kept) names the
    /// namespaces, for whoever lists them.
    pub fn create(prefix: &str, hosts: usize) -> Result<Network, String> {
        available()?;
        if hosts > usize::from(u8::MAX - FIRST_HOST) {
            return Err(format!("{hosts} hosts: at most {}", u8::MAX - FIRST_HOST));
        }
        let (slot, lock) = take_slot()?;
        clear_slot(slot);
        let _ = std::fs::write(
            PathBuf::from(SLOT_DIR).join(format!("slot-{slot}")),
            format!("{prefix} pid {}\n", std::process::id()),
        );
        let prefix: String = prefix
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect::<String>()
            .to_ascii_lowercase();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("jobq-net-{slot}"))
            .enable_all()
            .build()
            .map_err(|e| format!("the forwarders' runtime: {e}"))?;
        let gateway = Ipv4Addr::new(10, 200 + slot, 0, 1);
        let shared = Arc::new(Shared {
            gateway,
            runtime: runtime.handle().clone(),
        });
        // From here on, dropping `network` removes whatever was made.
        let mut network = Network {
            slot,
            prefix,
            hosts: Vec::with_capacity(hosts),
            shared,
            forwards: Mutex::default(),
            runtime: Some(runtime),
            _lock: lock,
        };
        network.build(hosts)?;
        Ok(network)
    }

    fn build(&mut self, hosts: usize) -> Result<(), String> {
        let slot = self.slot;
        let bridge = format!("jq{slot}b");
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.gateway()),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..hosts {
            let name = format!("jq{slot}-{}-h{i}", self.prefix);
            let link = format!("jq{slot}v{i}");
            let addr = Ipv4Addr::new(10, 200 + slot, 0, FIRST_HOST + i as u8);
            ip(&["netns", "add", &name])?;
            self.hosts.push(Host {
                name: name.clone(),
                ip: addr,
                link: link.clone(),
                delay: Delay::default(),
                forwards: Arc::default(),
                shared: Arc::clone(&self.shared),
            });
            ip(&[
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &name,
            ])?;
            ip(&["link", "set", &link, "master", &bridge, "up"])?;
            ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// The gateway's address: the root namespace's side of the bridge.
    pub fn gateway(&self) -> Ipv4Addr {
        self.shared.gateway
    }

    /// Host `i` (from 0).
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// All hosts.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// This network's slot (its names start `jq<slot>`).
    pub fn slot(&self) -> u8 {
        self.slot
    }

    /// A forwarder on the gateway to `127.0.0.1:port`, shared by all hosts,
    /// without delay (one per port; made on first use).
    pub fn forward(&self, port: u16) -> Result<SocketAddr, String> {
        let target = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        forward_to(&self.shared, &self.forwards, target, &Delay::default())
    }

    /// `url` (a `mysql://`, `postgres://`… URL of a server this machine
    /// reaches) through a forwarder on the gateway without delay.
    pub fn url_via(&self, url: &str) -> Result<String, String> {
        let (target, rewrite) = parse_url(url)?;
        let addr = forward_to(&self.shared, &self.forwards, target, &Delay::default())?;
        Ok(rewrite(addr))
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for host in &self.hosts {
            remove_namespace(&host.name);
        }
        let _ = ip(&["link", "del", &format!("jq{}b", self.slot)]);
        // Whatever a failed build left (a link without its namespace).
        clear_slot(self.slot);
        lock(&self.forwards).clear();
        for host in &self.hosts {
            lock(&host.forwards).clear();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The forwarder in `forwards` to `target` with `delay`, started on the
/// gateway if there is none yet; its address.
fn forward_to(
    shared: &Shared,
    forwards: &Mutex<HashMap<SocketAddr, Proxy>>,
    target: SocketAddr,
    delay: &Delay,
) -> Result<SocketAddr, String> {
    let mut forwards = lock(forwards);
    if let Some(proxy) = forwards.get(&target) {
        return Ok(proxy.addr());
    }
    let listen = SocketAddr::V4(SocketAddrV4::new(shared.gateway, 0));
    let proxy = Proxy::start(&shared.runtime, listen, target, delay.clone())
        .map_err(|e| format!("a forwarder on {listen} to {target}: {e}"))?;
    let addr = proxy.addr();
    forwards.insert(target, proxy);
    Ok(addr)
}

/// A forwarder on loopback to the server of `url` (a `mysql://` or
/// `postgres://` URL), run on the current tokio runtime with `delay` (which
/// can also freeze it), and `url` rewritten to go through it. No namespace
/// or root needed: for tests of one process against a slow or frozen server.
pub fn loopback_forward(url: &str, delay: Delay) -> Result<(Proxy, String), String> {
    let (target, rewrite) = parse_url(url)?;
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let proxy = Proxy::start(&tokio::runtime::Handle::current(), listen, target, delay)
        .map_err(|e| format!("a forwarder on loopback to {target}: {e}"))?;
    let url = rewrite(proxy.addr());
    Ok((proxy, url))
}

/// The server a database URL names (host and port, the scheme's default
/// port if none) and a function writing the URL with another address in
/// their place (user, password, database and query unchanged).
fn parse_url(url: &str) -> Result<(SocketAddr, impl Fn(SocketAddr) -> String), String> {
    let redacted = || url.split('@').next_back().unwrap_or("").to_owned();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL: …{}", redacted()))?;
    let default_port = match scheme {
        "mysql" | "mariadb" => 3306,
        "postgres" | "postgresql" => 5432,
        other => return Err(format!("no server to forward to in a {other}:// URL")),
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((user, hostport)) => (Some(user), hostport),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || hostport.starts_with('[') => (
            host,
            port.parse::<u16>()
                .map_err(|_| format!("bad port in …{}", redacted()))?,
        ),
        _ => (hostport, default_port),
    };
    if host.is_empty() {
        return Err(format!(
            "the URL names no host (a socket path?): …{}",
            redacted()
        ));
    }
    let target = (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| format!("{host} has no IPv4 address"))?;
    let (scheme, userinfo, tail) = (
        scheme.to_owned(),
        userinfo.map(str::to_owned),
        tail.to_owned(),
    );
    Ok((target, move |addr: SocketAddr| match &userinfo {
        Some(user) => format!("{scheme}://{user}@{addr}{tail}"),
        None => format!("{scheme}://{addr}{tail}"),
    }))
}

/// One host of a [`Network`]: a network namespace. Cloning gives another
/// handle on the same host; handles must not outlive their network (it
/// removes the host).
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace's name (`ip netns exec <name> …`).
    pub name: String,
    /// Its address on the bridge.
    pub ip: Ipv4Addr,
    /// The root-namespace end of its veth pair.
    link: String,
    /// The delay of its forwarders.
    delay: Delay,
    /// Its forwarders (with its delay), by target.
    forwards: Arc<Mutex<HashMap<SocketAddr, Proxy>>>,
    shared: Arc<Shared>,
}

impl Host {
    /// `program` to run inside this host's namespace (through `ip netns
    /// exec`, which execs it: the child's pid is the program's). Add
    /// arguments, environment and I/O as for any [`Command`].
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }

    /// Partitions this host: every packet between it and the bridge is
    /// dropped, both ways, with no reset; established connections stall.
    pub fn cut(&self) -> Result<(), String> {
        ip(&["link", "set", &self.link, "down"]).map(drop)
    }

    /// Ends a [`cut`](Self::cut): the link carries packets again.
    pub fn heal(&self) -> Result<(), String> {
        ip(&["link", "set", &self.link, "up"]).map(drop)
    }

    /// Makes every round trip through this host's forwarders (see
    /// [`url_via`](Self::url_via)) `rtt ± jitter` longer, from the next
    /// chunk each direction forwards (connections already open included).
    pub fn set_delay(&self, rtt: Duration, jitter: Duration) {
        self.delay.set(rtt, jitter);
    }

    /// The round-trip delay and jitter set by [`set_delay`](Self::set_delay).
    pub fn delay(&self) -> (Duration, Duration) {
        self.delay.get()
    }

    /// A forwarder on the gateway to `127.0.0.1:port` carrying this host's
    /// delay (one per port; made on first use); the address this host
    /// connects to.
    pub fn forward(&self, port: u16) -> Result<SocketAddr, String> {
        let target = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        forward_to(&self.shared, &self.forwards, target, &self.delay)
    }

    /// `url` (a `mysql://`, `postgres://`… URL of a server this machine
    /// reaches, e.g. a `JOBQ_*_URL`) as this host reaches it: through a
    /// forwarder on the gateway carrying this host's delay.
    pub fn url_via(&self, url: &str) -> Result<String, String> {
        let (target, rewrite) = parse_url(url)?;
        let addr = forward_to(&self.shared, &self.forwards, target, &self.delay)?;
        Ok(rewrite(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_rewritten_to_the_forwarder_and_keeps_the_rest() {
        let to = SocketAddr::from(([10, 201, 0, 1], 40000));
        let cases = [
            (
                "mysql://root@127.0.0.1:3306/test",
                3306,
                "mysql://root@10.201.0.1:40000/test",
            ),
            (
                "postgres://u:p%40ss@localhost/db?sslmode=disable",
                5432,
                "postgres://u:p%40ss@10.201.0.1:40000/db?sslmode=disable",
            ),
            ("mysql://127.0.0.1", 3306, "mysql://10.201.0.1:40000"),
        ];
        for (url, port, expected) in cases {
            let (target, rewrite) = parse_url(url).expect("parse");
            assert_eq!(target.port(), port, "{url}");
            assert!(target.ip().is_loopback(), "{url}");
            assert_eq!(rewrite(to), expected);
        }
        assert!(parse_url("sqlite://jobs.db").is_err());
        assert!(parse_url("mysql://u:secret@/db").is_err());
    }
}
