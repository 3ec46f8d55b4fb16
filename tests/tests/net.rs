//! The test network itself (`jobq_tests::net`): a host in its own network
//! namespace reaches the machine's MariaDB and PostgreSQL through the
//! gateway's forwarder; a cut stalls its connection (a query times out, the
//! connection is not reset) and a heal lets the same connection carry on; a
//! host's delay lengthens its round trips by that much; dropping a network
//! removes every namespace, link and process it made, and a new network
//! clears what a crashed one left in its slot.
//!
//! Outside CI the tests skip with a message where namespaces cannot be made
//! (not root, no iproute2); under `CI=true` they fail.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use jobq_tests::TestDb;
use jobq_tests::net::{self, Host, Network};

const PROBE: &str = env!("CARGO_BIN_EXE_jobq-net-probe");

/// `jobq-net-probe` running on a host: one database connection driven by lines.
struct Probe {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Probe {
    fn start(host: &Host, url: &str) -> Self {
        let mut child = host
            .command(PROBE)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the probe in the namespace");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let probe = Self {
            child,
            stdin,
            lines,
        };
        let first = probe
            .line(Duration::from_secs(15))
            .expect("the probe connects");
        assert_eq!(first, "connected");
        probe
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to the probe");
        self.stdin.flush().expect("flush");
    }

    fn line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// The value and time of an `ok <value> <µs>` answer within `within`.
    fn answer(&self, within: Duration) -> Option<(i64, Duration)> {
        let line = self.line(within)?;
        let mut parts = line.split_whitespace();
        assert_eq!(parts.next(), Some("ok"), "probe answered: {line}");
        let value = parts.next()?.parse().ok()?;
        let micros = parts.next()?.parse().ok()?;
        Some((value, Duration::from_micros(micros)))
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The statement that names the probe's connection on `db`'s backend.
fn connection_id(db: &TestDb) -> &'static str {
    if db.url().starts_with("postgres") {
        "SELECT pg_backend_pid()::bigint"
    } else {
        "SELECT CAST(CONNECTION_ID() AS SIGNED)"
    }
}

fn a_cut_stalls_a_hosts_connection_without_resetting_it_and_a_heal_resumes_it(db: TestDb) {
    if !net::usable("net tests") {
        return;
    }
    let network = Network::create("cut", 1).expect("network");
    let host = network.host(0);
    let url = host.url_via(db.url()).expect("forwarder");
    let mut probe = Probe::start(host, &url);
    let id = connection_id(&db);
    probe.send(id);
    let (connection, _) = probe
        .answer(Duration::from_secs(5))
        .expect("the host reaches the database");

    host.cut().expect("cut");
    let cut_at = Instant::now();
    probe.send(id);
    assert!(
        probe.line(Duration::from_secs(3)).is_none(),
        "a query through a cut link must not be answered"
    );
    host.heal().expect("heal");
    let healed_at = Instant::now();
    let (same, _) = probe
        .answer(Duration::from_secs(20))
        .expect("after the heal the stalled query is answered");
    assert_eq!(
        same, connection,
        "the same connection carried on (not a reconnect)"
    );
    println!(
        "cut for {:?}; answered {:?} after the heal",
        healed_at - cut_at,
        healed_at.elapsed()
    );
    probe.send(id);
    let (again, took) = probe
        .answer(Duration::from_secs(5))
        .expect("the connection works again");
    assert_eq!(again, connection);
    assert!(took < Duration::from_secs(1), "a fresh query took {took:?}");
}

fn a_hosts_delay_lengthens_its_round_trips_by_that_much(db: TestDb) {
    if !net::usable("net tests") {
        return;
    }
    let network = Network::create("delay", 1).expect("network");
    let host = network.host(0);
    let mut probe = Probe::start(host, &host.url_via(db.url()).expect("forwarder"));
    let one = if db.url().starts_with("postgres") {
        "SELECT 1::bigint"
    } else {
        "SELECT 1"
    };
    let mean = |probe: &mut Probe| {
        probe.send(&format!("time 100 {one}"));
        probe.answer(Duration::from_secs(10)).expect("answers").1
    };
    mean(&mut probe); // warm up
    let base = mean(&mut probe);
    host.set_delay(Duration::from_millis(5), Duration::from_millis(2));
    let delayed = mean(&mut probe);
    host.set_delay(Duration::ZERO, Duration::ZERO);
    let back = mean(&mut probe);
    println!(
        "SELECT 1 round trip: {base:?} without delay, {delayed:?} at 5 ms ± 2 ms, {back:?} after"
    );
    let added = delayed.saturating_sub(base);
    assert!(
        added >= Duration::from_millis(4) && added <= Duration::from_millis(8),
        "5 ms ± 2 ms added {added:?}"
    );
    assert!(
        back < base + Duration::from_millis(2),
        "{back:?} vs {base:?}"
    );
}

mod mysql {
    #[test]
    fn a_cut_stalls_a_hosts_connection_without_resetting_it_and_a_heal_resumes_it() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::a_cut_stalls_a_hosts_connection_without_resetting_it_and_a_heal_resumes_it(db);
        }
    }

    #[test]
    fn a_hosts_delay_lengthens_its_round_trips_by_that_much() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::a_hosts_delay_lengthens_its_round_trips_by_that_much(db);
        }
    }
}

mod postgres {
    #[test]
    fn a_cut_stalls_a_hosts_connection_without_resetting_it_and_a_heal_resumes_it() {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::a_cut_stalls_a_hosts_connection_without_resetting_it_and_a_heal_resumes_it(db);
        }
    }

    #[test]
    fn a_hosts_delay_lengthens_its_round_trips_by_that_much() {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::a_hosts_delay_lengthens_its_round_trips_by_that_much(db);
        }
    }
}

/// How long a listener started in a namespace may take to listen.
const LISTENER_DEADLINE: Duration = Duration::from_secs(30);

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Names in the root namespace that belong to slot `slot`.
fn leftovers(slot: u8) -> Vec<String> {
    let ns = format!("jq{slot}-");
    let link = format!("jq{slot}");
    let mut found: Vec<String> = output("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&ns))
        .map(|n| format!("namespace {n}"))
        .collect();
    found.extend(
        output("ip", &["-o", "link"])
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n))
            .filter(|n| {
                n.strip_prefix(&link)
                    .is_some_and(|rest| rest.starts_with(['b', 'v']))
            })
            .map(|n| format!("link {n}")),
    );
    found
}

#[test]
fn dropping_a_network_removes_its_namespaces_links_and_processes() {
    if !net::usable("net tests") {
        return;
    }
    let network = Network::create("drop", 3).expect("network");
    let slot = network.slot();
    assert_eq!(leftovers(slot).len(), 3 + 3 + 1, "{:?}", leftovers(slot));
    // Hosts reach the gateway and each other: a listener on host 1, a
    // client on host 2, once the listener listens (`ip netns exec` can take
    // seconds to start it while other tests make and drop namespaces).
    let listener = network
        .host(1)
        .command("socat")
        .args(["-u", "TCP-LISTEN:7000", "STDOUT"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("socat");
    let listens = || {
        let out = network
            .host(1)
            .command("ss")
            .args(["-Hltn", "sport = :7000"])
            .output()
            .expect("ss");
        !String::from_utf8_lossy(&out.stdout).trim().is_empty()
    };
    let deadline = Instant::now() + LISTENER_DEADLINE;
    while !listens() {
        assert!(
            Instant::now() < deadline,
            "host 1's listener did not listen within {LISTENER_DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = format!("TCP:{}:7000,retry=50,interval=0.1", network.host(1).ip);
    let sent = network
        .host(2)
        .command("socat")
        .args(["-u", "EXEC:echo across", &target])
        .status()
        .expect("socat client");
    if !sent.success() {
        // Seen twice in full CI runs, never alone: say what the hosts had.
        let show = |args: &[&str]| output("ip", args);
        let (h1, h2) = (&network.host(1).name, &network.host(2).name);
        panic!(
            "host 2 does not reach host 1 ({}:7000; host 1 listening: {})\nnamespaces:\n{}\nlinks:\n{}\nbridge ports:\n{}\nhost 1:\n{}\nhost 2:\n{}{}",
            network.host(1).ip,
            listens(),
            show(&["netns", "list"]),
            show(&["-br", "link"]),
            output("bridge", &["link"]),
            show(&["-n", h1, "-br", "addr"]),
            show(&["-n", h2, "-br", "addr"]),
            show(&["-n", h2, "neigh"]),
        );
    }
    let out = listener.wait_with_output().expect("listener");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "across");

    let sleeper = network
        .host(0)
        .command("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    let pid = sleeper.id();
    drop(network);
    assert!(
        leftovers(slot).is_empty(),
        "left behind: {:?}",
        leftovers(slot)
    );
    let mut sleeper = sleeper;
    let status = sleeper.wait().expect("wait");
    assert!(!status.success(), "process {pid} was killed: {status}");
}

/// A process started on a host a moment before its network is dropped is
/// killed too, wherever it is on its way into the namespace (`ip netns
/// exec` opens the namespace, then enters it, then runs the program): it
/// does not live on in a namespace no longer named. 150 rounds, each
/// dropping the network within 0.8 ms of the spawn (the window is a few
/// microseconds wide: before the fix, one round in about 200 failed).
#[test]
fn a_process_started_just_before_the_drop_does_not_outlive_its_network() {
    if !net::usable("net tests") {
        return;
    }
    for round in 0..150 {
        let network = Network::create("race", 1).expect("network");
        let mut sleeper = network
            .host(0)
            .command("sleep")
            .arg("600")
            .stderr(Stdio::null())
            .spawn()
            .expect("sleep");
        std::thread::sleep(Duration::from_micros(rand::random_range(0..800)));
        drop(network);
        let deadline = Instant::now() + Duration::from_secs(10);
        let ended = loop {
            match sleeper.try_wait().expect("try_wait") {
                Some(status) => break Some(status),
                None if Instant::now() > deadline => break None,
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        if ended.is_none() {
            let _ = sleeper.kill();
            let _ = sleeper.wait();
        }
        assert!(
            ended.is_some_and(|status| !status.success()),
            "round {round}: the process outlived its network ({ended:?})"
        );
    }
}

#[test]
fn networks_made_at_once_get_their_own_slots_and_a_new_one_clears_a_crashed_ones_leftovers() {
    if !net::usable("net tests") {
        return;
    }
    let a = Network::create("a", 1).expect("a");
    let b = Network::create("b", 1).expect("b");
    assert_ne!(a.slot(), b.slot());
    assert_ne!(a.gateway(), b.gateway());
    assert_ne!(a.host(0).name, b.host(0).name);
    drop(b);
    drop(a);
    // What a crashed run leaves: a namespace with a process, a host link,
    // in a slot free a moment ago. The next network takes the lowest free
    // slot, which is that one unless another network took it meanwhile
    // (the other tests here make theirs at the same time, and hold them
    // for seconds): then try again, in whatever slot is free then.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let slot = Network::create("probe", 1).expect("probe").slot();
        let ns = format!("jq{slot}-crashed-h0");
        let status = Command::new("ip").args(["netns", "add", &ns]).status();
        assert!(status.is_ok_and(|s| s.success()), "make {ns}");
        let link = format!("jq{slot}v9");
        let _ = Command::new("ip")
            .args([
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])
            .status();
        let mut orphan = Command::new("ip")
            .args(["netns", "exec", &ns, "sleep", "600"])
            .spawn()
            .expect("an orphan");
        let network = Network::create("after", 1).expect("network");
        if network.slot() != slot {
            drop(network);
            let _ = orphan.kill();
            let _ = orphan.wait();
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let left = leftovers(slot);
        assert!(
            !left
                .iter()
                .any(|l| l.contains("crashed") || l.ends_with("v9")),
            "stale objects survived: {left:?}"
        );
        assert!(
            !orphan.wait().expect("wait").success(),
            "the orphan was killed"
        );
        return;
    }
    panic!("another network took the free slot every time for a minute");
}
