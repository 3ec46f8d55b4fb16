//! What a handle and its workers are configured with, below everything
//! that uses it: limits on names, keys, payloads and delays; how a handle
//! connects ([`ConnectOptions`]) and its defaults; the lease a worker takes
//! by default; how a URL is shown (never with its password).

use std::time::Duration;

/// Longest queue name, in bytes.
pub const MAX_QUEUE_LEN: usize = 128;
/// The largest global concurrency limit of a queue
/// ([`Jobq::set_queue_limit`](crate::Jobq::set_queue_limit)): each unit of
/// a limit is a row a limited claim locks.
pub const MAX_QUEUE_LIMIT: u32 = 10_000;
/// The most starts a queue's rate may allow per period
/// ([`Jobq::set_queue_rate`](crate::Jobq::set_queue_rate)).
pub const MAX_RATE_STARTS: u32 = 1_000_000;
/// The shortest period of a queue's rate.
pub const MIN_RATE_PERIOD: Duration = Duration::from_millis(1);
/// The longest period of a queue's rate (one day, the longest window of the
/// peers' limiters: a longer quota is a slower rate per day).
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// A queue's rate limit ([`Jobq::set_queue_rate`](crate::Jobq::set_queue_rate)):
/// at most [`starts`](Self::starts) job starts per [`period`](Self::period),
/// across every worker of every process, spread evenly: one start per
/// [`interval`](Self::interval) (period ÷ starts) on average, at most
/// [`burst`](Self::burst) of them at once after an idle spell (1 unless
/// set with [`with_burst`](Self::with_burst)).
///
/// Enforced with the generic cell rate algorithm (GCRA): one stored time
/// per queue, the *theoretical arrival time* up to which the starts
/// already granted are paid for, one interval each. What it guarantees, by
/// the database's clock at each claim: in any window of length `period`
/// at most `starts + burst − 1` claims start (exactly `starts` with the
/// default burst of 1), and in any window of length `interval` at most
/// `burst` — so no burst at the edge of a window, and idle time never
/// saves up more than `burst` starts.
///
/// ```
/// use std::time::Duration;
/// use jobq_runtime::Rate;
///
/// let rate = Rate::per(100, Duration::from_secs(60));
/// assert_eq!(rate.interval(), Duration::from_millis(600));
/// assert_eq!(rate.burst(), 1);
/// assert_eq!(rate.with_burst(10).to_string(), "100/60s burst 10");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    starts: u32,
    period: Duration,
    burst: u32,
}

impl Rate {
    /// At most `starts` job starts per `period`, with a burst of 1.
    /// Checked when set ([`Jobq::set_queue_rate`](crate::Jobq::set_queue_rate)).
    pub const fn per(starts: u32, period: Duration) -> Self {
        Self {
            starts,
            period,
            burst: 1,
        }
    }

    /// This rate, letting up to `burst` starts go at once after an idle
    /// spell (1 to [`starts`](Self::starts)): idle time saves up at most
    /// `burst` starts, and a window of length `period` then holds at most
    /// `starts + burst − 1`.
    #[must_use]
    pub const fn with_burst(self, burst: u32) -> Self {
        Self { burst, ..self }
    }

    /// Job starts allowed per [`period`](Self::period).
    pub const fn starts(&self) -> u32 {
        self.starts
    }

    /// The period the starts are counted over.
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// Starts that may go at once after an idle spell.
    pub const fn burst(&self) -> u32 {
        self.burst
    }

    /// The emission interval: the period divided by the starts, the
    /// average time between two starts at full rate.
    pub fn interval(&self) -> Duration {
        self.period / self.starts.max(1)
    }

    /// What is wrong with this rate, if anything (the reason of
    /// [`InvalidArgument::QueueRate`](crate::InvalidArgument::QueueRate)).
    pub(crate) fn problem(&self) -> Option<&'static str> {
        if !(1..=MAX_RATE_STARTS).contains(&self.starts) {
            Some("its starts must be 1 to 1000000 per period (pause a queue to start none)")
        } else if self.period < MIN_RATE_PERIOD || self.period > MAX_RATE_PERIOD {
            Some("its period must be 1ms to 1 day")
        } else if self.period.as_micros() < u128::from(self.starts) {
            Some("it is over one start per microsecond (remove the rate to start jobs unlimited)")
        } else if !(1..=self.starts).contains(&self.burst) {
            Some("its burst must be 1 to its starts per period")
        } else {
            None
        }
    }

    /// The period in microseconds, as stored.
    pub(crate) fn period_us(&self) -> i64 {
        i64::try_from(self.period.as_micros()).unwrap_or(i64::MAX)
    }

    /// A rate as a row stores it: `None` for a value no valid rate has.
    pub(crate) fn from_row(starts: i64, period_us: i64, burst: i64) -> Option<Self> {
        let rate = Self {
            starts: u32::try_from(starts).ok()?,
            period: Duration::from_micros(u64::try_from(period_us).ok()?),
            burst: u32::try_from(burst).ok()?,
        };
        rate.problem().is_none().then_some(rate)
    }
}

/// `100/60s`, `5/1500ms`, with ` burst N` when the burst is not 1 (the
/// period in whole seconds, milliseconds or microseconds, the largest that
/// is exact).
impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = self.period.as_micros();
        write!(f, "{}/", self.starts)?;
        if us % 1_000_000 == 0 {
            write!(f, "{}s", us / 1_000_000)?;
        } else if us % 1_000 == 0 {
            write!(f, "{}ms", us / 1_000)?;
        } else {
            write!(f, "{us}us")?;
        }
        if self.burst != 1 {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

/// Longest idempotency key, in characters.
pub const MAX_KEY_LEN: usize = 255;
/// Longest job name, in bytes: a periodic job's key `cron:{name}:{tick}`
/// adds 26 characters (the tick is `2026-11-30T07:45:00Z`), and must still
/// be an idempotency key of at most [`MAX_KEY_LEN`] characters. `#[job]`
/// refuses a longer name at compile time.
pub const MAX_JOB_NAME_LEN: usize = 200;
/// Largest payload accepted by default, in bytes of JSON (see [`Jobq::with_max_payload_bytes`](crate::Jobq::with_max_payload_bytes)).
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 4 << 20;
/// Longest delay accepted (100 years).
pub const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Connections a `Jobq` opens when it builds its own pool.
const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// How long [`Jobq::connect`](crate::Jobq::connect) waits for its first connection by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement or short transaction of jobq's may take by
/// default before jobq gives up on it (see [`ConnectOptions::statement_timeout`]).
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(15);
/// The shortest statement deadline (a zero would fail every statement).
pub(crate) const MIN_STATEMENT_TIMEOUT: Duration = Duration::from_millis(1);

/// How [`Jobq::connect_with_options`](crate::Jobq::connect_with_options) opens its pool: how many connections,
/// and how long to wait for the first one.
///
/// `connect` opens one connection before it builds the pool, within the
/// connect timeout (default [`DEFAULT_CONNECT_TIMEOUT`], 5 s), so that a
/// server that refuses, a wrong password or a host that does not resolve
/// fails at once with its own error (`database error: error communicating
/// with database: Connection refused (os error 111)`) rather than after the
/// pool's 30 s of retries as `PoolTimedOut`; a server that does not answer
/// fails with [`Error::ConnectTimeout`](crate::Error::ConnectTimeout). SQLite opens a file and has no
/// timeout.
///
/// ```no_run
/// # async fn demo() -> jobq_runtime::Result<()> {
/// use std::time::Duration;
/// use jobq_runtime::{ConnectOptions, Jobq};
///
/// let options = ConnectOptions::new()
///     .max_connections(20)
///     .connect_timeout(Duration::from_secs(2));
/// let jobq = Jobq::connect_with_options("postgres://app@db/app", options).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub(crate) max_connections: u32,
    /// Read by the server backends only (SQLite opens a file).
    #[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
    pub(crate) connect_timeout: Duration,
    pub(crate) statement_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectOptions {
    /// A pool of 10 connections, 5 s to open the first.
    pub fn new() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
        }
    }

    /// The most connections the pool opens (default 10).
    pub fn max_connections(mut self, max_connections: u32) -> Self {
        self.max_connections = max_connections;
        self
    }

    /// How long `connect` waits for the server to accept its first
    /// connection, log it in and answer (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one statement or short transaction of jobq's may take,
    /// waiting for a connection included (default
    /// [`DEFAULT_STATEMENT_TIMEOUT`](crate::DEFAULT_STATEMENT_TIMEOUT), 15 s). Past it jobq gives up on it:
    /// the call returns [`Error::StatementTimeout`](crate::Error::StatementTimeout), or the worker loop that
    /// ran it goes on (a claim, renewal or settle is tried again later), and
    /// the connection is closed rather than used again (on MySQL/MariaDB and
    /// PostgreSQL). So a database that stops answering with its connections
    /// open — a frozen server, a silent network cut — costs a call this
    /// long, not forever; with a connect list the pool then moves to the
    /// next node.
    ///
    /// Keep it above the lock waits of jobq's own statements, so that a
    /// statement waiting on a row lock normally gets the database's own
    /// error first: MySQL/MariaDB's `innodb_lock_wait_timeout` (5 s on the
    /// sessions of the pool `connect` builds; 50 s by default on a pool
    /// given to [`Jobq::from_mysql_pool`](crate::Jobq::from_mysql_pool)), SQLite's busy timeout (10 s).
    /// PostgreSQL's lock waits have no limit of their own: there a wait past
    /// the deadline ends at the deadline. Not covered: `migrate`, whose
    /// statements may rewrite a large table (30 minutes once it has its
    /// connection), and [`Jobq::enqueue_in`](crate::Jobq::enqueue_in), which runs on the caller's
    /// connection in the caller's transaction.
    ///
    /// [`Jobq::with_statement_timeout`](crate::Jobq::with_statement_timeout) sets it on a handle made otherwise.
    /// Below 1 ms it is taken as 1 ms.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout.max(MIN_STATEMENT_TIMEOUT);
        self
    }
}

/// Default of [`WorkerBuilder::lease`](crate::WorkerBuilder::lease).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// `url` fit to print: the password of its userinfo (`user:password@`) and
/// the value of any query parameter whose name contains `password` are
/// replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    // Userinfo ends at the last `@` (a raw password may hold `/`, `?` or `@`).
    let (head, tail) = match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo_start = scheme_end + 3;
            let userinfo = &url[userinfo_start..at];
            let head = match userinfo.split_once(':') {
                Some((user, _password)) => format!("{}{user}:***@", &url[..userinfo_start]),
                None => url[..=at].to_owned(),
            };
            (head, &url[at + 1..])
        }
        _ => (String::new(), url),
    };
    let mut out = head;
    match tail.split_once('?') {
        Some((rest, query)) => {
            out.push_str(rest);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _)) if name.to_ascii_lowercase().contains("password") => {
                        format!("{name}=***")
                    }
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}
