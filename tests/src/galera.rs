//! A real MariaDB Galera cluster for tests: N `mariadbd` nodes (galera-4,
//! `binlog_format = ROW`, `innodb_autoinc_lock_mode = 2`, SST by rsync),
//! each with its own datadir and its own address.
//!
//! ```no_run
//! # fn main() -> Result<(), String> {
//! let cluster = jobq_tests::galera::Cluster::start("doc", 3)?;
//! let url = cluster.url(1); // mysql://jobq@10.x.y.z:3306/jobq
//! cluster.kill(1);          // SIGKILL that node's mariadbd
//! cluster.restart(1)?;      // rejoins (IST), waits until Synced
//! # Ok(()) }
//! ```
//!
//! - Node 0 bootstraps the cluster (`--wsrep-new-cluster`) from a datadir
//!   made by `mariadb-install-db`; the others start from empty datadirs and
//!   join by SST (rsync). [`Cluster::start`] returns once every node reports
//!   `wsrep_local_state_comment = Synced` and `wsrep_cluster_size = N`.
//! - The user `jobq@'%'` (no password, every privilege) and the database
//!   `jobq` exist; tests make databases of their own for their tables.
//! - Each cluster takes a slot (`/tmp/jobq-galera/slot<k>.owner` names the
//!   process that holds it), which names its directory, its addresses and its
//!   processes; a slot whose owner is gone is cleaned (every process naming
//!   its directory killed, files removed) when it is taken again.
//! - Everything goes when the [`Cluster`] is dropped, and, for the one
//!   [`shared`] cluster of a test binary (statics are never dropped), when
//!   the test process exits however it exits: a watchdog process started
//!   with the cluster waits for the end of its stdin, a pipe only the test
//!   process holds, and then kills the nodes and removes their files.
//!
//! Addresses: each node runs in a network namespace of its own, a host of
//! a [`Network`] (`tests/src/net.rs`), and listens on that host's address
//! with the standard ports (3306 MySQL, 4567 group communication, 4568
//! IST, 4444 SST); the test process reaches it over the network's bridge,
//! and [`Cluster::host`] can cut a node off or delay its links. Start one
//! by hand with `scripts/galera.sh`.

use std::fs::{self, File};
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::net::{Host, Network};
use std::time::{Duration, Instant};

/// The galera-4 provider Debian's `galera-4` package installs.
pub const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";
const MARIADBD: &str = "/usr/sbin/mariadbd";
const ROOT: &str = "/tmp/jobq-galera";
const SLOTS: u8 = 64;
/// How long a node may take to reach Synced (bootstrap, SST, IST).
const SYNC_DEADLINE: Duration = Duration::from_secs(90);

/// Whether this machine can run a Galera cluster: `Ok` or why not. Tests
/// skip with the reason printed, except under `CI=true`, where they fail.
pub fn available() -> Result<(), String> {
    crate::net::available()?;
    for path in [
        MARIADBD,
        PROVIDER,
        "/usr/bin/mariadb-install-db",
        "/usr/bin/rsync",
    ] {
        if !Path::new(path).exists() {
            return Err(format!("{path} is missing"));
        }
    }
    let client = Command::new("mariadb").arg("--version").output();
    if !client.is_ok_and(|o| o.status.success()) {
        return Err("the `mariadb` client is missing".into());
    }
    Ok(())
}

/// [`available`], as a test's guard: `true` to run, `false` (with a
/// message) to skip; panics under `CI=true`, where nothing is skipped.
pub fn should_run(test: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{test}: a Galera cluster cannot run here ({why}), and under CI=true nothing is skipped"
            )
        }
        Err(why) => {
            eprintln!("skipped {test}: a Galera cluster cannot run here: {why}");
            false
        }
    }
}

/// The nodes' URLs (database `jobq`, node 0 first) of the cluster a whole
/// test run shares, if it has one: `scripts/test.sh` starts one for a
/// workspace run and names them in `JOBQ_GALERA_URLS` (comma-separated), so
/// the test binaries that only connect to a cluster ([`crate::TestDb::galera`])
/// do not each start their own. Tests that kill, restart or cut off nodes
/// take [`shared`]'s cluster (their binary's own) instead.
pub fn run_urls() -> Option<Vec<String>> {
    let urls = std::env::var("JOBQ_GALERA_URLS").ok()?;
    let urls: Vec<String> = urls
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    (!urls.is_empty()).then_some(urls)
}

/// The cluster of this test binary, started by the first test that asks
/// (3 nodes, or `JOBQ_GALERA_NODES`) and shared by all of them; each test
/// uses databases and queues of its own. Torn down when the process exits.
pub fn shared() -> &'static Cluster {
    // A start that failed is not tried again by every test.
    static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
    let cluster = SHARED.get_or_init(|| {
        let nodes = std::env::var("JOBQ_GALERA_NODES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(3);
        Cluster::start("shared", nodes)
    });
    match cluster {
        Ok(cluster) => cluster,
        Err(e) => panic!("the Galera cluster: {e}"),
    }
}

/// A running Galera cluster; dropping it kills its nodes and removes their files.
#[derive(Debug)]
pub struct Cluster {
    /// The nodes' hosts; dropped after the nodes are killed.
    net: Network,
    dir: PathBuf,
    nodes: Vec<Mutex<Node>>,
    /// Held for the life of the cluster: the slot is ours.
    _owner: SlotOwner,
    /// The watchdog: the end of its stdin (this process gone) makes it
    /// clean up; a drop stops it first and cleans up itself.
    watchdog: Option<Child>,
}

#[derive(Debug)]
struct Node {
    ip: Ipv4Addr,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn datadir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("mysqld.sock")
    }

    fn config(&self) -> PathBuf {
        self.dir.join("my.cnf")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("error.log")
    }
}

impl Cluster {
    /// Starts a cluster of `nodes` nodes and waits until every one is
    /// Synced; `prefix` names it in process lists and logs.
    pub fn start(prefix: &str, nodes: usize) -> Result<Self, String> {
        if !(1..=9).contains(&nodes) {
            return Err(format!("a cluster has 1 to 9 nodes, not {nodes}"));
        }
        let (slot, owner) = take_slot()?;
        let dir = Path::new(ROOT).join(format!("slot{slot}"));
        clean_slot(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let net = Network::create(&format!("gal{slot}"), nodes)?;
        let ips: Vec<Ipv4Addr> = net.hosts().iter().map(|h| h.ip).collect();
        let cluster_address = ips
            .iter()
            .map(Ipv4Addr::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let name = format!("jobq-{prefix}-{slot}");
        let mut list = Vec::new();
        for (i, ip) in ips.iter().enumerate() {
            let node = Node {
                ip: *ip,
                dir: dir.join(format!("node{i}")),
                child: None,
            };
            fs::create_dir_all(node.datadir()).map_err(|e| format!("create datadir: {e}"))?;
            fs::write(node.config(), config(&node, i, &name, &cluster_address))
                .map_err(|e| format!("write my.cnf: {e}"))?;
            // mariadbd drops to `mysql`, and so does the rsync daemon of an
            // SST it receives (run as root, rsync would write as `nobody`).
            let chown = Command::new("chown")
                .args(["-R", "mysql:mysql"])
                .arg(&node.dir)
                .status();
            if !chown.is_ok_and(|s| s.success()) {
                return Err(format!("chown {} to mysql", node.dir.display()));
            }
            list.push(Mutex::new(node));
        }
        let mut cluster = Self {
            net,
            dir,
            nodes: list,
            _owner: owner,
            watchdog: None,
        };
        cluster.watchdog = Some(cluster.watchdog()?);
        cluster.bootstrap()?;
        for i in 1..nodes {
            cluster.spawn(i, false)?;
        }
        for i in 0..nodes {
            cluster.wait_synced(i)?;
        }
        Ok(cluster)
    }

    /// How many nodes it has.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it has no nodes (never: a cluster has at least one).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `node`'s host: its namespace, to cut it off ([`Host::cut`]) or
    /// delay its links.
    pub fn host(&self, node: usize) -> &Host {
        self.net.host(node)
    }

    /// The address node `node` listens on (port 3306).
    pub fn ip(&self, node: usize) -> Ipv4Addr {
        self.node(node).ip
    }

    /// A URL of the database `jobq` on node `node`.
    pub fn url(&self, node: usize) -> String {
        self.url_of(node, "jobq")
    }

    /// A URL of the database `database` on node `node`.
    pub fn url_of(&self, node: usize, database: &str) -> String {
        format!("mysql://jobq@{}:3306/{database}", self.ip(node))
    }

    /// A URL of database `database` on node `node` as root, over the
    /// node's socket (for what the application user may not do: a
    /// `FLUSH TABLES WITH READ LOCK` that holds the node's applier).
    pub fn root_url_of(&self, node: usize, database: &str) -> String {
        format!(
            "mysql://root@localhost/{database}?socket={}",
            self.node(node).socket().display()
        )
    }

    /// Every node's URL of `database`, node 0 first.
    pub fn urls_of(&self, database: &str) -> Vec<String> {
        (0..self.len()).map(|i| self.url_of(i, database)).collect()
    }

    /// Kills node `node`'s `mariadbd` with SIGKILL and reaps it.
    pub fn kill(&self, node: usize) {
        let mut n = self.node(node);
        if let Some(mut child) = n.child.take() {
            // The whole group: an SST's script and rsync daemon outlive mariadbd.
            kill_group(child.id());
            let _ = child.wait();
        }
    }

    /// Starts node `node` again (after [`kill`](Self::kill)): it rejoins the
    /// cluster, by IST when the others still hold what it missed; returns
    /// once it is Synced.
    pub fn restart(&self, node: usize) -> Result<(), String> {
        if self.node(node).child.is_some() {
            return Err(format!("node {node} is running"));
        }
        self.spawn(node, false)?;
        self.wait_synced(node)
    }

    /// Runs `sql` as root on node `node` (the `mariadb` client over the
    /// node's socket); its output, tab-separated, without column names.
    pub fn sql(&self, node: usize, sql: &str) -> Result<String, String> {
        let socket = self.node(node).socket();
        client(&socket, sql)
    }

    /// One status variable of node `node` (`SHOW GLOBAL STATUS`).
    pub fn status(&self, node: usize, variable: &str) -> Result<String, String> {
        let out = self.sql(node, &format!("SHOW GLOBAL STATUS LIKE '{variable}'"))?;
        out.split('\t')
            .nth(1)
            .map(|v| v.trim().to_owned())
            .ok_or_else(|| format!("no status variable {variable}"))
    }

    /// The sum over the running nodes of a counter status variable
    /// (`wsrep_local_cert_failures`, `wsrep_local_bf_aborts`…).
    pub fn total(&self, variable: &str) -> u64 {
        (0..self.len())
            .filter(|&i| self.node(i).child.is_some())
            .filter_map(|i| self.status(i, variable).ok()?.parse::<u64>().ok())
            .sum()
    }

    /// A database of one test's own (`jobq_g_<test>_<random>`), made on
    /// node 0 and returned once every running node has it; dropped with
    /// the returned value.
    pub fn database(&self, test: &str) -> Result<Database<'_>, String> {
        let name = format!("jobq_g_{test}_{:08x}", rand::random::<u32>());
        self.sql(0, &format!("CREATE DATABASE {name}"))?;
        let start = Instant::now();
        let running: Vec<usize> = (0..self.len())
            .filter(|&i| self.node(i).child.is_some())
            .collect();
        for node in running {
            let has = format!(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{name}'"
            );
            while self.sql(node, &has)?.trim() != "1" {
                if start.elapsed() > SYNC_DEADLINE {
                    return Err(format!("node {node} does not list the database {name}"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(Database {
            cluster: self,
            name,
        })
    }

    /// Kills every node and removes the cluster's files (also on drop).
    pub fn stop(self) {}

    /// Node `node`'s whole error log.
    pub fn log(&self, node: usize) -> String {
        fs::read_to_string(self.node(node).log()).unwrap_or_default()
    }

    /// The tail of node `node`'s error log, for a failure's message.
    pub fn log_tail(&self, node: usize) -> String {
        let log = fs::read_to_string(self.node(node).log()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn node(&self, node: usize) -> std::sync::MutexGuard<'_, Node> {
        self.nodes[node]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Node 0: a fresh datadir, a new cluster, and jobq's user.
    fn bootstrap(&self) -> Result<(), String> {
        let datadir = self.node(0).datadir();
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .args([
                "--user=mysql",
                "--skip-test-db",
                "--auth-root-authentication-method=socket",
            ])
            .output()
            .map_err(|e| format!("mariadb-install-db: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mariadb-install-db failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        self.spawn(0, true)?;
        self.wait_synced(0)?;
        self.sql(
            0,
            "CREATE USER IF NOT EXISTS 'jobq'@'%'; GRANT ALL ON *.* TO 'jobq'@'%'; \
             CREATE DATABASE IF NOT EXISTS jobq",
        )?;
        Ok(())
    }

    fn spawn(&self, node: usize, new_cluster: bool) -> Result<(), String> {
        let mut n = self.node(node);
        let mut command = self.net.host(node).command(MARIADBD);
        command.arg(format!("--defaults-file={}", n.config().display()));
        if new_cluster {
            command.arg("--wsrep-new-cluster");
        }
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start mariadbd of node {node}: {e}"))?;
        let _ = fs::write(n.dir.join("pid"), child.id().to_string());
        n.child = Some(child);
        Ok(())
    }

    /// Waits until node `node` is Synced in a cluster of all the running nodes.
    fn wait_synced(&self, node: usize) -> Result<(), String> {
        let start = Instant::now();
        let mut last;
        loop {
            let exited = self
                .node(node)
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok())
                .flatten();
            if let Some(status) = exited {
                return Err(format!(
                    "node {node}'s mariadbd exited ({status}):\n{}",
                    self.log_tail(node)
                ));
            }
            let running = self
                .nodes
                .iter()
                .filter(|n| {
                    n.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .child
                        .is_some()
                })
                .count();
            match self.sql(
                node,
                "SELECT MAX(IF(VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT', VARIABLE_VALUE, NULL)), \
                 MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_SIZE', VARIABLE_VALUE, NULL)), \
                 MAX(IF(VARIABLE_NAME = 'WSREP_READY', VARIABLE_VALUE, NULL)) \
                 FROM information_schema.GLOBAL_STATUS",
            ) {
                Ok(out) => {
                    let fields: Vec<&str> = out.trim().split('\t').collect();
                    if fields.as_slice() == ["Synced", &running.to_string(), "ON"] {
                        return Ok(());
                    }
                    last = out.trim().to_owned();
                }
                Err(e) => last = e,
            }
            if start.elapsed() > SYNC_DEADLINE {
                return Err(format!(
                    "node {node} not Synced in a cluster of {running} after {SYNC_DEADLINE:?} (last: {last}):\n{}",
                    self.log_tail(node)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A process that cleans the slot up once this process is gone.
    fn watchdog(&self) -> Result<Child, String> {
        // The nodes' namespaces too (the network of the shared cluster is
        // never dropped; their names hold this cluster's slot, so no other
        // cluster has them). Not the bridge: the network's slot may be
        // taken again the moment this process is gone (its lock goes with
        // it), by a network whose bridge has the same name; `net` removes
        // a stale bridge when it takes the slot.
        let namespaces: Vec<&str> = self.net.hosts().iter().map(|h| h.name.as_str()).collect();
        let script = format!(
            "cat >/dev/null; for p in {dir}/node*/pid; do [ -f \"$p\" ] && /bin/kill -9 -- \"-$(cat \"$p\")\" 2>/dev/null; done; \
             for ns in {namespaces}; do ip netns pids $ns 2>/dev/null | xargs -r /bin/kill -9; ip netns del $ns 2>/dev/null; done; \
             rm -rf {dir}",
            dir = self.dir.display(),
            namespaces = namespaces.join(" "),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start the watchdog: {e}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A database of one test's own on a [`Cluster`], dropped with this.
#[derive(Debug)]
pub struct Database<'c> {
    cluster: &'c Cluster,
    name: String,
}

impl Database<'_> {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its URL on node `node`.
    pub fn url(&self, node: usize) -> String {
        self.cluster.url_of(node, &self.name)
    }

    /// Its URL on every node, node 0 first.
    pub fn urls(&self) -> Vec<String> {
        self.cluster.urls_of(&self.name)
    }
}

impl Drop for Database<'_> {
    fn drop(&mut self) {
        if let Err(e) = self
            .cluster
            .sql(0, &format!("DROP DATABASE IF EXISTS {}", self.name))
        {
            eprintln!("could not drop {}: {e}", self.name);
        }
    }
}

/// A slot taken: `slot<k>.owner` holds this process's id, removed on drop.
#[derive(Debug)]
struct SlotOwner(PathBuf);

impl Drop for SlotOwner {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// The first free slot: no live process owns it (its owner file is
/// missing, or names a process that is gone) and none runs from its directory.
fn take_slot() -> Result<(u8, SlotOwner), String> {
    fs::create_dir_all(ROOT).map_err(|e| format!("create {ROOT}: {e}"))?;
    for slot in 0..SLOTS {
        let owner = Path::new(ROOT).join(format!("slot{slot}.owner"));
        if let Ok(pid) = fs::read_to_string(&owner) {
            if Path::new(&format!("/proc/{}", pid.trim())).exists() {
                continue;
            }
            let _ = fs::remove_file(&owner);
        }
        let dir = Path::new(ROOT).join(format!("slot{slot}"));
        if !processes_of(&dir).is_empty() {
            continue;
        }
        let created = File::options().create_new(true).write(true).open(&owner);
        if let Ok(mut file) = created {
            writeln!(file, "{}", std::process::id())
                .map_err(|e| format!("write {}: {e}", owner.display()))?;
            return Ok((slot, SlotOwner(owner)));
        }
    }
    Err(format!("all {SLOTS} Galera slots under {ROOT} are taken"))
}

/// The processes (but this one) whose command line names a path under `dir`.
fn processes_of(dir: &Path) -> Vec<u32> {
    let mark = format!("{}/", dir.display());
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
            (pid != std::process::id() && String::from_utf8_lossy(&cmdline).contains(&mark))
                .then_some(pid)
        })
        .collect()
}

/// Kills what a crashed run left in a slot (every process whose command
/// line names the slot's directory: its nodes, their SST scripts and rsync
/// daemons) and removes its directory.
fn clean_slot(dir: &Path) {
    for pid in processes_of(dir) {
        let _ = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    let _ = fs::remove_dir_all(dir);
}

/// SIGKILLs the process group `pid` leads (a node's mariadbd and what it started).
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
}

/// Runs `sql` through the `mariadb` client as root over `socket`.
fn client(socket: &Path, sql: &str) -> Result<String, String> {
    let out = Command::new("mariadb")
        .arg("--no-defaults")
        .arg(format!("--socket={}", socket.display()))
        .args([
            "-uroot",
            "--batch",
            "--skip-column-names",
            "--connect-timeout=2",
            "-e",
            sql,
        ])
        .output()
        .map_err(|e| format!("mariadb client: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Node `index`'s `my.cnf`: read with `--defaults-file`, so nothing of
/// the machine's `/etc/mysql` applies.
fn config(node: &Node, index: usize, cluster: &str, cluster_address: &str) -> String {
    format!(
        "[mysqld]
user = mysql
datadir = {datadir}
socket = {socket}
pid-file = {dir}/mysqld.pid
log-error = {log}
bind-address = {ip}
port = 3306
skip-name-resolve
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
innodb_buffer_pool_size = 64M
innodb_log_file_size = 32M
innodb_flush_log_at_trx_commit = 2
max_connections = 300
performance_schema = OFF
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
wsrep_on = ON
wsrep_provider = {provider}
wsrep_cluster_name = {cluster}
wsrep_cluster_address = gcomm://{cluster_address}
wsrep_node_name = node{index}
wsrep_node_address = {ip}
wsrep_sst_receive_address = {ip}:4444
wsrep_sst_method = rsync
wsrep_provider_options = \"gmcast.listen_addr=tcp://{ip}:4567; ist.recv_addr={ip}:4568; gcache.size=128M\"
",
        datadir = node.datadir().display(),
        socket = node.socket().display(),
        dir = node.dir.display(),
        log = node.log().display(),
        ip = node.ip,
        provider = PROVIDER,
    )
}
