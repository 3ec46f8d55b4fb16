//! The chaos harness: worker *processes* drain a queue while a controller
//! `kill -9`s them at random and, optionally, the database server is stopped
//! and started again mid-drain. At the end every promise is checked from the
//! database:
//!
//! - every job is `done`; none is `pending`, `processing` or `failed`;
//! - the side-effect table has exactly one row per job (handlers insert it
//!   keyed by the job's idempotency key, insert-or-ignore);
//! - the append-only execution log has at least one row per job, no attempt
//!   of a job ran twice, and every execution but a job's last is explained by
//!   a fault (its worker was killed, or it overlapped the database outage);
//! - no settle overwrote a newer claim: a job's row was finished by its last
//!   claim (`attempts` and `claimed_by` are the last execution's, and the row
//!   was marked done only after that execution's handler had finished).
//!
//! Workers run on this host, or on the hosts of a test network
//! ([`Placement`], [`crate::net`]), where one host can be cut off from the
//! database mid-drain while its workers keep running ([`Partition`]): every
//! execution a partitioned worker repeats is then explained by the partition.
//!
//! Workers are the `jobq-chaos-worker` binary of this crate: real
//! [`jobq_runtime::Worker`]s, configured by `JOBQ_CHAOS_*` variables; they shut
//! down gracefully when their stdin closes, so they also stop when the
//! controller dies. Everything is bounded: a deadline on the drain, a
//! deadline in every worker.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jobq_runtime::{Batch, BatchCallback, Enqueue, Job, Jobq, Workflow};

use crate::net::Host;
use crate::services::{RestoreOnDrop, Server};
use crate::sql::{Arg, Db};
use crate::{TestDb, unique_queue};

/// The registered name of the chaos job (its handler is in the worker binary).
pub const JOB_NAME: &str = "jobq_chaos";
/// Attempts a chaos job gets: kills must never exhaust them.
pub const MAX_ATTEMPTS: u32 = 1000;

/// Whether the long form was asked for (`JOBQ_CHAOS_LONG=1`).
pub fn long() -> bool {
    std::env::var("JOBQ_CHAOS_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The chaos job's payload, for enqueueing; the worker binary's `#[job]`
/// of the same name decodes it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChaosJob {
    /// The run it belongs to.
    pub run: String,
    /// Its number in the run.
    pub n: u64,
}

impl Job for ChaosJob {
    const NAME: &'static str = JOB_NAME;
    const MAX_ATTEMPTS: u32 = MAX_ATTEMPTS;
}

/// Microseconds since the Unix epoch, by this machine's clock.
pub fn now_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// Creates the harness's two tables (idempotent).
pub async fn create_tables(db: &Db) -> sqlx::Result<()> {
    let statements: &[&str] = match db {
        Db::MySql(_) => &[
            "CREATE TABLE IF NOT EXISTS jobq_chaos_attempts (\
               run VARCHAR(64) NOT NULL, job_id BIGINT NOT NULL, attempt INT NOT NULL, \
               pid BIGINT NOT NULL, worker VARCHAR(255) NOT NULL, \
               started_us BIGINT NOT NULL, finished_us BIGINT NULL, \
               UNIQUE KEY jobq_chaos_attempts_run (run, job_id, attempt, pid)\
             ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
            "CREATE TABLE IF NOT EXISTS jobq_chaos_effects (\
               idem_key VARCHAR(255) NOT NULL PRIMARY KEY, run VARCHAR(64) NOT NULL, \
               job_id BIGINT NOT NULL, attempt INT NOT NULL, pid BIGINT NOT NULL, \
               KEY jobq_chaos_effects_run (run)\
             ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
        ],
        _ => &[
            "CREATE TABLE IF NOT EXISTS jobq_chaos_attempts (\
               run TEXT NOT NULL, job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, \
               pid BIGINT NOT NULL, worker TEXT NOT NULL, \
               started_us BIGINT NOT NULL, finished_us BIGINT NULL)",
            "CREATE UNIQUE INDEX IF NOT EXISTS jobq_chaos_attempts_run \
               ON jobq_chaos_attempts (run, job_id, attempt, pid)",
            "CREATE TABLE IF NOT EXISTS jobq_chaos_effects (\
               idem_key TEXT NOT NULL PRIMARY KEY, run TEXT NOT NULL, \
               job_id BIGINT NOT NULL, attempt INTEGER NOT NULL, pid BIGINT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS jobq_chaos_effects_run ON jobq_chaos_effects (run)",
        ],
    };
    for sql in statements {
        // Concurrent CREATE … IF NOT EXISTS can still collide on PostgreSQL's catalog.
        let mut tries = 0;
        loop {
            match db.execute(sql, &[]).await {
                Ok(_) => break,
                Err(_) if tries < 5 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// What a chaos handler writes, from inside a worker process.
#[derive(Debug, Clone)]
pub struct Effects {
    /// The database (the worker's own jobq pool).
    pub db: Db,
    /// This process's id.
    pub pid: u32,
    /// This worker's id, as written to `claimed_by`.
    pub worker: String,
    /// Longest random sleep of a handler, in ms.
    pub max_sleep_ms: u64,
}

impl Effects {
    /// Runs one statement until it succeeds, for up to 30 s: a handler that
    /// outlives a database outage (its writes are idempotent or keyed by attempt).
    async fn persist(&self, what: &str, sql: &str, args: &[Arg]) -> Result<(), String> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            match self.db.execute(sql, args).await {
                Ok(_) => return Ok(()),
                Err(error) if start.elapsed() < Duration::from_secs(30) => {
                    tracing::warn!(%error, what, "chaos handler: write failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(error) => return Err(format!("{what}: {error}")),
            }
        }
    }

    /// The chaos handler's body: log the execution, sleep 0–`max_sleep_ms`,
    /// record the side effect once per idempotency key, log the end.
    pub async fn run(&self, id: i64, attempt: u32, key: &str, run: &str) -> Result<(), String> {
        let attempt = i64::from(attempt);
        let pid = i64::from(self.pid);
        // Idempotent: a retried INSERT whose first try committed unseen
        // (the connection died with the server) must not log it twice.
        let log_start = self.db.pick(
            "INSERT IGNORE INTO jobq_chaos_attempts (run, job_id, attempt, pid, worker, started_us) \
             VALUES (?, ?, ?, ?, ?, ?)",
            "INSERT INTO jobq_chaos_attempts (run, job_id, attempt, pid, worker, started_us) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            "INSERT INTO jobq_chaos_attempts (run, job_id, attempt, pid, worker, started_us) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        );
        self.persist(
            "log the execution",
            log_start,
            &[
                run.into(),
                id.into(),
                attempt.into(),
                pid.into(),
                self.worker.as_str().into(),
                now_us().into(),
            ],
        )
        .await?;
        let sleep = rand::random_range(0..=self.max_sleep_ms);
        tokio::time::sleep(Duration::from_millis(sleep)).await;
        let insert_effect = self.db.pick(
            "INSERT IGNORE INTO jobq_chaos_effects (idem_key, run, job_id, attempt, pid) VALUES (?, ?, ?, ?, ?)",
            "INSERT INTO jobq_chaos_effects (idem_key, run, job_id, attempt, pid) VALUES (?, ?, ?, ?, ?) ON CONFLICT (idem_key) DO NOTHING",
            "INSERT INTO jobq_chaos_effects (idem_key, run, job_id, attempt, pid) VALUES (?, ?, ?, ?, ?) ON CONFLICT (idem_key) DO NOTHING",
        );
        self.persist(
            "record the side effect",
            insert_effect,
            &[
                key.into(),
                run.into(),
                id.into(),
                attempt.into(),
                pid.into(),
            ],
        )
        .await?;
        self.persist(
            "log the end of the execution",
            "UPDATE jobq_chaos_attempts SET finished_us = ? \
             WHERE run = ? AND job_id = ? AND attempt = ? AND pid = ?",
            &[
                now_us().into(),
                run.into(),
                id.into(),
                attempt.into(),
                pid.into(),
            ],
        )
        .await
    }
}

/// A database outage during the drain.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// The server to stop and start.
    pub server: Server,
    /// Stop it once this fraction of the jobs is done.
    pub after_done: f64,
    /// Keep it down this long (plus however long stopping and starting take).
    pub down_for: Duration,
}

/// Where worker processes run: on the hosts of a test network, round-robin
/// (a replacement on the host of the worker it replaces), each host's
/// workers reaching the database at that host's URL (see
/// [`Host::url_via`]).
#[derive(Debug, Clone)]
pub struct Placement {
    /// The hosts, with the database URL as each reaches it.
    pub hosts: Vec<(Host, String)>,
}

/// One host of the [`Placement`] cut off from the database mid-drain (see
/// [`Host::cut`]) while its workers keep running, then healed.
#[derive(Debug, Clone, Copy)]
pub struct Partition {
    /// Which host of the placement.
    pub host: usize,
    /// Cut it once this fraction of the jobs is done.
    pub after_done: f64,
    /// Heal it after this long.
    pub cut_for: Duration,
}

/// A fault other than the local server's outage, run once mid-drain on a
/// blocking thread (a Galera node killed and later restarted, say);
/// executions that overlap it are explained by it, as by an outage.
#[derive(Clone)]
pub struct Fault {
    /// Names it in the summary.
    pub name: String,
    /// Start it once this fraction of the jobs is done.
    pub after_done: f64,
    /// Does it, returning when it is over (or why it failed).
    pub act: std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fault")
            .field("name", &self.name)
            .field("after_done", &self.after_done)
            .finish_non_exhaustive()
    }
}

/// One chaos run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Names the run in the summary.
    pub name: String,
    /// Jobs to drain.
    pub jobs: u64,
    /// Worker processes alive at any time.
    pub workers: usize,
    /// Concurrency of each worker.
    pub concurrency: usize,
    /// Each worker's lease.
    pub lease: Duration,
    /// Longest random sleep of a handler.
    pub max_sleep_ms: u64,
    /// Kill a random worker every `kill_every.0..kill_every.1`; `None`: no kills.
    pub kill_every: Option<(Duration, Duration)>,
    /// Stop and start the database mid-drain.
    pub outage: Option<Outage>,
    /// Where the workers run; `None`: on this host, at the test's URL.
    pub placement: Option<Placement>,
    /// Cut a host of the placement off mid-drain.
    pub partition: Option<Partition>,
    /// Another fault mid-drain (see [`Fault`]); not with `outage`.
    pub fault: Option<Fault>,
    /// The drain must be over by then.
    pub deadline: Duration,
    /// The database URL of each worker process, in turn (the n-th process
    /// started gets `urls[n % len]`: workers spread over a cluster's
    /// nodes); empty, every worker uses the test database's URL.
    pub urls: Vec<String>,
}

impl Config {
    /// `kill -9` a worker every 0.5–1 s for the whole drain: the short form
    /// (seconds, for `cargo test`) or, with `JOBQ_CHAOS_LONG=1`, the long one.
    pub fn kills(name: &str) -> Self {
        let long = long();
        Self {
            name: name.to_owned(),
            jobs: env_u64("JOBQ_CHAOS_JOBS").unwrap_or(if long { 40_000 } else { 1_500 }),
            workers: env_u64("JOBQ_CHAOS_WORKERS").map_or(if long { 8 } else { 3 }, |v| v as usize),
            concurrency: env_u64("JOBQ_CHAOS_CONCURRENCY").map_or(2, |v| v as usize),
            lease: Duration::from_millis(env_u64("JOBQ_CHAOS_LEASE_MS").unwrap_or(2_000)),
            max_sleep_ms: 50,
            kill_every: Some(if long {
                (Duration::from_millis(300), Duration::from_millis(800))
            } else {
                (Duration::from_millis(500), Duration::from_millis(1000))
            }),
            outage: None,
            fault: None,
            urls: Vec::new(),
            placement: None,
            partition: None,
            deadline: if long {
                Duration::from_secs(1_800)
            } else {
                Duration::from_secs(120)
            },
        }
    }

    /// The database is stopped and started once mid-drain; workers keep
    /// running (in the long form they are also killed at random).
    pub fn outage(name: &str, server: Server) -> Self {
        let long = long();
        let mut config = Self::kills(name);
        config.jobs = env_u64("JOBQ_CHAOS_JOBS").unwrap_or(if long { 20_000 } else { 1_200 });
        if !long {
            config.kill_every = None;
        }
        config.outage = Some(Outage {
            server,
            after_done: 0.3,
            down_for: Duration::from_secs(if long { 10 } else { 2 }),
        });
        config
    }
}

impl Config {
    /// The database is down for three leases mid-drain while workers keep
    /// running with many jobs in hand (8 slots each, handlers up to 200 ms):
    /// every lease held during the outage expires, reapers return those jobs
    /// when the database is back, and the workers that still hold their
    /// stale attempts (running, or finished with the success not yet
    /// written) claim them again, batched with other jobs — the schedule
    /// under which a stale success once settled a job its own worker had
    /// re-claimed. About 30 s; the long form (`JOBQ_CHAOS_LONG=1`) is down
    /// 15 s with workers also being killed.
    pub fn outage_longer_than_lease(name: &str, server: Server) -> Self {
        let long = long();
        let mut config = Self::kills(name);
        config.jobs = env_u64("JOBQ_CHAOS_JOBS").unwrap_or(if long { 10_000 } else { 1_500 });
        config.concurrency = env_u64("JOBQ_CHAOS_CONCURRENCY").map_or(8, |v| v as usize);
        config.max_sleep_ms = 200;
        if !long {
            config.kill_every = None;
            config.deadline = Duration::from_secs(90);
        }
        config.outage = Some(Outage {
            server,
            after_done: 0.3,
            down_for: if long {
                Duration::from_secs(15)
            } else {
                3 * config.lease
            },
        });
        config
    }
}

impl Config {
    /// Many hosts, one database: worker processes spread over `placement`'s
    /// hosts (2 per host, 4 slots each) drain a backlog; once 30 % is done
    /// host 0 is cut off from the database for three leases while its
    /// handlers keep running, then healed. Its jobs are reaped and run again
    /// on the other hosts, its late settles are fenced out. The short form
    /// drains 2,000 jobs (about 20–40 s); `JOBQ_CHAOS_LONG=1` drains 20,000
    /// and cuts for 15 s.
    pub fn many_hosts(name: &str, placement: Placement) -> Self {
        let long = long();
        let mut config = Self::kills(name);
        config.jobs = env_u64("JOBQ_CHAOS_JOBS").unwrap_or(if long { 20_000 } else { 2_000 });
        config.workers =
            env_u64("JOBQ_CHAOS_WORKERS").map_or(2 * placement.hosts.len(), |v| v as usize);
        config.concurrency = env_u64("JOBQ_CHAOS_CONCURRENCY").map_or(4, |v| v as usize);
        config.kill_every = None;
        config.deadline = Duration::from_secs(if long { 600 } else { 90 });
        config.partition = Some(Partition {
            host: 0,
            after_done: 0.3,
            cut_for: if long {
                Duration::from_secs(15)
            } else {
                3 * config.lease
            },
        });
        config.placement = Some(placement);
        config
    }
}

fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.parse().ok()
}

/// What a run did; printed as its summary.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The config's name.
    pub name: String,
    /// Backend.
    pub backend: String,
    /// Jobs drained.
    pub jobs: u64,
    /// Worker processes started in all.
    pub processes: usize,
    /// Workers killed with SIGKILL.
    pub kills: usize,
    /// Database outages (stop + start) and how long each was down.
    pub outages: Vec<Duration>,
    /// Handler executions logged.
    pub executions: usize,
    /// Executions beyond the first of each job.
    pub re_executions: usize,
    /// Of those, explained by a kill / by the outage.
    pub re_executions_after_kill: usize,
    /// Of those, explained by the outage.
    pub re_executions_after_outage: usize,
    /// Partitions (cut + heal) and how long each lasted.
    pub partitions: Vec<Duration>,
    /// Re-executions explained by the partition (the earlier execution ran
    /// on the cut host, around the cut).
    pub re_executions_after_partition: usize,
    /// Longest time from the cut to the re-run elsewhere of a job the cut
    /// host held.
    pub max_partition_wait: Duration,
    /// Each re-execution explained by the partition: which attempt ran on
    /// which worker when, relative to the cut (ms), and where it ran next.
    pub partition_reruns: Vec<String>,
    /// Attempts stopped unsettled because their lease was lost (workers' logs).
    pub leases_lost: usize,
    /// Claims that never logged an execution (worker killed between claim and handler start).
    pub silent_claims: u64,
    /// Longest time from a kill to the start of the re-run of a job the killed worker held.
    pub max_orphan_wait: Duration,
    /// Mean of the same.
    pub mean_orphan_wait: Duration,
    /// How many re-runs those two are over: kills within a lease before an
    /// outage or two leases after it are not counted (their re-runs wait
    /// for the database as well).
    pub orphan_waits: usize,
    /// Settles fenced out (reported by workers' logs).
    pub fenced_out: usize,
    /// Warnings in workers' logs.
    pub warnings: usize,
    /// Times a worker's pool moved off a lost node of its connect list, and
    /// back to an earlier node once it was ready again (workers' logs).
    pub node_moves: (usize, usize),
    /// From the first worker start to the last job done.
    pub drain: Duration,
    /// What broke a promise (empty when all held).
    pub violations: Vec<String>,
    /// Where the workers' logs are.
    pub logs: PathBuf,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "chaos `{}` on {}:", self.name, self.backend)?;
        writeln!(
            f,
            "  jobs {} drained in {:.1?} ({:.0} jobs/s) by {} worker processes ({} started in all)",
            self.jobs,
            self.drain,
            self.jobs as f64 / self.drain.as_secs_f64().max(0.001),
            self.processes - self.kills,
            self.processes
        )?;
        writeln!(
            f,
            "  kills {}, outages {:?}, executions {}, re-executions {} (after a kill {}, after the outage {}), claims that never reached the handler {}",
            self.kills,
            self.outages,
            self.executions,
            self.re_executions,
            self.re_executions_after_kill,
            self.re_executions_after_outage,
            self.silent_claims
        )?;
        writeln!(
            f,
            "  orphan wait (kill → re-run start, over {} re-runs away from an outage): max {:.2?}, mean {:.2?}; fenced-out settles {}; worker warnings {}",
            self.orphan_waits,
            self.max_orphan_wait,
            self.mean_orphan_wait,
            self.fenced_out,
            self.warnings
        )?;
        if !self.partitions.is_empty() {
            writeln!(
                f,
                "  partitions {:?}: re-executions explained by them {}, cut → re-run elsewhere max {:.2?}; attempts stopped by a lost lease {}",
                self.partitions,
                self.re_executions_after_partition,
                self.max_partition_wait,
                self.leases_lost
            )?;
            for rerun in self.partition_reruns.iter().take(12) {
                writeln!(f, "    {rerun}")?;
            }
        }
        if self.node_moves != (0, 0) {
            writeln!(
                f,
                "  worker pools moved off a lost node {} times, back to their first node {} times",
                self.node_moves.0, self.node_moves.1
            )?;
        }
        if self.violations.is_empty() {
            writeln!(f, "  all invariants hold")
        } else {
            writeln!(f, "  VIOLATIONS ({}):", self.violations.len())?;
            for v in self.violations.iter().take(30) {
                writeln!(f, "    - {v}")?;
            }
            writeln!(f, "  worker logs: {}", self.logs.display())
        }?;
        if std::env::var_os("JOBQ_CHAOS_KEEP_LOGS").is_some() {
            writeln!(f, "  worker logs: {}", self.logs.display())?;
        }
        Ok(())
    }
}

/// One worker process.
#[derive(Debug)]
struct Proc {
    child: Child,
    pid: u32,
    /// The placement's host it runs on; `None`: this host.
    host: Option<usize>,
}

/// The worker processes of a run; kills what is left when dropped.
#[derive(Debug)]
struct Fleet {
    bin: PathBuf,
    env: Vec<(String, String)>,
    /// Per worker, in turn, its `JOBQ_CHAOS_URL` ([`Config::urls`]).
    urls: Vec<String>,
    log: PathBuf,
    /// The placement's hosts and their URLs (empty: workers run here).
    places: Vec<(Host, String)>,
    /// pid → the placement's host it ran on.
    host_of: HashMap<u32, usize>,
    live: Vec<Proc>,
    started: usize,
    /// pid → when it was killed (µs).
    killed: HashMap<u32, i64>,
    /// Exits nobody asked for.
    unexpected: Vec<String>,
}

impl Fleet {
    /// Starts a worker on the next host of the placement (round-robin).
    fn spawn(&mut self) {
        let host = (!self.places.is_empty()).then(|| self.started % self.places.len());
        self.spawn_on(host);
    }

    /// Starts a worker on `host` of the placement (`None`: here).
    fn spawn_on(&mut self, host: Option<usize>) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the workers' log");
        let mut command = match host {
            Some(i) => {
                let (host, url) = &self.places[i];
                let mut command = host.command(&self.bin);
                command.envs(self.env.iter().map(|(k, v)| (k, v)));
                command.env("JOBQ_CHAOS_URL", url);
                command
            }
            None => {
                let mut command = Command::new(&self.bin);
                command.envs(self.env.iter().map(|(k, v)| (k, v)));
                if !self.urls.is_empty() {
                    command.env("JOBQ_CHAOS_URL", &self.urls[self.started % self.urls.len()]);
                    // The connect list's moves, for the summary.
                    command.env(
                        "JOBQ_CHAOS_LOG",
                        "warn,jobq_runtime::store::mysql::failover=info",
                    );
                }
                command
            }
        };
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a chaos worker");
        self.started += 1;
        if let Some(i) = host {
            self.host_of.insert(child.id(), i);
        }
        self.live.push(Proc {
            pid: child.id(),
            child,
            host,
        });
    }

    /// The pids of the workers that ever ran on `host` of the placement.
    fn pids_on(&self, host: usize) -> HashSet<u32> {
        self.host_of
            .iter()
            .filter(|&(_, &h)| h == host)
            .map(|(&pid, _)| pid)
            .collect()
    }

    /// Kills a random worker; the host it ran on, to start its replacement there.
    fn kill_one(&mut self) -> Option<usize> {
        if self.live.is_empty() {
            return None;
        }
        let mut proc = self
            .live
            .swap_remove(rand::random_range(0..self.live.len()));
        let _ = proc.child.kill(); // SIGKILL
        let at = now_us();
        let _ = proc.child.wait();
        self.killed.insert(proc.pid, at);
        proc.host
    }

    /// Replaces workers that exited on their own (and notes them).
    fn check(&mut self) {
        let mut i = 0;
        while i < self.live.len() {
            if let Ok(Some(status)) = self.live[i].child.try_wait() {
                let proc = self.live.swap_remove(i);
                self.unexpected.push(format!(
                    "worker {} exited by itself mid-drain: {status}",
                    proc.pid
                ));
                self.spawn_on(proc.host);
            } else {
                i += 1;
            }
        }
    }

    /// Closes every worker's stdin (a graceful shutdown) and waits for them.
    async fn stop_all(&mut self, limit: Duration) -> Vec<(u32, Option<ExitStatus>)> {
        for proc in &mut self.live {
            drop(proc.child.stdin.take());
        }
        let start = Instant::now();
        let mut out = Vec::new();
        while let Some(mut proc) = self.live.pop() {
            loop {
                match proc.child.try_wait() {
                    Ok(Some(status)) => {
                        out.push((proc.pid, Some(status)));
                        break;
                    }
                    _ if start.elapsed() > limit => {
                        let _ = proc.child.kill();
                        let _ = proc.child.wait();
                        out.push((proc.pid, None));
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }
        out
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for proc in &mut self.live {
            let _ = proc.child.kill();
            let _ = proc.child.wait();
        }
    }
}

/// A job's row: id, status, attempts, claimed_by, finished_at (µs).
type JobRow = (i64, String, i32, Option<String>, Option<i64>);
/// A logged execution: job, attempt, pid, worker, started (µs), finished (µs).
type ExecutionRow = (i64, i32, i64, String, i64, Option<i64>);

/// One logged execution.
#[derive(Debug, Clone)]
struct Execution {
    attempt: i64,
    pid: u32,
    worker: String,
    started_us: i64,
    finished_us: Option<i64>,
}

/// Runs one chaos drain against `db` with worker binary `bin`; prints the
/// summary and panics if a promise was broken.
pub async fn run(db: &TestDb, bin: &str, config: Config) -> Report {
    let report = drain(db, bin, config).await;
    println!("{report}");
    assert!(
        report.violations.is_empty(),
        "chaos `{}` on {} broke {} promise(s); see the summary above",
        report.name,
        report.backend,
        report.violations.len()
    );
    report
}

/// Runs one chaos drain whose outage stops the local server of
/// `config.outage`, against that server's database from the environment.
/// Where the server cannot be restarted from here the test is skipped,
/// except under `CI=true`, where it fails.
pub async fn run_outage(bin: &str, config: Config) {
    let server = config
        .outage
        .as_ref()
        .expect("an outage config names its server")
        .server;
    let (db, name) = match server {
        Server::MariaDb => (TestDb::mysql(), "MariaDB"),
        Server::Postgres => (TestDb::postgres(), "PostgreSQL"),
    };
    let Some(db) = db else { return };
    if !outage_tests_enabled(name) {
        return;
    }
    if !server.controllable(db.url()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true the local {name} must be restartable"
        );
        eprintln!(
            "skipped: {name} at {} cannot be restarted from here",
            db.url()
        );
        return;
    }
    run(&db, bin, config).await;
}

/// Whether the outage tests may stop and restart the machine's servers:
/// only when `JOBQ_OUTAGE_TESTS=1` (`.ci/run` sets it). Unset, they are
/// skipped with a line saying how to run them; under `CI=true` the variable
/// must be set (to `1` or `0`), so that CI cannot lose them by accident.
fn outage_tests_enabled(name: &str) -> bool {
    match std::env::var("JOBQ_OUTAGE_TESTS").as_deref() {
        Ok("1") => true,
        Ok("0") => {
            eprintln!("skipped: JOBQ_OUTAGE_TESTS=0 (this test stops and restarts {name})");
            false
        }
        Ok(other) => panic!("JOBQ_OUTAGE_TESTS={other:?}: expected 1 (run) or 0 (skip)"),
        Err(_) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "under CI=true set JOBQ_OUTAGE_TESTS=1 (stop and restart {name}) or 0 (skip)"
            );
            eprintln!(
                "skipped: this test stops and restarts the machine's {name}; set JOBQ_OUTAGE_TESTS=1 to run it"
            );
            false
        }
    }
}

async fn drain(db: &TestDb, bin: &str, config: Config) -> Report {
    let jobq = db.jobq().await;
    let sql = Db::of(&jobq);
    create_tables(&sql).await.expect("create the chaos tables");
    let run = format!("{:016x}", rand::random::<u64>());
    let queue = unique_queue(&format!("chaos-{}", config.name));
    let mut report = Report {
        name: config.name.clone(),
        backend: jobq.backend().to_string(),
        jobs: config.jobs,
        ..Report::default()
    };

    let (ids, order) = enqueue(&jobq, &run, &queue, config.jobs).await;

    let dir = std::env::temp_dir().join(format!("jobq-chaos-{run}"));
    std::fs::create_dir_all(&dir).expect("log dir");
    report.logs = dir.join("workers.log");
    let pool_size = config.concurrency + 4;
    let mut fleet = Fleet {
        bin: PathBuf::from(bin),
        env: vec![
            ("JOBQ_CHAOS_URL".into(), db.url().to_owned()),
            ("JOBQ_CHAOS_QUEUE".into(), queue.clone()),
            (
                "JOBQ_CHAOS_CONCURRENCY".into(),
                config.concurrency.to_string(),
            ),
            ("JOBQ_CHAOS_POOL".into(), pool_size.to_string()),
            (
                "JOBQ_CHAOS_LEASE_MS".into(),
                config.lease.as_millis().to_string(),
            ),
            (
                "JOBQ_CHAOS_MAX_SLEEP_MS".into(),
                config.max_sleep_ms.to_string(),
            ),
            (
                "JOBQ_CHAOS_MAX_SECS".into(),
                (config.deadline.as_secs() + 60).to_string(),
            ),
        ],
        urls: config.urls.clone(),
        log: report.logs.clone(),
        places: config
            .placement
            .as_ref()
            .map(|p| p.hosts.clone())
            .unwrap_or_default(),
        host_of: HashMap::new(),
        live: Vec::new(),
        started: 0,
        killed: HashMap::new(),
        unexpected: Vec::new(),
    };
    let _restore = config.outage.map(|o| RestoreOnDrop(o.server));
    // The outage, or the other fault: when it starts, and what it does.
    type Act = std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>;
    let fault: Option<(f64, Act)> = match (&config.outage, &config.fault) {
        (Some(outage), _) => {
            let outage = *outage;
            let act: Act = std::sync::Arc::new(move || outage.server.restart(outage.down_for));
            Some((outage.after_done, act))
        }
        (None, Some(fault)) => Some((fault.after_done, std::sync::Arc::clone(&fault.act))),
        (None, None) => None,
    };

    let start = Instant::now();
    for _ in 0..config.workers {
        fleet.spawn();
    }
    let next_kill_after = |range: (Duration, Duration)| {
        Duration::from_millis(rand::random_range(
            range.0.as_millis() as u64..=range.1.as_millis() as u64,
        ))
    };
    let mut next_kill = config
        .kill_every
        .map(|r| Instant::now() + next_kill_after(r));
    let mut outage_task: Option<tokio::task::JoinHandle<Result<(i64, i64), String>>> = None;
    let mut outage_window: Option<(i64, i64)> = None;
    // The partition's cut (µs, and when), then its window (cut, heal) in µs.
    let mut cut_at: Option<(i64, Instant)> = None;
    let mut partition_window: Option<(i64, i64)> = None;
    let lease_us = i64::try_from(config.lease.as_micros()).unwrap_or(i64::MAX);
    let mut last_progress = Instant::now() - Duration::from_secs(1);
    let mut done = 0;
    let mut timed_out = false;
    loop {
        fleet.check();
        if let (Some(at), Some(range)) = (next_kill, config.kill_every) {
            if Instant::now() >= at {
                match fleet.kill_one() {
                    Some(host) => fleet.spawn_on(Some(host)),
                    None => fleet.spawn(),
                }
                next_kill = Some(Instant::now() + next_kill_after(range));
            }
        }
        if let Some((after_done, act)) = &fault {
            if outage_task.is_none()
                && outage_window.is_none()
                && done as f64 >= after_done * config.jobs as f64
            {
                let act = std::sync::Arc::clone(act);
                outage_task = Some(tokio::task::spawn_blocking(move || {
                    let down = now_us();
                    act()?;
                    Ok((down, now_us()))
                }));
            }
            if outage_task.as_ref().is_some_and(|t| t.is_finished()) {
                let window = outage_task
                    .take()
                    .unwrap()
                    .await
                    .expect("outage task")
                    .unwrap_or_else(|e| panic!("the fault mid-drain failed: {e}"));
                report
                    .outages
                    .push(Duration::from_micros((window.1 - window.0) as u64));
                outage_window = Some(window);
            }
        }
        if let (Some(partition), Some(placement)) = (config.partition, &config.placement) {
            let host = &placement.hosts[partition.host].0;
            match cut_at {
                None if partition_window.is_none()
                    && done as f64 >= partition.after_done * config.jobs as f64 =>
                {
                    host.cut()
                        .unwrap_or_else(|e| panic!("cutting {} off failed: {e}", host.name));
                    cut_at = Some((now_us(), Instant::now()));
                }
                Some((cut_us, at)) if at.elapsed() >= partition.cut_for => {
                    host.heal()
                        .unwrap_or_else(|e| panic!("healing {} failed: {e}", host.name));
                    let window = (cut_us, now_us());
                    report
                        .partitions
                        .push(Duration::from_micros((window.1 - window.0) as u64));
                    partition_window = Some(window);
                    cut_at = None;
                }
                _ => {}
            }
        }
        if last_progress.elapsed() >= Duration::from_millis(200) {
            last_progress = Instant::now();
            // Fails while the database is down; the next try will do.
            if let Ok(counts) = jobq.counts(&queue).await {
                done = counts.done;
            }
            let outage_over = fault.is_none() || outage_window.is_some();
            // Healed two leases ago: the cut host's workers have renewed
            // (and lost) their leases and sent their late settles.
            let partition_over = config.partition.is_none()
                || partition_window.is_some_and(|(_, heal)| now_us() - heal >= 2 * lease_us);
            if done >= config.jobs && outage_over && partition_over {
                break;
            }
        }
        if start.elapsed() > config.deadline {
            timed_out = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    report.drain = start.elapsed();
    let exits = fleet.stop_all(Duration::from_secs(30)).await;
    report.processes = fleet.started;
    report.kills = fleet.killed.len();
    if timed_out {
        report.violations.push(format!(
            "the drain did not finish within {:?}: {done} of {} jobs done",
            config.deadline, config.jobs
        ));
    }
    report.violations.append(&mut fleet.unexpected);
    for (pid, status) in exits {
        match status {
            Some(status) if status.success() => {}
            Some(status) => report
                .violations
                .push(format!("worker {pid} did not shut down cleanly: {status}")),
            None => report.violations.push(format!(
                "worker {pid} did not stop within 30 s of its graceful shutdown"
            )),
        }
    }

    let partition = config
        .partition
        .zip(partition_window)
        .map(|(p, window)| Cut {
            pids: fleet.pids_on(p.host),
            window,
            // A reply held back by the cut can arrive up to about as long
            // again after the heal (TCP's retransmissions back off).
            late_by: p.cut_for,
        });
    check(
        &jobq,
        &sql,
        &run,
        &queue,
        &ids,
        &order,
        &fleet.killed,
        outage_window,
        partition.as_ref(),
        config.lease,
        &mut report,
    )
    .await;
    scan_logs(&mut report);
    report
}

/// Jobs of a composed part (a workflow's, a batch's) that must end only
/// after others: `(job, the jobs it follows)`.
type Order = Vec<(i64, Vec<i64>)>;

/// How many of a run's jobs make its workflow and its batch (see [`enqueue`]).
const COMPOSED: u64 = 44;

/// Enqueues the run's `jobs` chaos jobs: first (when there are enough) a
/// workflow — a root, 20 jobs after it, a join after those — and a batch
/// of 20 jobs with a finish and a success callback, so that their
/// releases, the sweep and the callbacks meet the kills and outages too;
/// then the rest one by one. The ids, and the order the composed jobs must
/// end in.
async fn enqueue(jobq: &Jobq, run: &str, queue: &str, jobs: u64) -> (Vec<i64>, Order) {
    let mut ids = Vec::with_capacity(jobs as usize);
    let mut order = Order::new();
    let job = |n: u64| {
        (
            ChaosJob {
                run: run.to_owned(),
                n,
            },
            Enqueue::new()
                .queue(queue)
                .idempotency_key(format!("chaos:{run}:{n}")),
        )
    };
    let mut first = 0;
    if jobs >= 4 * COMPOSED {
        let mut flow = Workflow::new(format!("chaos-{run}"));
        let (root, options) = job(0);
        flow.add_with("root", root, options);
        let middle: Vec<String> = (1..=20).map(|n| format!("m{n}")).collect();
        for (n, name) in (1..=20).zip(&middle) {
            let (step, options) = job(n);
            flow.add_with(name.clone(), step, options).after(["root"]);
        }
        let (join, options) = job(21);
        flow.add_with("join", join, options)
            .after(middle.iter().cloned());
        let stored = jobq
            .enqueue_workflow(flow)
            .await
            .expect("enqueue the chaos workflow");
        let of = |names: &[String]| names.iter().map(|n| stored.jobs[n]).collect::<Vec<_>>();
        for name in &middle {
            order.push((stored.jobs[name], vec![stored.jobs["root"]]));
        }
        order.push((stored.jobs["join"], of(&middle)));
        ids.extend(stored.jobs.values());

        let mut batch = Batch::new(format!("chaos-{run}"));
        for n in 22..42 {
            let (member, options) = job(n);
            batch.add_with(member, options);
        }
        for (n, when) in [(42, BatchCallback::Finish), (43, BatchCallback::Success)] {
            let (callback, options) = job(n);
            batch.on_with(when, callback, options);
        }
        let stored = jobq
            .enqueue_batch(batch)
            .await
            .expect("enqueue the chaos batch");
        for (_, callback) in &stored.callbacks {
            order.push((*callback, stored.jobs.clone()));
        }
        ids.extend(&stored.jobs);
        ids.extend(stored.callbacks.iter().map(|(_, id)| id));
        first = COMPOSED;
    }
    let numbers: Vec<u64> = (first..jobs).collect();
    for chunk in numbers.chunks(1000) {
        ids.extend(
            jobq.enqueue_many_with(chunk.iter().map(|&n| job(n)))
                .await
                .expect("enqueue the chaos jobs")
                .into_iter()
                .map(|e| e.id),
        );
    }
    (ids, order)
}

/// A partition as the checks see it.
#[derive(Debug)]
struct Cut {
    /// The workers on the cut host.
    pids: HashSet<u32>,
    /// Cut and heal, µs.
    window: (i64, i64),
    /// How long after the heal a stalled reply may still arrive.
    late_by: Duration,
}

/// Checks every promise from the database; notes what broke in `report`.
#[allow(clippy::too_many_arguments)]
async fn check(
    jobq: &Jobq,
    sql: &Db,
    run: &str,
    queue: &str,
    ids: &[i64],
    order: &Order,
    killed: &HashMap<u32, i64>,
    outage: Option<(i64, i64)>,
    partition: Option<&Cut>,
    lease: Duration,
    report: &mut Report,
) {
    let v = &mut report.violations;
    let counts = jobq.counts(queue).await.expect("counts");
    if counts.done != ids.len() as u64 || counts.total() != ids.len() as u64 {
        v.push(format!(
            "not every job is done: {counts:?} of {} jobs",
            ids.len()
        ));
    }

    // The jobs' rows.
    let rows_sql = sql.pick(
        "SELECT id, CAST(status AS CHAR), attempts, CAST(claimed_by AS CHAR), \
         TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', finished_at) \
         FROM jobq_jobs WHERE queue = ?",
        "SELECT id, status, attempts, claimed_by, \
         (extract(epoch FROM finished_at) * 1000000)::bigint \
         FROM jobq_jobs WHERE queue = ?",
        "SELECT id, status, attempts, claimed_by, finished_at FROM jobq_jobs WHERE queue = ?",
    );
    let rows: Vec<JobRow> = sql
        .fetch_all(rows_sql, &[queue.into()])
        .await
        .expect("read the jobs");
    let rows: BTreeMap<i64, (String, i32, Option<String>, Option<i64>)> = rows
        .into_iter()
        .map(|(id, s, a, c, f)| (id, (s, a, c, f)))
        .collect();

    // The workflow's and the batch's order: each job ended after the jobs
    // it follows (a dependent starts only after its dependencies' final
    // settles; a callback after its batch's jobs').
    let finished = |id: &i64| rows.get(id).and_then(|r| r.3);
    for (job, follows) in order {
        for before in follows {
            if let (Some(after), Some(first)) = (finished(job), finished(before)) {
                if after < first {
                    v.push(format!(
                        "job {job} ended at {after} µs, before job {before} it follows ended ({first} µs)"
                    ));
                }
            }
        }
    }

    // The side effects.
    let effects: Vec<(String, i64)> = sql
        .fetch_all(
            "SELECT idem_key, job_id FROM jobq_chaos_effects WHERE run = ?",
            &[run.into()],
        )
        .await
        .expect("read the effects");
    let mut effects_per_job: HashMap<i64, usize> = HashMap::new();
    for (key, job) in &effects {
        *effects_per_job.entry(*job).or_default() += 1;
        if !key.starts_with(&format!("chaos:{run}:")) {
            v.push(format!("effect of job {job} has a foreign key `{key}`"));
        }
    }
    if effects.len() != ids.len() {
        v.push(format!(
            "{} side effects for {} jobs: each job must have exactly one",
            effects.len(),
            ids.len()
        ));
    }

    // The execution log.
    let logged: Vec<ExecutionRow> = sql
        .fetch_all(
            "SELECT job_id, attempt, pid, worker, started_us, finished_us \
             FROM jobq_chaos_attempts WHERE run = ?",
            &[run.into()],
        )
        .await
        .expect("read the executions");
    report.executions = logged.len();
    let mut executions: HashMap<i64, Vec<Execution>> = HashMap::new();
    for (job, attempt, pid, worker, started_us, finished_us) in logged {
        executions.entry(job).or_default().push(Execution {
            attempt: attempt.into(),
            pid: u32::try_from(pid).unwrap_or(0),
            worker,
            started_us,
            finished_us,
        });
    }
    if report.executions < ids.len() {
        v.push(format!(
            "{} executions logged for {} jobs",
            report.executions,
            ids.len()
        ));
    }

    let lease_us = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
    let mut waits = Vec::new();
    let mut partition_waits = Vec::new();
    for id in ids {
        let Some((status, attempts, claimed_by, finished_at)) = rows.get(id) else {
            v.push(format!("job {id} has no row"));
            continue;
        };
        if status != "done" {
            v.push(format!("job {id} is {status}, not done"));
        }
        if effects_per_job.get(id).copied().unwrap_or(0) != 1 {
            v.push(format!(
                "job {id} has {} side effects",
                effects_per_job.get(id).copied().unwrap_or(0)
            ));
        }
        let Some(runs) = executions.get_mut(id) else {
            v.push(format!("job {id} never ran"));
            continue;
        };
        runs.sort_by_key(|e| e.attempt);
        let distinct: HashSet<i64> = runs.iter().map(|e| e.attempt).collect();
        if distinct.len() != runs.len() {
            v.push(format!(
                "job {id}: an attempt ran twice (double claim): {runs:?}"
            ));
        }
        report.silent_claims +=
            u64::try_from(i64::from(*attempts) - runs.len() as i64).unwrap_or(0);
        let last = runs.last().expect("not empty");
        // The row was settled by its last claim, after that claim's handler finished.
        if last.attempt != i64::from(*attempts) {
            v.push(format!(
                "job {id}: row says {attempts} attempts but the last execution is attempt {}",
                last.attempt
            ));
        }
        if claimed_by.as_deref() != Some(last.worker.as_str()) {
            v.push(format!(
                "job {id}: claimed_by {claimed_by:?} is not the last execution's worker {}",
                last.worker
            ));
        }
        match (last.finished_us, finished_at) {
            (Some(handler_end), Some(settled)) if *settled + 1_000 >= handler_end => {}
            (handler_end, settled) => v.push(format!(
                "job {id}: settled at {settled:?} µs, but its last execution (attempt {}) finished at {handler_end:?} µs: a settle overwrote a newer claim",
                last.attempt
            )),
        }
        // Every earlier execution is explained by a fault.
        for pair in runs.windows(2) {
            let (earlier, next) = (&pair[0], &pair[1]);
            report.re_executions += 1;
            // A newer attempt starts only once the older one's lease is
            // over; an older one that starts after it was claimed before
            // and answered after its lease (it must not start).
            if earlier.started_us > next.started_us {
                v.push(format!(
                    "job {id}: attempt {} (worker {}) started {} ms after attempt {} (worker {}): a claim answered after its lease ran",
                    earlier.attempt,
                    earlier.worker,
                    (earlier.started_us - next.started_us) / 1_000,
                    next.attempt,
                    next.worker
                ));
            }
            // The earlier attempt's worker was killed after it started and
            // before the next attempt started.
            let kill = killed
                .get(&earlier.pid)
                .copied()
                .filter(|&kill| kill >= earlier.started_us && kill <= next.started_us);
            if let Some(kill) = kill {
                report.re_executions_after_kill += 1;
                // A kill near the outage waits for the database too: not an orphan-recovery time.
                let near_outage = outage
                    .is_some_and(|(down, up)| kill > down - lease_us && kill < up + 2 * lease_us);
                if next.attempt == earlier.attempt + 1 && next.started_us > kill && !near_outage {
                    waits.push(next.started_us - kill);
                }
                continue;
            }
            let overlapped_outage = outage.is_some_and(|(down, up)| {
                earlier.started_us < up + 2 * lease_us
                    && earlier.finished_us.is_none_or(|end| end > down - lease_us)
            });
            // The earlier execution ran on the cut host around the cut (or
            // started from a claim whose reply the cut held back).
            let on_cut_host = partition.is_some_and(|cut| {
                let (down, up) = cut.window;
                let late_us = i64::try_from(cut.late_by.as_micros()).unwrap_or(i64::MAX);
                cut.pids.contains(&earlier.pid)
                    && earlier.started_us < up + late_us + 2 * lease_us
                    && earlier.finished_us.is_none_or(|end| end > down - lease_us)
            });
            if overlapped_outage {
                report.re_executions_after_outage += 1;
            } else if on_cut_host {
                report.re_executions_after_partition += 1;
                if let Some(cut) = partition {
                    let ms = |us: i64| (us - cut.window.0) / 1_000;
                    report.partition_reruns.push(format!(
                        "job {id}: attempt {} on {} (pid {}) from {} ms to {:?} ms after the cut, then attempt {} on {} (pid {}{}) at {} ms",
                        earlier.attempt,
                        earlier.worker,
                        earlier.pid,
                        ms(earlier.started_us),
                        earlier.finished_us.map(ms),
                        next.attempt,
                        next.worker,
                        next.pid,
                        if cut.pids.contains(&next.pid) { ", the cut host" } else { "" },
                        ms(next.started_us),
                    ));
                }
                if let Some(cut) = partition
                    && next.attempt == earlier.attempt + 1
                    && next.started_us > cut.window.0
                    && !cut.pids.contains(&next.pid)
                {
                    partition_waits.push(next.started_us - cut.window.0);
                }
            } else {
                v.push(format!(
                    "job {id}: attempt {} by live worker {} ran again as attempt {}, unexplained by a kill, an outage or a partition",
                    earlier.attempt, earlier.worker, next.attempt
                ));
            }
        }
    }
    // Recovery: the lease runs out (≤ one lease after the last heartbeat),
    // a reaper sees it (≤ 1.2 × lease/6), a claim loop picks it up (poll
    // 100 ms); 2.5 s of slack for a loaded machine.
    let bound = lease.mul_f64(1.2) + Duration::from_millis(2_600);
    let late = waits
        .iter()
        .filter(|w| Duration::from_micros(**w as u64) > bound)
        .count();
    if late > 0 {
        v.push(format!(
            "{late} orphans waited longer than {bound:?} (lease + reap interval + slack) to run again"
        ));
    }
    if let Some(&max) = partition_waits.iter().max() {
        report.max_partition_wait = Duration::from_micros(max as u64);
    }
    report.orphan_waits = waits.len();
    if let Some(&max) = waits.iter().max() {
        report.max_orphan_wait = Duration::from_micros(max as u64);
        report.mean_orphan_wait =
            Duration::from_micros((waits.iter().sum::<i64>() / waits.len() as i64) as u64);
    }
}

fn scan_logs(report: &mut Report) {
    let Ok(text) = std::fs::read_to_string(&report.logs) else {
        return;
    };
    for line in text.lines() {
        // The completer writes one line per batch, with its count.
        let batch: Option<usize> = line.split_once("fenced_out=").and_then(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        });
        if let Some(count) = batch {
            report.fenced_out += count;
        } else if line.contains("fenced out") || line.contains("no longer held") {
            report.fenced_out += 1;
        }
        if line.contains("lease lost") {
            report.leases_lost += 1;
        }
        if line.contains("WARN") {
            report.warnings += 1;
        }
        if line.contains("the pool moved to the next ready node") {
            report.node_moves.0 += 1;
        }
        if line.contains("the pool moved back") {
            report.node_moves.1 += 1;
        }
        if line.contains("panicked") {
            report.violations.push(format!("a worker panicked: {line}"));
        }
    }
    if report.violations.is_empty() && std::env::var_os("JOBQ_CHAOS_KEEP_LOGS").is_none() {
        let _ = std::fs::remove_dir_all(report.logs.parent().expect("dir"));
    }
}
