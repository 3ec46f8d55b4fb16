//! How the commands print: aligned tables and `field value` lines for
//! people (coloured only on a terminal), one JSON document for scripts.

use std::io::IsTerminal;
use std::time::Duration;

use jobq_runtime::{
    Check, CheckStatus, DoctorReport, JobInfo, JobKind, JobPage, JobStatus, PublishedJob,
    QueueCounts, QueueState, QueueStats, STATS_FINISHED_CAP, ScheduleInfo, Stats, WorkerInfo,
};
use serde_json::{Value, json};

/// ANSI colours, used only when stdout is a terminal and `NO_COLOR` is unset.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Colour {
    Red,
    Yellow,
    Green,
    Dim,
}

/// `text` in `colour` when stdout is a terminal.
pub(crate) fn paint(text: &str, colour: Colour) -> String {
    let on = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !on {
        return text.to_owned();
    }
    let code = match colour {
        Colour::Red => "31",
        Colour::Yellow => "33",
        Colour::Green => "32",
        Colour::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Rows under a header, each column as wide as its widest cell; numbers
/// (cells starting with a digit) right-aligned. Widths count characters,
/// before colouring, so `cells` are plain and `colours` colours whole cells.
pub(crate) fn table(header: &[&str], rows: &[Vec<(String, Option<Colour>)>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, (cell, _)) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{h:<w$}", w = widths[i]))
        .collect();
    out.push_str(head.join("  ").trim_end());
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, (cell, colour))| {
                let numeric = cell.starts_with(|c: char| c.is_ascii_digit());
                let padded = if numeric {
                    format!("{cell:>w$}", w = widths[i])
                } else {
                    format!("{cell:<w$}", w = widths[i])
                };
                match colour {
                    Some(colour) => paint(&padded, *colour),
                    None => padded,
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A finished count, `10000+` at the cap.
fn capped(n: u64) -> String {
    if n >= STATS_FINISHED_CAP {
        format!("{n}+")
    } else {
        n.to_string()
    }
}

/// A duration as people read it, to the second (`3m 20s`), `-` for none.
pub(crate) fn age(d: Option<Duration>) -> String {
    match d {
        Some(d) => humantime::format_duration(Duration::from_secs(d.as_secs())).to_string(),
        None => "-".into(),
    }
}

/// A cell in `colour` when `alert` (a figure that should be zero is not).
fn alert(text: String, alert: bool, colour: Colour) -> (String, Option<Colour>) {
    let colour = alert.then_some(colour);
    (text, colour)
}

/// The `stats` table.
pub(crate) fn stats_table(stats: &Stats) -> String {
    let mut text = queues_table(stats);
    if !stats.key_rates.is_empty() {
        let rows: Vec<_> = stats
            .key_rates
            .iter()
            .map(|(key, rate)| vec![(key.clone(), None), (rate_word(rate), None)])
            .collect();
        text.push('\n');
        text.push_str(&table(&["CONCURRENCY KEY", "RATE"], &rows));
    }
    let running: Vec<_> = stats
        .queues
        .iter()
        .flat_map(|q| q.in_progress.iter().map(move |r| (q, r)))
        .map(|(q, r)| {
            vec![
                (q.queue.clone(), None),
                (r.id.to_string(), None),
                (r.job_name.clone(), None),
                (r.attempt.to_string(), None),
                (r.progress.to_string(), None),
            ]
        })
        .collect();
    if !running.is_empty() {
        text.push('\n');
        text.push_str(&table(
            &["QUEUE", "RUNNING", "JOB", "ATTEMPT", "PROGRESS"],
            &running,
        ));
    }
    text
}

/// A job's progress as JSON.
fn progress_json(p: &jobq_runtime::JobProgress) -> Value {
    json!({ "done": p.done, "total": p.total, "note": p.note })
}

/// A rate in one word: `100/60s`, `100/60s,burst=5`.
fn rate_word(rate: &jobq_runtime::Rate) -> String {
    rate.to_string().replace(" burst ", ",burst=")
}

/// The table of [`stats_table`]'s queues.
fn queues_table(stats: &Stats) -> String {
    if stats.queues.is_empty() {
        return "no queues yet (nothing enqueued, nothing paused)\n".into();
    }
    let rows: Vec<_> = stats
        .queues
        .iter()
        .map(|q| {
            let lagging = q.oldest_available_age.is_some_and(|a| a.as_secs() >= 60);
            let state = q.state();
            let colour = match state {
                QueueState::Paused => Some(Colour::Yellow),
                QueueState::NoWorker => Some(Colour::Red),
                _ => None,
            };
            vec![
                (q.queue.clone(), None),
                (state.to_string(), colour),
                (q.available.to_string(), None),
                (q.scheduled.to_string(), None),
                (q.processing.to_string(), None),
                (
                    q.limit.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                    None,
                ),
                alert(q.held_back.to_string(), q.held_back > 0, Colour::Yellow),
                (q.blocked.to_string(), None),
                (
                    q.rate.map_or_else(|| "-".to_owned(), |r| rate_word(&r)),
                    None,
                ),
                alert(
                    q.rate_held_back.to_string(),
                    q.rate_held_back > 0,
                    Colour::Yellow,
                ),
                alert(
                    q.expired_leases.to_string(),
                    q.expired_leases > 0,
                    Colour::Red,
                ),
                alert(age(q.oldest_available_age), lagging, Colour::Red),
                (capped(q.done), None),
                alert(capped(q.failed), q.failed > 0, Colour::Red),
                (capped(q.cancelled), None),
                (q.succeeded_last_minute().to_string(), None),
                (q.succeeded_last_hour().to_string(), None),
                alert(
                    q.failed_last_hour().to_string(),
                    q.failed_last_hour() > 0,
                    Colour::Red,
                ),
            ]
        })
        .collect();
    table(
        &[
            "QUEUE",
            "STATE",
            "AVAILABLE",
            "SCHEDULED",
            "PROCESSING",
            "LIMIT",
            "HELD",
            "BLOCKED",
            "RATE",
            "RATE-HELD",
            "EXPIRED",
            "LAG",
            "DONE",
            "FAILED",
            "CANCELLED",
            "OK/1M",
            "OK/1H",
            "FAILED/1H",
        ],
        &rows,
    )
}

fn queue_json(q: &QueueStats) -> Value {
    json!({
        "queue": q.queue,
        "paused": q.paused,
        "workers": q.workers,
        "state": q.state().to_string(),
        "available": q.available,
        "scheduled": q.scheduled,
        "pending": q.pending(),
        "processing": q.processing,
        "limit": q.limit,
        "held_back": q.held_back,
        "blocked": q.blocked,
        "rate": q.rate.as_ref().map(rate_json),
        "rate_held_back": q.rate_held_back,
        "expired_leases": q.expired_leases,
        "oldest_available_age_seconds": q.oldest_available_age.map(|a| a.as_secs_f64()),
        "done": q.done,
        "failed": q.failed,
        "cancelled": q.cancelled,
        "finished_counts_capped_at": STATS_FINISHED_CAP,
        "succeeded_last_minute": q.succeeded_last_minute(),
        "succeeded_last_hour": q.succeeded_last_hour(),
        "failed_last_hour": q.failed_last_hour(),
        "succeeded_per_minute": q.succeeded_per_minute,
        "failed_per_minute": q.failed_per_minute,
        "in_progress": q.in_progress.iter().map(|r| json!({
            "id": r.id,
            "job_name": r.job_name,
            "attempt": r.attempt,
            "progress": progress_json(&r.progress),
        })).collect::<Vec<_>>(),
    })
}

/// The live workers, one line each, then the jobs they publish.
pub(crate) fn workers_text(workers: &[WorkerInfo], jobs: &[PublishedJob]) -> String {
    if workers.is_empty() {
        return "no live worker (none has refreshed its row within its expiry)\n".into();
    }
    let rows: Vec<_> = workers
        .iter()
        .map(|w| {
            let queues = w
                .queues
                .iter()
                .map(|q| format!("{}×{}", q.name, q.concurrency))
                .collect::<Vec<_>>()
                .join(",");
            vec![
                (w.worker_id.clone(), None),
                (w.host.clone(), None),
                (w.pid.to_string(), None),
                (w.version.clone(), None),
                (queues, None),
                (w.running.to_string(), None),
                (when(w.started_at), None),
                (format!("{} ago", age(Some(w.last_seen_age()))), None),
            ]
        })
        .collect();
    let mut text = table(
        &[
            "WORKER", "HOST", "PID", "VERSION", "QUEUES", "RUNNING", "STARTED", "SEEN",
        ],
        &rows,
    );
    if !jobs.is_empty() {
        text.push('\n');
        let rows: Vec<_> = jobs
            .iter()
            .map(|j| {
                let k = &j.kind;
                let timeout = k.timeout.map_or_else(|| "-".to_owned(), |t| age(Some(t)));
                let note = if j.disagreeing.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (defaults of {}, the newest; differ on {})",
                        j.published_by,
                        j.disagreeing.join(", ")
                    )
                };
                vec![
                    (k.name.clone(), None),
                    (k.queue.clone(), None),
                    (k.max_attempts.to_string(), None),
                    (timeout, None),
                    (k.key_template.clone().unwrap_or_else(|| "-".into()), None),
                    alert(
                        format!("{}{note}", k.fields_text()),
                        !j.disagreeing.is_empty(),
                        Colour::Yellow,
                    ),
                ]
            })
            .collect();
        text.push_str(&table(
            &["JOB", "QUEUE", "ATTEMPTS", "TIMEOUT", "KEY", "FIELDS"],
            &rows,
        ));
    }
    text
}

/// The live workers and the jobs they publish, as one JSON document.
pub(crate) fn workers_json(workers: &[WorkerInfo], jobs: &[PublishedJob]) -> Value {
    let kind = |k: &JobKind| {
        json!({
            "name": k.name,
            "queue": k.queue,
            "priority": k.priority,
            "max_attempts": k.max_attempts,
            "timeout_seconds": k.timeout.map(|t| t.as_secs_f64()),
            "key_template": k.key_template,
            "fields": k.fields.as_ref().map(|fields| fields
                .iter()
                .map(|f| json!({"name": f.name, "type": f.type_name, "required": f.required}))
                .collect::<Vec<_>>()),
        })
    };
    json!({
        "workers": workers.iter().map(|w| json!({
            "worker_id": w.worker_id,
            "host": w.host,
            "pid": w.pid,
            "version": w.version,
            "queues": w.queues.iter().map(|q| json!({"name": q.name, "concurrency": q.concurrency})).collect::<Vec<_>>(),
            "running": w.running,
            "started_at": w.started_at.to_rfc3339(),
            "last_seen": w.last_seen.to_rfc3339(),
            "expires_at": w.expires_at.to_rfc3339(),
            "jobs": w.jobs.iter().map(|k| k.name.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "jobs": jobs.iter().map(|j| {
            let mut value = kind(&j.kind);
            value["published_by"] = json!(j.published_by);
            value["workers"] = json!(j.workers);
            value["disagreeing"] = json!(j.disagreeing);
            value
        }).collect::<Vec<_>>(),
    })
}

pub(crate) fn stats_json(stats: &Stats) -> Value {
    json!({
        "taken_at": stats.taken_at.to_rfc3339(),
        "queues": stats.queues.iter().map(queue_json).collect::<Vec<_>>(),
        "key_rates": stats
            .key_rates
            .iter()
            .map(|(key, rate)| json!({ "key": key, "rate": rate_json(rate) }))
            .collect::<Vec<_>>(),
    })
}

fn rate_json(r: &jobq_runtime::Rate) -> Value {
    json!({
        "starts": r.starts(),
        "period_seconds": r.period().as_secs_f64(),
        "burst": r.burst(),
    })
}

pub(crate) fn counts_json(c: &QueueCounts) -> Value {
    json!({
        "pending": c.pending,
        "processing": c.processing,
        "done": c.done,
        "failed": c.failed,
        "cancelled": c.cancelled,
        "blocked": c.blocked,
    })
}

/// The colour a status is shown in.
fn status_colour(status: JobStatus) -> Option<Colour> {
    match status {
        JobStatus::Failed => Some(Colour::Red),
        JobStatus::Done => Some(Colour::Green),
        JobStatus::Cancelled => Some(Colour::Dim),
        _ => None,
    }
}

/// The text of a time, to the second.
fn when(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The first line of an error, cut to `max` characters.
fn headline(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// The `list` table and, when there is more, how to get the next page.
pub(crate) fn list_table(page: &JobPage) -> String {
    if page.jobs.is_empty() {
        return "no jobs match\n".into();
    }
    let rows: Vec<_> = page
        .jobs
        .iter()
        .map(|j| {
            vec![
                (j.id.to_string(), None),
                (j.queue.clone(), None),
                (j.job_name.clone(), None),
                (j.status.as_str().to_owned(), status_colour(j.status)),
                (format!("{}/{}", j.attempts, j.max_attempts), None),
                (when(j.run_at), None),
                (when(j.created_at), None),
                (
                    match (&j.progress, j.status) {
                        (Some(p), JobStatus::Processing) => headline(&p.to_string(), 40),
                        _ => "-".into(),
                    },
                    None,
                ),
                (
                    j.last_error
                        .as_deref()
                        .map_or_else(|| "-".into(), |e| headline(e, 60)),
                    None,
                ),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "ID",
            "QUEUE",
            "JOB",
            "STATUS",
            "ATTEMPTS",
            "RUN_AT",
            "CREATED",
            "PROGRESS",
            "LAST ERROR",
        ],
        &rows,
    );
    if let Some(next) = page.next {
        out.push_str(&format!("more: --after {next}\n"));
    }
    out
}

pub(crate) fn job_json(job: &JobInfo) -> Value {
    let payload: Value =
        serde_json::from_str(&job.payload).unwrap_or_else(|_| Value::String(job.payload.clone()));
    json!({
        "id": job.id,
        "queue": job.queue,
        "job_name": job.job_name,
        "status": job.status.as_str(),
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at.to_rfc3339(),
        "created_at": job.created_at.to_rfc3339(),
        "claimed_at": job.claimed_at.map(|t| t.to_rfc3339()),
        "claimed_by": job.claimed_by,
        "finished_at": job.finished_at.map(|t| t.to_rfc3339()),
        "idempotency_key": job.idempotency_key,
        "last_error": job.last_error,
        "payload": payload,
        "tags": job.tags,
    })
}

/// [`job_json`] with the job's attempt timeline (`jobq show --json`).
pub(crate) fn job_json_with_history(job: &JobInfo) -> Value {
    let mut value = job_json(job);
    value["progress"] = job.progress.as_ref().map_or(Value::Null, progress_json);
    value["metadata"] = job.metadata.clone().unwrap_or(Value::Null);
    value["output"] = job.output.as_deref().map_or(Value::Null, |o| {
        serde_json::from_str(o).unwrap_or_else(|_| Value::String(o.to_owned()))
    });
    value["history"] = job
        .timeline()
        .iter()
        .map(|a| {
            json!({
                "attempt": a.attempt,
                "outcome": a.outcome,
                "worker": a.worker,
                "started_at": a.started_at.map(|t| t.to_rfc3339()),
                "ended_at": a.ended_at.map(|t| t.to_rfc3339()),
                "error": a.error,
            })
        })
        .collect();
    value
}

pub(crate) fn page_json(page: &JobPage) -> Value {
    json!({
        "jobs": page.jobs.iter().map(job_json).collect::<Vec<_>>(),
        "next": page.next.map(|c| c.to_string()),
    })
}

/// `field value` lines, then the payload pretty-printed and the last error in full.
pub(crate) fn describe(job: &JobInfo) -> String {
    let optional = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let status = match status_colour(job.status) {
        Some(colour) => paint(job.status.as_str(), colour),
        None => job.status.as_str().to_owned(),
    };
    let payload = job.payload_pretty();
    let mut out = format!(
        "id {}\nqueue {}\njob {}\nstatus {}\npriority {}\nattempts {}/{}\nrun_at {}\ncreated_at {}\nclaimed_at {}\nclaimed_by {}\nfinished_at {}\nidempotency_key {}\n",
        job.id,
        job.queue,
        job.job_name,
        status,
        job.priority,
        job.attempts,
        job.max_attempts,
        job.run_at.to_rfc3339(),
        job.created_at.to_rfc3339(),
        optional(job.claimed_at.map(|t| t.to_rfc3339())),
        optional(job.claimed_by.clone()),
        optional(job.finished_at.map(|t| t.to_rfc3339())),
        optional(job.idempotency_key.clone()),
    );
    out.push_str(&format!("payload\n{}\n", indent(&payload)));
    if job.tags.is_empty() {
        out.push_str("tags -\n");
    } else {
        out.push_str(&format!("tags {}\n", job.tags.join(", ")));
    }
    match job.metadata_pretty() {
        Some(metadata) => out.push_str(&format!("metadata\n{}\n", indent(&metadata))),
        None => out.push_str("metadata -\n"),
    }
    match &job.last_error {
        Some(error) => out.push_str(&format!("last_error\n{}\n", indent(error))),
        None => out.push_str("last_error -\n"),
    }
    match &job.progress {
        Some(progress) => out.push_str(&format!("progress {progress}\n")),
        None => out.push_str("progress -\n"),
    }
    match job.output_pretty() {
        Some(output) => out.push_str(&format!("output\n{}\n", indent(&output))),
        None => out.push_str("output -\n"),
    }
    out.push_str(&timeline(job));
    out
}

/// The attempts, oldest first: one line each (number, outcome, start, how
/// long, worker), its message indented below.
fn timeline(job: &JobInfo) -> String {
    let attempts = job.timeline();
    if attempts.is_empty() {
        return "history -\n".to_owned();
    }
    let mut out = String::from("history\n");
    if job.history.len() >= jobq_runtime::HISTORY_CAP {
        out.push_str(&format!(
            "  (the latest {} ended attempts are kept)\n",
            jobq_runtime::HISTORY_CAP
        ));
    }
    for a in &attempts {
        let took = match (a.duration(), a.ended_at) {
            (Some(took), _) => humantime::format_duration(round_ms(took)).to_string(),
            (None, None) => "running".to_owned(),
            (None, Some(_)) => "-".to_owned(),
        };
        let outcome = match a.outcome.as_str() {
            "succeeded" => paint(&a.outcome, Colour::Green),
            "running" | "snooze" => a.outcome.clone(),
            _ => paint(&a.outcome, Colour::Red),
        };
        out.push_str(&format!(
            "  #{} {} started {} took {} by {}\n",
            a.attempt,
            outcome,
            a.started_at
                .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339()),
            took,
            a.worker.as_deref().unwrap_or("-"),
        ));
        if let Some(error) = &a.error {
            out.push_str(&indent(&indent(error)));
            out.push('\n');
        }
    }
    out
}

/// `d` to whole milliseconds (humantime prints every digit).
fn round_ms(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Every line of `text` indented by two spaces.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_line(check: &Check) -> String {
    let (label, colour) = match check.status {
        CheckStatus::Ok => ("ok", Colour::Green),
        CheckStatus::Warn => ("warn", Colour::Yellow),
        _ => ("fail", Colour::Red),
    };
    let mut line = format!(
        "{}  {}  {}",
        paint(&format!("{label:<4}"), colour),
        check.name,
        check.found
    );
    if let Some(advice) = &check.advice {
        line.push_str(" — ");
        line.push_str(advice);
    }
    line
}

/// One line per check; the exit status says whether one failed.
pub(crate) fn doctor_text(report: &DoctorReport) -> String {
    report.checks.iter().map(|c| check_line(c) + "\n").collect()
}

pub(crate) fn doctor_json(report: &DoctorReport) -> Value {
    json!({
        "worst": report.worst().as_str(),
        "checks": report.checks.iter().map(|c| json!({
            "name": c.name,
            "status": c.status.as_str(),
            "found": c.found,
            "advice": c.advice,
        })).collect::<Vec<_>>(),
    })
}

/// `jobq schedules`: one row per stored schedule.
pub(crate) fn schedules_text(schedules: &[ScheduleInfo]) -> String {
    if schedules.is_empty() {
        return "no schedule is stored (jobq schedule put adds one)\n".into();
    }
    let rows: Vec<_> = schedules
        .iter()
        .map(|s| {
            vec![
                (s.schedule.name.clone(), None),
                (s.schedule.job_name.clone(), None),
                (s.schedule.cron.clone(), None),
                (
                    s.schedule.time_zone.clone().unwrap_or_else(|| "UTC".into()),
                    None,
                ),
                (s.schedule.queue.clone().unwrap_or_else(|| "-".into()), None),
                ((if s.paused { "paused" } else { "-" }).to_owned(), None),
                (s.last_tick.map_or_else(|| "-".into(), when), None),
            ]
        })
        .collect();
    table(
        &[
            "SCHEDULE",
            "JOB",
            "CRON",
            "ZONE",
            "QUEUE",
            "PAUSED",
            "LAST TICK",
        ],
        &rows,
    )
}

/// `jobq schedules --json`.
pub(crate) fn schedules_json(schedules: &[ScheduleInfo]) -> Value {
    json!({
        "schedules": schedules.iter().map(|s| json!({
            "name": s.schedule.name,
            "job": s.schedule.job_name,
            "cron": s.schedule.cron,
            "time_zone": s.schedule.time_zone,
            "payload": s.schedule.payload,
            "queue": s.schedule.queue,
            "priority": s.schedule.priority,
            "paused": s.paused,
            "last_tick": s.last_tick.map(|t| t.to_rfc3339()),
            "updated_at": s.updated_at.to_rfc3339(),
        })).collect::<Vec<_>>(),
    })
}

/// A workflow: one line per job, in enqueue order.
pub(crate) fn workflow_text(flow: &jobq_runtime::WorkflowInfo) -> String {
    let rows: Vec<_> = flow
        .jobs
        .iter()
        .map(|j| {
            let list = |tasks: &[String]| {
                if tasks.is_empty() {
                    "-".to_owned()
                } else {
                    tasks.join(", ")
                }
            };
            vec![
                (j.task.clone(), None),
                (j.id.to_string(), None),
                (
                    j.status.map_or_else(|| "pruned".into(), |s| s.to_string()),
                    None,
                ),
                (list(&j.depends_on), None),
                (list(&j.waiting_on), None),
            ]
        })
        .collect();
    let state = flow.state();
    format!(
        "workflow {}: {state}\n{}",
        flow.id,
        table(&["TASK", "ID", "STATUS", "AFTER", "WAITING ON"], &rows)
    )
}

/// A batch: its counts, then one line per callback.
pub(crate) fn batch_text(batch: &jobq_runtime::BatchInfo) -> String {
    let rows: Vec<_> = batch
        .callbacks
        .iter()
        .map(|c| {
            vec![
                (c.when.as_str().to_owned(), None),
                (c.id.to_string(), None),
                (
                    c.status.map_or_else(|| "pruned".into(), |s| s.to_string()),
                    None,
                ),
            ]
        })
        .collect();
    format!(
        "batch {}: {}
jobs {}: {} unfinished, {} succeeded, {} failed, {} cancelled, {} deleted
{}",
        batch.id,
        batch.state(),
        batch.jobs,
        batch.unfinished,
        batch.succeeded,
        batch.failed,
        batch.cancelled,
        batch.deleted,
        table(&["CALLBACK", "ID", "STATUS"], &rows)
    )
}

/// A batch as JSON.
pub(crate) fn batch_json(batch: &jobq_runtime::BatchInfo) -> Value {
    json!({
        "id": batch.id,
        "state": batch.state(),
        "closed": batch.closed,
        "jobs": batch.jobs,
        "unfinished": batch.unfinished,
        "succeeded": batch.succeeded,
        "failed": batch.failed,
        "cancelled": batch.cancelled,
        "deleted": batch.deleted,
        "callbacks": batch.callbacks.iter().map(|c| json!({
            "when": c.when.as_str(),
            "id": c.id,
            "status": c.status.map(|s| s.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// A workflow as JSON.
pub(crate) fn workflow_json(flow: &jobq_runtime::WorkflowInfo) -> Value {
    json!({
        "id": flow.id,
        "finished": flow.finished(),
        "succeeded": flow.succeeded(),
        "jobs": flow.jobs.iter().map(|j| json!({
            "task": j.task,
            "id": j.id,
            "status": j.status.map(|s| s.to_string()),
            "depends_on": j.depends_on,
            "waiting_on": j.waiting_on,
        })).collect::<Vec<_>>(),
    })
}
