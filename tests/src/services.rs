//! Stopping and starting the local database servers, for tests of a database
//! outage. Such a test must be the only test of its binary (cargo runs test
//! binaries one after another, so nothing else of this suite runs meanwhile)
//! and must hold a [`RestoreOnDrop`] so the server is back even if it fails.
//!
//! Only a server on this machine (`127.0.0.1`/`localhost`) is ever touched.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the machine's MariaDB writes its pid (Debian's `pid-file`): the
/// server is found by it, since Galera nodes run `mariadbd` too.
const MARIADB_PID_FILE: &str = "/run/mysqld/mysqld.pid";

/// A database server on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// MariaDB (`mariadbd`), stopped with `mariadb-admin shutdown`.
    MariaDb,
    /// The newest PostgreSQL cluster `main`, through `pg_ctlcluster`.
    Postgres,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program} {args:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The newest PostgreSQL version with a cluster config in `/etc/postgresql`.
fn pg_version() -> Result<String, String> {
    let mut versions: Vec<(u32, String)> = std::fs::read_dir("/etc/postgresql")
        .map_err(|e| format!("/etc/postgresql: {e}"))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let major = name.split('.').next()?.parse().ok()?;
            Some((major, name))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, name)| name)
        .ok_or_else(|| "no cluster in /etc/postgresql".to_owned())
}

impl Server {
    /// Whether this server can be restarted here: `url` points to this
    /// machine and the server's admin tools are installed.
    pub fn controllable(self, url: &str) -> bool {
        let local = url.contains("@127.0.0.1") || url.contains("@localhost");
        local
            && match self {
                Self::MariaDb => {
                    succeeds("mariadb-admin", &["--version"])
                        && std::path::Path::new("/usr/sbin/mariadbd").exists()
                }
                Self::Postgres => succeeds("pg_lsclusters", &[]) && pg_version().is_ok(),
            }
    }

    /// Whether the server answers.
    pub fn is_up(self) -> bool {
        match self {
            Self::MariaDb => succeeds("mariadb", &["-uroot", "-e", "SELECT 1"]),
            Self::Postgres => succeeds("pg_isready", &["-q", "-h", "127.0.0.1", "-p", "5432"]),
        }
    }

    /// Stops the server (fast: open sessions are cut) and waits until it is down.
    pub fn stop(self) -> Result<(), String> {
        match self {
            Self::MariaDb => {
                if let Err(error) = run("mariadb-admin", &["-uroot", "shutdown"]) {
                    // Fall back to the server's process by its pid file.
                    let pid = std::fs::read_to_string(MARIADB_PID_FILE)
                        .map_err(|e| format!("{error}; {MARIADB_PID_FILE}: {e}"))?;
                    let pid = pid.trim();
                    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(format!("{error}; mariadbd pid: `{pid}`"));
                    }
                    run("kill", &[pid])?;
                }
            }
            Self::Postgres => {
                let version = pg_version()?;
                run(
                    "pg_ctlcluster",
                    &[
                        "--skip-systemctl-redirect",
                        &version,
                        "main",
                        "stop",
                        "-m",
                        "fast",
                    ],
                )?;
            }
        }
        self.wait(false, Duration::from_secs(60))
    }

    /// Starts the server and waits until it answers.
    pub fn start(self) -> Result<(), String> {
        match self {
            // Matched by the server's pid file, not by its executable
            // alone: the Galera tests' nodes are `mariadbd` processes too,
            // and with one running `--exec` alone found "already running"
            // and started nothing (the outage tests then failed with the
            // server still down after 60 s).
            Self::MariaDb => run(
                "start-stop-daemon",
                &[
                    "--start",
                    "--oknodo",
                    "--background",
                    "--pidfile",
                    MARIADB_PID_FILE,
                    "--exec",
                    "/usr/sbin/mariadbd",
                ],
            )?,
            Self::Postgres => {
                let version = pg_version()?;
                if !self.is_up() {
                    run(
                        "pg_ctlcluster",
                        &["--skip-systemctl-redirect", &version, "main", "start"],
                    )?;
                }
            }
        }
        self.wait(true, Duration::from_secs(60))
    }

    fn wait(self, up: bool, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        while self.is_up() != up {
            if start.elapsed() > limit {
                return Err(format!(
                    "{self:?} still {} after {limit:?}",
                    if up { "down" } else { "up" }
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Stops the server, keeps it down for `down_for`, starts it again.
    /// Returns when it answers again.
    pub fn restart(self, down_for: Duration) -> Result<(), String> {
        self.stop()?;
        std::thread::sleep(down_for);
        self.start()
    }
}

/// Starts the server again when dropped, if it is down: hold one across any
/// test that stops a server, so a failing test does not leave it stopped.
#[derive(Debug)]
#[must_use = "the server is restored when this guard is dropped"]
pub struct RestoreOnDrop(pub Server);

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        if !self.0.is_up() {
            eprintln!("restoring {:?}", self.0);
            if let Err(error) = self.0.start() {
                eprintln!("could not restore {:?}: {error}", self.0);
            }
        }
    }
}
