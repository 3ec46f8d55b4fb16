//! A worker process a test starts — one of this crate's binaries
//! (`jobq-flow-worker`, `jobq-pause-worker`, `jobq-presence-worker`, …),
//! given by the test as `env!("CARGO_BIN_EXE_…")` — and the lines it prints.
//!
//! The binaries print `started` (or `started <worker id>`) once their
//! worker runs, shut down gracefully when their stdin closes, and are
//! killed if the test drops them.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::wait_until;

/// A running worker process and what it printed so far.
#[derive(Debug)]
pub struct WorkerProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl WorkerProcess {
    /// Spawns `command` (stdin and stdout piped, killed on drop), collects
    /// its stdout line by line, and waits until it prints its `started`
    /// line, at most `within`.
    pub async fn start(mut command: Command, within: Duration) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("spawn {command:?}: {error}"));
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        let process = Self { child, lines };
        wait_until("the worker process started", within, || async {
            process.started_line().is_some()
        })
        .await;
        process
    }

    /// Every line it printed so far.
    pub fn printed(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What its `started` line says after the word (a worker id), if any.
    pub fn started_line(&self) -> Option<String> {
        self.printed().into_iter().find_map(|line| {
            let rest = line.strip_prefix("started")?;
            (rest.is_empty() || rest.starts_with(' ')).then(|| rest.trim().to_owned())
        })
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills it (`SIGKILL`: no shutdown) and waits until it is gone.
    pub async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        self.child.wait().await.expect("wait");
    }

    /// Waits, at most `within`, for it to exit by itself (its stdin kept
    /// open: `Child::wait` alone closes it, a shutdown); how it exited.
    pub async fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        let stdin = self.child.stdin.take();
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .expect("the worker process exits by itself")
            .expect("wait");
        drop(stdin);
        status
    }

    /// Closes its stdin (it shuts down gracefully) and waits, at most
    /// `within`, for it to exit successfully.
    pub async fn stop(mut self, within: Duration) {
        drop(self.child.stdin.take());
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .expect("the worker process exits")
            .expect("wait");
        assert!(status.success(), "the worker process exited with {status}");
    }
}

/// In a worker binary, once its worker runs: prints `started`, waits for
/// its stdin to close ([`until_stdin_closes`]), shuts the worker down
/// (10 s) and exits the process, 0 or 1 after saying why as `{name}: …`
/// (the stdin reader is a blocking thread that would hold the runtime open).
pub async fn serve_until_stdin_closes(handle: jobq_runtime::WorkerHandle, name: &str) -> ! {
    use std::io::Write;
    println!("started");
    let _ = std::io::stdout().flush();
    until_stdin_closes().await;
    match handle.shutdown(std::time::Duration::from_secs(10)).await {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("{name}: {error}");
            std::process::exit(1)
        }
    }
}

/// In a worker binary: returns once its stdin closes (the test process
/// ended it, or dropped it), the sign to shut down gracefully.
pub async fn until_stdin_closes() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while stdin.read(&mut buf).await.is_ok_and(|n| n > 0) {}
}
