//! `jobq`: operate a jobq database from the shell.
//!
//! ```sh
//! jobq --url mysql://app@db/app migrate
//! jobq --url sqlite://jobs.db stats            # every queue; --watch refreshes
//! jobq --url … list --queue mail --status failed
//! jobq --url postgres://app@db/app show 42
//! jobq --url … retry 42                        # or by filter: retry --queue mail --status failed
//! jobq --url … cancel --queue mail --name send_welcome --yes
//! jobq --url … pause mail                      # every worker stops claiming from it
//! jobq --url … resume mail
//! jobq --url … workers                        # live workers, and the jobs they publish
//! jobq --url … enqueue send_welcome '{"user_id":42}' --delay 10m
//! jobq --url … prune --finished 7d --failed 30d
//! jobq --url … doctor
//! jobq --url … web --listen 127.0.0.1:8080      # the dashboard; JOBQ_WEB_PASSWORD: basic auth
//! ```
//!
//! The URL may also come from `JOBQ_DATABASE_URL` or `DATABASE_URL`. Every
//! read command takes `--json` for scripts. Exit status: 0 done, 1 an error
//! (printed) or a failed `doctor` check, 2 a job that was not found or not in
//! a state the command applies to, a filter that matches no job the action
//! applies to, or an action that was not confirmed. A closed stdout (`| head`)
//! ends the output quietly (see `stdio`).

// Every line goes through `stdio`'s macros, which a closed pipe cannot panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod stdio;
mod commands;
mod output;
mod web;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use jobq_runtime::{ConnectOptions, JobStatus, Jobq};

/// Operate a jobq database: migrate, watch, list, retry, cancel, pause, prune, check.
#[derive(Debug, Parser)]
#[command(name = "jobq", version)]
struct Cli {
    /// The database (`mysql://`, `mariadb://`, `postgres://`, `sqlite://`).
    #[arg(long, env = "JOBQ_DATABASE_URL", hide_env_values = true)]
    url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// What `jobq schedule` does.
#[derive(Debug, Subcommand)]
enum ScheduleAction {
    /// Stores a schedule (or replaces the one of that name, keeping its
    /// pause): job NAME by name at each tick of CRON.
    Put {
        /// The schedule's name (its ticks' keys are `cron:{name}:{tick}`).
        name: String,
        /// The job, by name (as `jobq enqueue` takes it).
        job: String,
        /// The cron expression: five fields, six with seconds first, or a
        /// nickname (`@daily`).
        cron: String,
        /// The job's payload, JSON (default `{}`).
        #[arg(long, default_value = "{}")]
        payload: String,
        /// The IANA time zone the expression is read in (default UTC).
        #[arg(long)]
        time_zone: Option<String>,
        /// The queue (default: the job's own).
        #[arg(long)]
        queue: Option<String>,
        /// The priority (default: the job's own).
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i16>,
    },
    /// Stops a schedule's ticks until `resume`.
    Pause {
        /// The schedule's name.
        name: String,
    },
    /// Lets a paused schedule tick again.
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Removes a schedule (rows already enqueued stay).
    Remove {
        /// The schedule's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Creates or upgrades jobq's tables (idempotent).
    Migrate,
    /// The figures of every queue: counts, lag, expired leases, throughput, pauses.
    Stats {
        /// Refresh every INTERVAL (default 2s) until interrupted.
        #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "2s", value_parser = humantime::parse_duration)]
        watch: Option<Duration>,
        #[command(flatten)]
        format: Format,
    },
    /// How many jobs of a queue are in each status.
    Counts {
        /// The queue.
        queue: String,
        #[command(flatten)]
        format: Format,
    },
    /// Jobs matching a filter, newest first, a page at a time.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// List the oldest first.
        #[arg(long)]
        oldest_first: bool,
        /// Jobs per page (at most 1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this cursor (printed at the end of the previous page).
        #[arg(long)]
        after: Option<String>,
        #[command(flatten)]
        format: Format,
    },
    /// One job as stored, its payload pretty-printed and its last error in full.
    Show {
        /// The job's id.
        id: i64,
        #[command(flatten)]
        format: Format,
    },
    /// Runs failed or cancelled jobs again: one by id, or every one a filter matches.
    Retry {
        /// The job's id (or give a filter instead).
        id: Option<i64>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Act without asking for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Cancels pending or running jobs: one by id, or every one a filter matches.
    Cancel {
        /// The job's id (or give a filter instead).
        id: Option<i64>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Act without asking for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Tells every worker to claim nothing more from a queue (running jobs finish).
    Pause {
        /// The queue.
        queue: String,
    },
    /// Lets workers claim from a paused queue again.
    Resume {
        /// The queue.
        queue: String,
    },
    /// Sets a queue's global concurrency limit: at most N of its jobs
    /// running at once across every worker (`none` removes it).
    Limit {
        /// The queue.
        queue: String,
        /// The most jobs running at once, or `none`.
        limit: LimitArg,
    },
    /// Sets a queue's rate limit: at most N job starts per PERIOD across
    /// every worker, spread evenly (one every PERIOD/N; `none` removes it).
    /// With `--key`, the rate of a concurrency key instead: the jobs with
    /// that key, in any queue.
    Rate {
        /// The queue (with `--key`: the concurrency key).
        queue: String,
        /// `N/PERIOD` (`100/1m`, `5/1s`, `20/500ms`, `1000/1h`; a bare unit
        /// is one of it: `100/min`), or `none`.
        rate: RateArg,
        /// Starts that may go at once after an idle spell (1 to N).
        #[arg(long, default_value_t = 1)]
        burst: u32,
        /// The name is a concurrency key (`Enqueue::concurrency_key`), not a queue.
        #[arg(long)]
        key: bool,
    },
    /// A workflow (`Jobq::enqueue_workflow`): each job's task, id, status,
    /// and what it still waits on; exits 2 if no job has that workflow id.
    Workflow {
        /// The workflow's id.
        id: String,
        /// Cancel every job of it that has not ended, then show it.
        #[arg(long)]
        cancel: bool,
        #[command(flatten)]
        format: Format,
    },
    /// A batch (`Jobq::enqueue_batch`): open or closed, how many of its
    /// jobs ended and how, its callbacks' status; exits 2 if there is no
    /// such batch.
    Batch {
        /// The batch's id.
        id: String,
        /// Close it to more jobs (its finish and success callbacks may
        /// then run), then show it.
        #[arg(long)]
        close: bool,
        /// Close it and cancel its jobs that have not ended, then show it.
        #[arg(long, conflicts_with = "close")]
        cancel: bool,
        #[command(flatten)]
        format: Format,
    },
    /// The cron schedules kept in the database (`jobq schedule put`): job,
    /// expression, time zone, whether paused, last recorded tick.
    Schedules {
        #[command(flatten)]
        format: Format,
    },
    /// Stores, pauses, resumes or removes a cron schedule kept in the
    /// database: every worker runs it from its next tick, without a restart.
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// The workers running now (host, pid, queues, running jobs, last seen),
    /// and the jobs they publish with their defaults.
    Workers {
        #[command(flatten)]
        format: Format,
    },
    /// Stores a job by name with a JSON payload. The job's defaults (queue,
    /// priority, attempts, key template) and fields are those the live
    /// workers publish (see `jobq workers`); the payload is checked against
    /// its fields. A job no live worker publishes is refused unless --queue
    /// is given.
    Enqueue {
        /// The registered job name.
        name: String,
        /// The payload, as JSON (`'{"user_id": 42}'`).
        payload: String,
        /// The queue (default: the job's own, as its workers publish it;
        /// required for a job no live worker publishes).
        #[arg(long)]
        queue: Option<String>,
        /// Smaller runs first.
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i16>,
        /// Run no sooner than this from now (`10m`, `2h`).
        #[arg(long, value_parser = humantime::parse_duration)]
        delay: Option<Duration>,
        /// An idempotency key: a job with this key already stored is not
        /// stored again (default: the job's key template applied to the payload).
        #[arg(long)]
        key: Option<String>,
        /// Attempts before it fails for good (default: the job's own).
        #[arg(long)]
        max_attempts: Option<u32>,
        /// A tag to store it with (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Metadata to store it with: a JSON object (`'{"ticket": "OPS-12"}'`).
        #[arg(long)]
        metadata: Option<String>,
        #[command(flatten)]
        format: Format,
    },
    /// Deletes finished jobs older than the given ages.
    Prune {
        /// Delete `done` and `cancelled` jobs that finished more than this long ago (e.g. `7d`).
        #[arg(long, value_parser = humantime::parse_duration)]
        finished: Option<Duration>,
        /// Delete `failed` jobs that failed more than this long ago (e.g. `30d`).
        #[arg(long, value_parser = humantime::parse_duration)]
        failed: Option<Duration>,
    },
    /// Checks the server and jobq's tables for what jobq needs; exits 1 if a check fails.
    Doctor {
        /// The workers' lease (WorkerBuilder::lease), judged on Galera against
        /// evs.suspect_timeout (default: the workers' default, 30s).
        #[arg(long, value_parser = humantime::parse_duration)]
        lease: Option<Duration>,
        #[command(flatten)]
        format: Format,
    },
    /// Serves the web dashboard until interrupted. With JOBQ_WEB_PASSWORD set,
    /// every request needs basic authentication (user: --user).
    Web {
        /// The address to listen on; anything but loopback without a password is warned about.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Show, never act: no retry, cancel, pause or resume (refused with 403).
        #[arg(long)]
        read_only: bool,
        /// The basic-authentication user, when JOBQ_WEB_PASSWORD is set.
        #[arg(long, env = "JOBQ_WEB_USER", default_value = "jobq")]
        user: String,
        /// Also answer requests for this host name (repeat, or separate by
        /// commas; `.example.com` adds its subdomains). Served without it:
        /// localhost and IP addresses; any other Host is refused (403).
        #[arg(
            long = "allow-host",
            value_name = "NAME",
            env = "JOBQ_WEB_ALLOW_HOSTS",
            value_delimiter = ','
        )]
        allow_hosts: Vec<String>,
    },
}

/// Which jobs a list or bulk action applies to.
#[derive(Debug, Clone, Default, Args)]
struct FilterArgs {
    /// Only jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only jobs in this status (pending, processing, done, failed,
    /// cancelled, blocked).
    #[arg(long, value_parser = parse_status)]
    status: Option<JobStatus>,
    /// Only jobs of this registered name.
    #[arg(long)]
    name: Option<String>,
    /// Only jobs whose idempotency key starts with this.
    #[arg(long)]
    key_prefix: Option<String>,
    /// Only jobs with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Only jobs enqueued since: an RFC 3339 time or an age (`1h` = an hour ago).
    #[arg(long, value_parser = parse_time)]
    since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only jobs enqueued before: an RFC 3339 time or an age.
    #[arg(long, value_parser = parse_time)]
    before: Option<chrono::DateTime<chrono::Utc>>,
}

/// How a read command prints.
#[derive(Debug, Clone, Copy, Default, Args)]
struct Format {
    /// Print JSON (one document) instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_status(s: &str) -> Result<JobStatus, String> {
    s.parse().map_err(|_| {
        format!("`{s}` is not a status: pending, processing, done, failed, cancelled or blocked")
    })
}

/// An RFC 3339 time, or an age meaning that long before now.
fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(at.to_utc());
    }
    let age = humantime::parse_duration(s).map_err(|_| {
        format!("`{s}` is neither an RFC 3339 time (2026-12-01T10:00:00Z) nor an age (90m, 2d)")
    })?;
    chrono::Duration::from_std(age)
        .ok()
        .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
        .ok_or_else(|| format!("`{s}` is too long ago"))
}

/// How a command ended.
enum Outcome {
    Done,
    /// The job was not there, not in a state the command applies to, or the
    /// action was not confirmed.
    NotApplicable,
    /// `doctor` found a check that fails.
    Failed,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(url) = cli.url.or_else(|| std::env::var("DATABASE_URL").ok()) else {
        errln!("jobq: no database; pass --url or set JOBQ_DATABASE_URL (or DATABASE_URL)");
        return ExitCode::FAILURE;
    };
    let code = match run(&url, cli.command).await {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotApplicable) => ExitCode::from(2),
        Ok(Outcome::Failed) => ExitCode::FAILURE,
        Err(error) => {
            errln!("jobq: {error}");
            ExitCode::FAILURE
        }
    };
    if stdio::write_failed() && code == ExitCode::SUCCESS {
        return ExitCode::FAILURE;
    }
    code
}

async fn run(url: &str, command: Command) -> Result<Outcome, String> {
    // The dashboard serves requests side by side; every other command runs
    // one statement at a time. Opened within jobq's connect timeout (5 s):
    // a refusal or a bad password is reported at once, with its cause.
    let connections = if matches!(command, Command::Web { .. }) {
        4
    } else {
        1
    };
    let options = ConnectOptions::new().max_connections(connections);
    let jobq = Jobq::connect_with_options(url, options)
        .await
        .map_err(|e| jobq_runtime::error_chain(&e))?;
    let outcome = commands::execute(&jobq, command).await;
    // The wake-ups of what it enqueued, cancelled or paused go out before
    // the process ends: workers start the jobs at once, not at a poll.
    jobq.flush().await;
    outcome
}

/// `jobq limit`'s value: a number of jobs, or `none`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LimitArg(pub(crate) Option<u32>);

impl std::str::FromStr for LimitArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("none") {
            return Ok(Self(None));
        }
        s.parse::<u32>()
            .map(|n| Self(Some(n)))
            .map_err(|_| format!("`{s}` is not a number of jobs or `none`"))
    }
}

/// `jobq rate`'s value: `N/PERIOD`, or `none`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateArg(pub(crate) Option<(u32, Duration)>);

impl std::str::FromStr for RateArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("none") {
            return Ok(Self(None));
        }
        let bad = || format!("`{s}` is not N/PERIOD (as `100/1m` or `5/1s`) or `none`");
        let (starts, period) = s.split_once('/').ok_or_else(bad)?;
        let starts: u32 = starts.trim().parse().map_err(|_| bad())?;
        let period = period.trim();
        // `100/min`: one of the unit.
        let period = if period.starts_with(|c: char| c.is_ascii_alphabetic()) {
            format!("1{period}")
        } else {
            period.to_owned()
        };
        let period = humantime::parse_duration(&period).map_err(|e| format!("{}: {e}", bad()))?;
        Ok(Self(Some((starts, period))))
    }
}
