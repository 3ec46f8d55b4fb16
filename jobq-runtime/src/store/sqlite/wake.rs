//! Wake-ups across processes on SQLite: the processes that share a
//! database file share a host, so a worker process binds a Unix datagram
//! socket in a directory kept beside the file (`.<file>-jobq-wake/`, or
//! under the temporary directory when that path is too long for a socket)
//! and a process that enqueued sends each socket found there the names of
//! the queues, after its write committed ([`SqliteBell`], rung by a
//! [`Ringer`](crate::store::ring::Ringer)). An idle worker sends the
//! database nothing for it. A socket whose process is gone refuses the
//! datagram and is removed. Processes of one user (the sockets get the
//! umask's permissions); on a system without Unix sockets, or for an
//! in-memory database, workers poll.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;
use tokio_util::sync::CancellationToken;

#[cfg(unix)]
use super::sql::LOOK;
#[cfg(unix)]
use crate::store::look;
use crate::store::ring::Bell;
use crate::store::sql::visible_sql;
use crate::wakeup;

/// Longest socket path the platforms take (`sun_path` is 104 or 108 bytes).
const MAX_SOCKET_PATH: usize = 100;
/// Room for a socket's own name (`<pid>-<random>.sock`) in its path.
const SOCKET_NAME: usize = 32;

/// The directory of the wake-up sockets of the database `options` opens,
/// or `None` for an in-memory one.
pub(super) fn wake_dir(options: &SqliteConnectOptions) -> Option<PathBuf> {
    let file = options.get_filename();
    let name = file.file_name()?.to_str()?;
    if name.is_empty() || name == ":memory:" {
        return None;
    }
    let file = std::fs::canonicalize(file).ok()?;
    let beside = file.parent()?.join(format!(".{name}-jobq-wake"));
    if beside.as_os_str().len() + SOCKET_NAME <= MAX_SOCKET_PATH {
        return Some(beside);
    }
    Some(std::env::temp_dir().join(format!("jobq-wake-{:016x}", fnv1a(&file))))
}

/// A hash of `path` that every build computes alike (std's hasher may
/// change between Rust releases).
fn fnv1a(path: &Path) -> u64 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Receives the datagrams of other processes' enqueues for `queues` in
/// `dir` and wakes this process's claim loops, and while the socket is
/// bound looks at the queues through `pool` for the worker (`watch`, see
/// `store::look`), until `stop`.
#[cfg(unix)]
pub(super) async fn wait(
    (dir, pool): (Option<PathBuf>, &SqlitePool),
    queues: &[String],
    watch: &wakeup::Watch,
    stop: &CancellationToken,
    deadline: std::time::Duration,
) {
    let Some(dir) = dir.filter(|_| !queues.is_empty()) else {
        return;
    };
    let path = dir.join(format!(
        "{}-{:08x}.sock",
        std::process::id(),
        rand::random::<u32>()
    ));
    let socket = std::fs::create_dir_all(&dir).and_then(|()| tokio::net::UnixDatagram::bind(&path));
    let socket = match socket {
        Ok(socket) => socket,
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                socket = %path.display(),
                "SQLite wake-ups are not available: jobs enqueued by other processes are found by polling"
            );
            return;
        }
    };
    // Jobs enqueued (controls changed) before the socket was there were
    // not announced to it.
    wakeup::notify(wakeup::CONTROL);
    for queue in queues {
        wakeup::notify(queue);
    }
    let mut buf = vec![0u8; 64 << 10];
    let looking = look::look_while_up(queues, watch, deadline, |watched| {
        let pool = pool.clone();
        Box::pin(async move {
            let watched = serde_json::to_string(&watched).unwrap_or_default();
            sqlx::query_as(LOOK)
                .bind(chrono::Utc::now().timestamp_micros())
                .bind(watched)
                .fetch_all(&pool)
                .await
        })
    });
    tokio::pin!(looking);
    loop {
        let received = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            received = socket.recv(&mut buf) => received,
            never = &mut looking => match never {},
        };
        match received {
            Ok(len) => {
                let announced: Vec<String> =
                    serde_json::from_slice(&buf[..len]).unwrap_or_default();
                let ours = |q: &&String| q.as_str() == wakeup::CONTROL || queues.contains(q);
                for queue in announced.iter().filter(ours) {
                    wakeup::notify(queue);
                }
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "receiving SQLite wake-ups failed; jobs enqueued by other processes are found by polling"
                );
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// No Unix sockets: workers poll.
#[cfg(not(unix))]
pub(super) async fn wait(
    _at: (Option<PathBuf>, &SqlitePool),
    _queues: &[String],
    _watch: &wakeup::Watch,
    _stop: &CancellationToken,
    _deadline: std::time::Duration,
) {
}

/// Sends the datagrams of enqueues made through the store (see the module docs).
#[derive(Debug)]
pub(super) struct SqliteBell {
    pool: SqlitePool,
    /// [`wake_dir`], once found.
    dir: Option<PathBuf>,
    #[cfg(unix)]
    socket: Option<std::os::unix::net::UnixDatagram>,
}

impl SqliteBell {
    pub(super) fn new(pool: SqlitePool) -> Self {
        Self {
            pool,
            dir: None,
            #[cfg(unix)]
            socket: None,
        }
    }
}

impl Bell for SqliteBell {
    async fn visible(&mut self, ids: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
        let sql = visible_sql(ids.len());
        let mut query = sqlx::query_scalar::<_, i64>(&sql);
        for id in ids {
            query = query.bind(id);
        }
        query.fetch_all(&self.pool).await
    }

    #[cfg(unix)]
    async fn ring(&mut self, queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
        use std::io::ErrorKind;
        if self.dir.is_none() {
            self.dir = wake_dir(&self.pool.connect_options());
        }
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            // No worker has made it yet.
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(sqlx::Error::Io(error)),
        };
        if self.socket.is_none() {
            let socket = std::os::unix::net::UnixDatagram::unbound()?;
            socket.set_nonblocking(true)?;
            self.socket = Some(socket);
        }
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        let message = serde_json::to_vec(queues).unwrap_or_default();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "sock") {
                continue;
            }
            match socket.send_to(&message, &path) {
                // A full buffer: that worker has wake-ups to read already.
                Ok(_) => {}
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                // Its process is gone.
                Err(error) if error.kind() == ErrorKind::ConnectionRefused => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(error) => {
                    tracing::debug!(error = %error, socket = %path.display(), "a wake-up was not sent");
                }
            }
        }
        Ok(())
    }

    #[cfg(not(unix))]
    async fn ring(&mut self, _queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
        Ok(())
    }

    fn reset(&mut self) {
        #[cfg(unix)]
        {
            self.socket = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wake_directory_sits_beside_the_file_unless_the_path_is_too_long() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.db");
        std::fs::write(&file, b"").unwrap();
        let options = SqliteConnectOptions::new().filename(&file);
        let wake = wake_dir(&options).unwrap();
        assert_eq!(wake.file_name().unwrap(), ".app.db-jobq-wake");
        let deep = dir.path().join("d".repeat(120));
        std::fs::create_dir(&deep).unwrap();
        let file = deep.join("app.db");
        std::fs::write(&file, b"").unwrap();
        let wake = wake_dir(&SqliteConnectOptions::new().filename(&file)).unwrap();
        assert!(wake.starts_with(std::env::temp_dir()), "{}", wake.display());
        assert_eq!(
            wake,
            wake_dir(&SqliteConnectOptions::new().filename(&file)).unwrap(),
            "every process finds the same directory"
        );
        assert!(wake_dir(&SqliteConnectOptions::new().filename(":memory:")).is_none());
    }
}
