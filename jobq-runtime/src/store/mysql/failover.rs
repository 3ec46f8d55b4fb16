//! A connect list: `mysql://user:password@node1:3306,node2:3306,node3:3306/app`
//! names several servers of one database (the nodes of a Galera cluster,
//! a primary and its stand-by behind a switch-over), tried in order.
//!
//! The pool (sqlx's, which opens connections to one server) is built on the
//! first node that takes a connection and answers as ready. When a statement
//! fails as a lost connection does (an I/O error, a pool timeout, a
//! statement past its deadline — a frozen node answers nothing —, Galera's
//! 1047 "not prepared for application use", a shutdown), one check runs in
//! the background: if the node the pool is on still takes a connection and
//! is ready, nothing changes (the error was one connection's); otherwise the
//! pool's new connections go to the first ready node of the list
//! (`Pool::set_connect_options`, which also redirects connects already
//! waiting), and the connections opened before the move are retired (not
//! handed out again, [`Retire`]). While the pool is on a later node than
//! the first — because it moved, or because it started there, the nodes
//! before it down when the handle connected — it looks every
//! [`FAILBACK_EVERY`] for an earlier one that is ready again and moves back,
//! so a node that rejoins gets its workers back.
//!
//! Nothing of this runs for a URL that names one host, nor on a pool's
//! hot path: the only cost on success is the branch that sees there is no
//! list (and, with a list, the retirement check of a connection handed out).
//!
//! "Ready": the node takes a connection within the connect timeout and,
//! if it is a Galera node (`wsrep_on`), says `wsrep_ready = ON` (a node that
//! is joining, or outside the primary component, refuses statements with
//! error 1047).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError};
use sqlx::{Connection, Executor, MySqlPool, Row};

use super::Text;
use super::sql::{NODE_WSREP_ON, NODE_WSREP_READY};
use crate::error::{Error, Result};
use crate::store::stash::Retire;

/// How often a pool that moved off the first ready node looks for an
/// earlier node of its list that is ready again.
pub(super) const FAILBACK_EVERY: Duration = Duration::from_secs(5);

/// Errors after a check within this long of the last start no new one.
const CHECK_AT_MOST_EVERY: Duration = Duration::from_millis(500);

/// The URLs of a connect list, one per host, with that host (`host:port`
/// as written, never the password): `scheme://[userinfo@]h1[:p1],h2[:p2],…[/db][?params]`
/// gives `scheme://[userinfo@]h1[:p1][/db][?params]`, … . `None` for a URL
/// that names one host (the common case, left exactly as it was).
///
/// The userinfo ends at the URL's last `@`, as in
/// [`redact_url`](crate::options::redact_url); the host list at the first
/// `/` or `?` after it. Empty entries (`h1,,h2`) are left out.
pub(super) fn connect_list(url: &str) -> Option<Vec<(String, String)>> {
    let scheme_end = url.find("://")? + 3;
    let hosts_start = match url.rfind('@') {
        Some(at) if at >= scheme_end => at + 1,
        _ => scheme_end,
    };
    let rest = &url[hosts_start..];
    let hosts_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let hosts = &rest[..hosts_end];
    if !hosts.contains(',') {
        return None;
    }
    let (head, tail) = (&url[..hosts_start], &rest[hosts_end..]);
    Some(
        hosts
            .split(',')
            .map(str::trim)
            .filter(|host| !host.is_empty())
            .map(|host| (format!("{head}{host}{tail}"), host.to_owned()))
            .collect(),
    )
}

/// One server of a connect list.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) options: MySqlConnectOptions,
    /// `host:port` as the URL wrote it: what logs and errors show.
    pub(super) host: String,
}

/// A connect list and which of its nodes the pool opens connections to.
#[derive(Debug)]
pub(crate) struct Failover {
    nodes: Vec<Node>,
    /// The node new connections go to.
    current: AtomicUsize,
    /// A check or failback loop is running.
    checking: AtomicBool,
    /// A failback loop is running.
    failing_back: AtomicBool,
    /// When the last check started.
    last_check: Mutex<Option<Instant>>,
    /// Marked at every move: connections opened before are retired.
    retire: Arc<Retire>,
    /// How long a node may take to take a connection.
    timeout: Duration,
    /// Other pools moved with jobq's (the application's, see
    /// `MySqlStore::app_pool`).
    followers: Mutex<Vec<MySqlPool>>,
}

impl Failover {
    /// The first ready node of `nodes` (in order) with the list on it, or
    /// why none is: every node's reason, by host.
    pub(super) async fn connect(
        nodes: Vec<Node>,
        timeout: Duration,
        shown_url: &str,
    ) -> Result<(Self, usize)> {
        let mut reasons = Vec::new();
        let mut found = None;
        for (i, node) in nodes.iter().enumerate() {
            match ready(node, timeout).await {
                Ok(()) => {
                    found = Some(i);
                    break;
                }
                Err(reason) => reasons.push(format!("{}: {reason}", node.host)),
            }
        }
        let Some(at) = found else {
            return Err(Error::NoNodeReachable {
                url: shown_url.to_owned(),
                reasons: reasons.join("; "),
            });
        };
        for reason in &reasons {
            tracing::warn!(
                reason,
                "database node not ready; trying the next of the list"
            );
        }
        tracing::info!(
            node = nodes[at].host,
            of = nodes.len(),
            "database pool on this node of the connect list"
        );
        Ok((
            Self {
                nodes,
                current: AtomicUsize::new(at),
                checking: AtomicBool::new(false),
                failing_back: AtomicBool::new(false),
                last_check: Mutex::new(None),
                retire: Arc::default(),
                timeout,
                followers: Mutex::default(),
            },
            at,
        ))
    }

    /// The node `at`'s connect options.
    pub(super) fn options(&self, at: usize) -> &MySqlConnectOptions {
        &self.nodes[at].options
    }

    /// Moves `pool` with jobq's pool from now on (its connections opened
    /// before a move are retired by its own `before_acquire`).
    pub(super) fn follow(&self, pool: MySqlPool) {
        self.followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pool);
    }

    /// Points `pool` and every follower's new connections at node `to`, and
    /// marks the connections opened before retired.
    fn point_at(&self, to: usize, pool: &MySqlPool) -> usize {
        let from = self.current.swap(to, Ordering::Relaxed);
        let options = &self.nodes[to].options;
        pool.set_connect_options(options.clone());
        for follower in self
            .followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            follower.set_connect_options(options.clone());
        }
        self.retire.mark_now();
        from
    }

    /// The mark connections opened before a move are retired by.
    pub(super) fn retire(&self) -> &Arc<Retire> {
        &self.retire
    }

    /// `host:port` of the node new connections go to.
    pub(crate) fn current_host(&self) -> &str {
        &self.nodes[self.current.load(Ordering::Relaxed)].host
    }

    /// Notes a failed call: if it failed as a lost connection does, checks
    /// the node in the background (at most one check at a time, and not
    /// again within [`CHECK_AT_MOST_EVERY`]).
    pub(super) fn saw(self: &Arc<Self>, error: &Error, pool: &MySqlPool) {
        if !is_connection_error(error) {
            return;
        }
        {
            let mut last = self
                .last_check
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < CHECK_AT_MOST_EVERY) {
                return;
            }
            if self.checking.swap(true, Ordering::AcqRel) {
                return;
            }
            *last = Some(Instant::now());
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.checking.store(false, Ordering::Release);
            return;
        };
        let (failover, pool) = (Arc::clone(self), pool.clone());
        let error = error.to_string();
        runtime.spawn(async move {
            failover.check(&pool, &error).await;
            failover.checking.store(false, Ordering::Release);
            failover.fail_back_later(pool);
        });
    }

    /// Keeps the pool where it is if its node is ready, else moves it to
    /// the first ready node.
    async fn check(&self, pool: &MySqlPool, error: &str) {
        let at = self.current.load(Ordering::Relaxed);
        let Err(reason) = ready(&self.nodes[at], self.timeout).await else {
            return;
        };
        for (i, node) in self.nodes.iter().enumerate() {
            if i != at && ready(node, self.timeout).await.is_ok() {
                self.move_to(i, pool, &reason, error);
                return;
            }
        }
        tracing::warn!(
            node = self.nodes[at].host,
            reason,
            error,
            "no database node of the connect list is ready; staying on this one"
        );
    }

    /// Points the pool's new connections at node `to` and retires the rest.
    fn move_to(&self, to: usize, pool: &MySqlPool, reason: &str, error: &str) {
        let from = self.point_at(to, pool);
        tracing::warn!(
            from = self.nodes[from].host,
            to = self.nodes[to].host,
            reason,
            error,
            "database node lost; the pool moved to the next ready node of the connect list"
        );
    }

    /// While the pool is off the list's first node, looks for an earlier
    /// ready node every [`FAILBACK_EVERY`] (one loop at a time; it ends when
    /// the pool is back on the first node, is closed, or the store is gone).
    /// Started after every check, and when the pool starts on a later node.
    pub(super) fn fail_back_later(self: Arc<Self>, pool: MySqlPool) {
        if self.current.load(Ordering::Relaxed) == 0
            || self.failing_back.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(&self);
        drop(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FAILBACK_EVERY).await;
                let Some(failover) = weak.upgrade() else {
                    return;
                };
                let at = failover.current.load(Ordering::Relaxed);
                if at == 0 || pool.is_closed() {
                    failover.failing_back.store(false, Ordering::Release);
                    return;
                }
                if failover.checking.swap(true, Ordering::AcqRel) {
                    continue;
                }
                for i in 0..at {
                    if ready(&failover.nodes[i], failover.timeout).await.is_ok() {
                        let from = failover.point_at(i, &pool);
                        tracing::info!(
                            from = failover.nodes[from].host,
                            to = failover.nodes[i].host,
                            "an earlier node of the connect list is ready again; the pool moved back to it"
                        );
                        break;
                    }
                }
                failover.checking.store(false, Ordering::Release);
            }
        });
    }
}

/// Whether a call failed as a lost server does: no connection, a broken
/// one, or a server that says it cannot serve (Galera's 1047 "WSREP has not
/// yet prepared node for application use", 1053 shutdown in progress, 1927
/// connection killed).
fn is_connection_error(error: &Error) -> bool {
    let (Error::Database(error) | Error::NotMigrated { source: error, .. }) = error else {
        // A statement past its deadline: the node may be frozen (its
        // sockets open, nothing answering), which only this shows.
        return matches!(
            error,
            Error::ConnectTimeout { .. } | Error::StatementTimeout { .. }
        );
    };
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|e| matches!(e.number(), 1047 | 1053 | 1927)),
        _ => false,
    }
}

/// Whether `node` takes a connection within `timeout` and, if it is a
/// Galera node, is ready for statements; else why not.
async fn ready(node: &Node, timeout: Duration) -> Result<(), String> {
    let check = async {
        let mut conn = sqlx::MySqlConnection::connect_with(&node.options).await?;
        let wsrep_on = conn.fetch_optional(NODE_WSREP_ON).await?;
        let galera = match wsrep_on {
            Some(row) => row.try_get::<Text, _>(1)?.0.eq_ignore_ascii_case("ON"),
            None => false,
        };
        let ready = if galera {
            match conn.fetch_optional(NODE_WSREP_READY).await? {
                Some(row) => row.try_get::<Text, _>(1)?.0,
                None => "unknown".to_owned(),
            }
        } else {
            "ON".to_owned()
        };
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(ready)
    };
    match tokio::time::timeout(timeout, check).await {
        Ok(Ok(ready)) if ready.eq_ignore_ascii_case("ON") => Ok(()),
        Ok(Ok(ready)) => Err(format!(
            "a Galera node not ready for statements (wsrep_ready = {ready}: joining, or outside the primary component)"
        )),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_elapsed) => Err(format!("no connection within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::connect_list;

    #[test]
    fn a_url_with_one_host_is_no_connect_list() {
        assert_eq!(
            connect_list("mysql://u:p@db:3306/app?ssl-mode=disabled"),
            None
        );
        assert_eq!(connect_list("mysql://db/app"), None);
        assert_eq!(connect_list("mysql://u:p,w@db/app"), None);
    }

    #[test]
    fn a_connect_list_gives_one_url_per_host_with_the_rest_kept() {
        let list = connect_list("mysql://u:p@a:3306,b,c:3307/app?x=1").unwrap();
        assert_eq!(
            list,
            vec![
                ("mysql://u:p@a:3306/app?x=1".to_owned(), "a:3306".to_owned()),
                ("mysql://u:p@b/app?x=1".to_owned(), "b".to_owned()),
                ("mysql://u:p@c:3307/app?x=1".to_owned(), "c:3307".to_owned()),
            ]
        );
        let list = connect_list("mariadb://a,,b").unwrap();
        assert_eq!(
            list,
            vec![
                ("mariadb://a".to_owned(), "a".to_owned()),
                ("mariadb://b".to_owned(), "b".to_owned()),
            ]
        );
        // A password with `@`, `,` and `/`: the userinfo ends at the last `@`.
        let list = connect_list("mysql://u:p@x,/y@a,b/app").unwrap();
        assert_eq!(list[0].0, "mysql://u:p@x,/y@a/app");
        assert_eq!(list[1].1, "b");
    }
}
