//! `jobq`: operate a jobq database from the shell.
//!
//! ```sh
//! jobq --url mysql://app@db/app migrate
//! jobq --url sqlite://jobs.db counts mail
//! jobq --url postgres://app@db/app show 42
//! jobq --url … retry 42            # a failed or cancelled job runs again
//! jobq --url … cancel 42           # a pending or running job stops
//! jobq --url … prune --finished 7d --failed 30d
//! jobq --url … doctor              # checks the server for what jobq needs
//! ```
//!
//! The URL may also come from `JOBQ_DATABASE_URL` or `DATABASE_URL`. Exit
//! status: 0 done, 1 an error (printed) or a `doctor` check that failed, 2
//! a job that was not found or not in a state the command applies to.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use jobq_runtime::{CheckStatus, DoctorReport, JobInfo, Jobq};

/// Operate a jobq database: migrate, inspect, retry, cancel, prune.
#[derive(Debug, Parser)]
#[command(name = "jobq", version)]
struct Cli {
    /// The database (`mysql://`, `mariadb://`, `postgres://`, `sqlite://`).
    #[arg(long, env = "JOBQ_DATABASE_URL", hide_env_values = true)]
    url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Creates or upgrades the `jobq_jobs` table (idempotent).
    Migrate,
    /// How many jobs of a queue are in each status.
    Counts {
        /// The queue.
        queue: String,
    },
    /// One job as stored.
    Show {
        /// The job's id.
        id: i64,
    },
    /// Runs a failed or cancelled job again (from now, with one more attempt if it used all).
    Retry {
        /// The job's id.
        id: i64,
    },
    /// Cancels a pending or running job (a running handler is stopped at its next heartbeat).
    Cancel {
        /// The job's id.
        id: i64,
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
    /// Checks the server and jobq's tables for what jobq needs: one line per
    /// check, `ok|warn|fail  name  found — what to do`; exits 1 if any fails.
    Doctor {
        /// One JSON object (`worst`, `checks`) instead of lines, for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// How a command ended.
enum Outcome {
    Done,
    /// The job was not there, or not in a state the command applies to.
    NotApplicable,
    /// A check failed (`doctor`).
    Failed,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(url) = cli.url.or_else(|| std::env::var("DATABASE_URL").ok()) else {
        eprintln!("jobq: no database; pass --url or set JOBQ_DATABASE_URL (or DATABASE_URL)");
        return ExitCode::FAILURE;
    };
    match run(&url, cli.command).await {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotApplicable) => ExitCode::from(2),
        Ok(Outcome::Failed) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("jobq: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `error` and its sources, `: `-separated, so that the cause shows (jobq's
/// `database error` is the server's refusal further down). A source whose
/// message the text already ends with (sqlx repeats the server's) is skipped.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

/// How long the command waits for a connection (the pool would keep
/// retrying a refused connection for 30 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

async fn run(url: &str, command: Command) -> Result<Outcome, String> {
    let jobq = tokio::time::timeout(CONNECT_TIMEOUT, Jobq::connect_with(url, 1))
        .await
        .map_err(|_| {
            format!(
                "no connection to the database within {} s (is it running, and is the URL right?)",
                CONNECT_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| chain(&e))?;
    execute(&jobq, command).await.map_err(|e| chain(&e))
}

async fn execute(jobq: &Jobq, command: Command) -> jobq_runtime::Result<Outcome> {
    match command {
        Command::Migrate => {
            jobq.migrate().await?;
            println!("migrated");
        }
        Command::Counts { queue } => {
            let c = jobq.counts(&queue).await?;
            println!(
                "pending {}\nprocessing {}\ndone {}\nfailed {}\ncancelled {}",
                c.pending, c.processing, c.done, c.failed, c.cancelled
            );
        }
        Command::Show { id } => match jobq.job(id).await? {
            Some(job) => print!("{}", describe(&job)),
            None => {
                eprintln!("jobq: no job {id}");
                return Ok(Outcome::NotApplicable);
            }
        },
        Command::Retry { id } => {
            if !jobq.retry(id).await? {
                eprintln!("jobq: job {id} is not failed or cancelled (or does not exist)");
                return Ok(Outcome::NotApplicable);
            }
            println!("job {id} is pending again");
        }
        Command::Cancel { id } => {
            if !jobq.cancel(id).await? {
                eprintln!("jobq: job {id} is not pending or running (or does not exist)");
                return Ok(Outcome::NotApplicable);
            }
            println!("job {id} is cancelled");
        }
        Command::Prune { finished, failed } => {
            if finished.is_none() && failed.is_none() {
                eprintln!("jobq: say what to prune: --finished AGE and/or --failed AGE");
                return Ok(Outcome::NotApplicable);
            }
            if let Some(age) = finished {
                let n = jobq.prune_finished(age).await?;
                println!("deleted {n} done or cancelled jobs");
            }
            if let Some(age) = failed {
                let n = jobq.prune_failed(age).await?;
                println!("deleted {n} failed jobs");
            }
        }
        Command::Doctor { json } => {
            let report = jobq.doctor().await?;
            if json {
                println!("{}", doctor_json(&report));
            } else {
                print!("{}", doctor_lines(&report));
            }
            if report.worst() == CheckStatus::Fail {
                return Ok(Outcome::Failed);
            }
        }
    }
    Ok(Outcome::Done)
}

/// `ok|warn|fail  name  found — advice` per check, names aligned.
fn doctor_lines(report: &DoctorReport) -> String {
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for check in &report.checks {
        out.push_str(&format!(
            "{:<4}  {:<width$}  {}",
            check.status.as_str(),
            check.name,
            check.found
        ));
        if let Some(advice) = &check.advice {
            out.push_str(" — ");
            out.push_str(advice);
        }
        out.push('\n');
    }
    out
}

/// `{"worst": "ok", "checks": [{"name", "status", "found", "advice"}, …]}`.
fn doctor_json(report: &DoctorReport) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = report
        .checks
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "status": c.status.as_str(),
                "found": c.found,
                "advice": c.advice,
            })
        })
        .collect();
    serde_json::json!({ "worst": report.worst().as_str(), "checks": checks })
}

/// `field value` lines.
fn describe(job: &JobInfo) -> String {
    let optional = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    format!(
        "id {}\nqueue {}\njob {}\nstatus {}\npriority {}\nattempts {}/{}\nrun_at {}\ncreated_at {}\nclaimed_at {}\nclaimed_by {}\nfinished_at {}\nidempotency_key {}\nlast_error {}\npayload {}\n",
        job.id,
        job.queue,
        job.job_name,
        job.status.as_str(),
        job.priority,
        job.attempts,
        job.max_attempts,
        job.run_at.to_rfc3339(),
        job.created_at.to_rfc3339(),
        optional(job.claimed_at.map(|t| t.to_rfc3339())),
        optional(job.claimed_by.clone()),
        optional(job.finished_at.map(|t| t.to_rfc3339())),
        optional(job.idempotency_key.clone()),
        optional(job.last_error.clone()),
        job.payload,
    )
}
