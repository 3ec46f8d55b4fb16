//! What each command does: one call of the `Jobq` API, printed.

use std::io::{BufRead, IsTerminal};

use jobq_runtime::{
    CheckStatus, Enqueue, JobFilter, JobStatus, Jobq, Order, Page, Schedule, error_chain,
};

use crate::output;
use crate::{Command, FilterArgs, Format, Outcome, ScheduleAction};

/// Runs `command`, printing what it did; an error as text with its causes.
pub(crate) async fn execute(jobq: &Jobq, command: Command) -> Result<Outcome, String> {
    let outcome = match command {
        Command::Migrate => {
            jobq.migrate().await.map_err(|e| error_chain(&e))?;
            outln!("migrated");
            Outcome::Done
        }
        Command::Stats { watch, format } => {
            let Some(every) = watch else {
                stats_once(jobq, format).await?;
                return Ok(Outcome::Done);
            };
            loop {
                if std::io::stdout().is_terminal() && !format.json {
                    // Clear the screen and go home, so the table redraws in place.
                    out!("\x1b[2J\x1b[H");
                }
                stats_once(jobq, format).await?;
                if crate::stdio::stdout_closed() {
                    // No one is reading any more (`| head`): done.
                    return Ok(Outcome::Done);
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = tokio::signal::ctrl_c() => return Ok(Outcome::Done),
                }
            }
        }
        Command::Counts { queue, format } => {
            let c = jobq.counts(&queue).await.map_err(|e| error_chain(&e))?;
            if format.json {
                outln!("{}", output::counts_json(&c));
            } else {
                outln!(
                    "pending {}\nprocessing {}\ndone {}\nfailed {}\ncancelled {}",
                    c.pending,
                    c.processing,
                    c.done,
                    c.failed,
                    c.cancelled
                );
            }
            Outcome::Done
        }
        Command::List {
            filter,
            oldest_first,
            limit,
            after,
            format,
        } => {
            let after = match after {
                Some(text) => Some(text.parse().map_err(|_| {
                    format!(
                        "`{text}` is not a cursor (the number after `--after` that `list` printed)"
                    )
                })?),
                None => None,
            };
            let order = if oldest_first {
                Order::OldestFirst
            } else {
                Order::NewestFirst
            };
            let page = Page::first(limit).order(order).after(after);
            let page = jobq
                .list(&filter.to_filter(), page)
                .await
                .map_err(|e| error_chain(&e))?;
            if format.json {
                outln!("{}", output::page_json(&page));
            } else {
                out!("{}", output::list_table(&page));
            }
            Outcome::Done
        }
        Command::Show { id, format } => match jobq.job(id).await.map_err(|e| error_chain(&e))? {
            Some(job) if format.json => {
                outln!("{}", output::job_json_with_history(&job));
                Outcome::Done
            }
            Some(job) => {
                out!("{}", output::describe(&job));
                Outcome::Done
            }
            None => {
                errln!("jobq: no job {id}");
                Outcome::NotApplicable
            }
        },
        Command::Retry { id, filter, yes } => {
            let action = Bulk {
                verb: "retry",
                done: "pending again",
                applies_to: &[JobStatus::Failed, JobStatus::Cancelled],
            };
            match id {
                Some(id) => by_id(id, &filter, action, jobq.retry(id).await),
                None => action.run(jobq, &filter, yes).await,
            }?
        }
        Command::Cancel { id, filter, yes } => {
            let action = Bulk {
                verb: "cancel",
                done: "cancelled",
                applies_to: &[JobStatus::Pending, JobStatus::Processing],
            };
            match id {
                Some(id) => by_id(id, &filter, action, jobq.cancel(id).await),
                None => action.run(jobq, &filter, yes).await,
            }?
        }
        Command::Pause { queue } => {
            if jobq.pause(&queue).await.map_err(|e| error_chain(&e))? {
                outln!("queue {queue} is paused: workers claim nothing more from it");
            } else {
                outln!("queue {queue} was paused already");
            }
            Outcome::Done
        }
        Command::Resume { queue } => {
            if jobq.resume(&queue).await.map_err(|e| error_chain(&e))? {
                outln!("queue {queue} is resumed");
            } else {
                outln!("queue {queue} was not paused");
            }
            Outcome::Done
        }
        Command::Limit { queue, limit } => {
            jobq.set_queue_limit(&queue, limit.0)
                .await
                .map_err(|e| error_chain(&e))?;
            match limit.0 {
                Some(n) => outln!(
                    "queue {queue} is limited to {n} jobs at once across every worker (within one poll interval)"
                ),
                None => outln!("queue {queue} has no limit"),
            }
            Outcome::Done
        }
        Command::Rate {
            queue,
            rate,
            burst,
            key,
        } => {
            let rate = rate
                .0
                .map(|(starts, period)| jobq_runtime::Rate::per(starts, period).with_burst(burst));
            let set = if key {
                jobq.set_key_rate(&queue, rate).await
            } else {
                jobq.set_queue_rate(&queue, rate).await
            };
            set.map_err(|e| error_chain(&e))?;
            let what = if key { "key" } else { "queue" };
            match rate {
                Some(rate) => outln!(
                    "{what} {queue} starts at most {rate} across every worker, one every {:?} (within one poll interval)",
                    rate.interval()
                ),
                None => outln!("{what} {queue} has no rate"),
            }
            Outcome::Done
        }
        Command::Schedules { format } => {
            let schedules = jobq.schedules().await.map_err(|e| error_chain(&e))?;
            if format.json {
                outln!("{}", output::schedules_json(&schedules));
            } else {
                out!("{}", output::schedules_text(&schedules));
            }
            Outcome::Done
        }
        Command::Schedule { action } => schedule(jobq, action).await?,
        Command::Workflow { id, cancel, format } => {
            if cancel {
                let cancelled = jobq
                    .cancel_workflow(&id)
                    .await
                    .map_err(|e| error_chain(&e))?;
                if !format.json {
                    outln!("cancelled {cancelled} job(s) of workflow {id}");
                }
            }
            let Some(flow) = jobq.workflow(&id).await.map_err(|e| error_chain(&e))? else {
                outln!("no job has workflow id {id}");
                return Ok(Outcome::NotApplicable);
            };
            if format.json {
                outln!("{}", output::workflow_json(&flow));
            } else {
                out!("{}", output::workflow_text(&flow));
            }
            Outcome::Done
        }
        Command::Batch {
            id,
            close,
            cancel,
            format,
        } => {
            let Some(_) = jobq.batch(&id).await.map_err(|e| error_chain(&e))? else {
                outln!("there is no batch {id}");
                return Ok(Outcome::NotApplicable);
            };
            if cancel {
                let cancelled = jobq.cancel_batch(&id).await.map_err(|e| error_chain(&e))?;
                if !format.json {
                    outln!("cancelled {cancelled} job(s) of batch {id}");
                }
            } else if close {
                let closed = jobq.close_batch(&id).await.map_err(|e| error_chain(&e))?;
                if !format.json {
                    outln!(
                        "batch {id} {}",
                        if closed {
                            "closed"
                        } else {
                            "was closed already"
                        }
                    );
                }
            }
            let Some(batch) = jobq.batch(&id).await.map_err(|e| error_chain(&e))? else {
                outln!("there is no batch {id}");
                return Ok(Outcome::NotApplicable);
            };
            if format.json {
                outln!("{}", output::batch_json(&batch));
            } else {
                out!("{}", output::batch_text(&batch));
            }
            Outcome::Done
        }
        Command::Workers { format } => {
            let workers = jobq.workers().await.map_err(|e| error_chain(&e))?;
            let jobs = jobq.job_kinds().await.map_err(|e| error_chain(&e))?;
            if format.json {
                outln!("{}", output::workers_json(&workers, &jobs));
            } else {
                out!("{}", output::workers_text(&workers, &jobs));
            }
            Outcome::Done
        }
        Command::Enqueue {
            name,
            payload,
            queue,
            priority,
            delay,
            key,
            max_attempts,
            tags,
            metadata,
            format,
        } => {
            let mut options = Enqueue::new().tags(tags);
            if let Some(metadata) = metadata {
                let value: serde_json::Value = serde_json::from_str(&metadata)
                    .map_err(|e| format!("--metadata is not JSON: {e}"))?;
                options = options.metadata(value);
            }
            if let Some(queue) = queue {
                options = options.queue(queue);
            }
            if let Some(priority) = priority {
                options = options.priority(priority);
            }
            if let Some(delay) = delay {
                options = options.delay(delay);
            }
            if let Some(key) = key {
                options = options.idempotency_key(key);
            }
            if let Some(max_attempts) = max_attempts {
                options = options.max_attempts(max_attempts);
            }
            // Say so when live workers define the job differently: the
            // newest one's defaults are used.
            if let Ok(kinds) = jobq.job_kinds().await {
                if let Some(job) = kinds
                    .iter()
                    .find(|j| j.kind.name == name && !j.disagreeing.is_empty())
                {
                    errln!(
                        "jobq: note: live workers define `{name}` differently; using the defaults of {} (started last), not those of {}",
                        job.published_by,
                        job.disagreeing.join(", ")
                    );
                }
            }
            let enqueued = jobq
                .enqueue_json(&name, &payload, options)
                .await
                .map_err(|e| error_chain(&e))?;
            if format.json {
                outln!(
                    "{}",
                    serde_json::json!({"id": enqueued.id, "duplicate": enqueued.duplicate})
                );
            } else if enqueued.duplicate {
                outln!(
                    "job {} already stored under that key (not stored again)",
                    enqueued.id
                );
            } else {
                outln!("job {} enqueued", enqueued.id);
            }
            Outcome::Done
        }
        Command::Prune { finished, failed } => {
            if finished.is_none() && failed.is_none() {
                errln!("jobq: say what to prune: --finished AGE and/or --failed AGE");
                return Ok(Outcome::NotApplicable);
            }
            if let Some(age) = finished {
                let n = jobq
                    .prune_finished(age)
                    .await
                    .map_err(|e| error_chain(&e))?;
                outln!("deleted {n} done or cancelled jobs");
            }
            if let Some(age) = failed {
                let n = jobq.prune_failed(age).await.map_err(|e| error_chain(&e))?;
                outln!("deleted {n} failed jobs");
            }
            Outcome::Done
        }
        Command::Doctor { lease, format } => {
            let report = match lease {
                Some(lease) => jobq.doctor_with_lease(lease).await,
                None => jobq.doctor().await,
            }
            .map_err(|e| error_chain(&e))?;
            if format.json {
                outln!("{}", output::doctor_json(&report));
            } else {
                out!("{}", output::doctor_text(&report));
            }
            if report.worst() >= CheckStatus::Fail {
                Outcome::Failed
            } else {
                Outcome::Done
            }
        }
        Command::Web {
            listen,
            read_only,
            user,
            allow_hosts,
        } => crate::web::serve(jobq.clone(), listen, read_only, user, allow_hosts).await?,
    };
    Ok(outcome)
}

async fn stats_once(jobq: &Jobq, format: Format) -> Result<(), String> {
    let stats = jobq.stats().await.map_err(|e| error_chain(&e))?;
    if format.json {
        outln!("{}", output::stats_json(&stats));
    } else {
        out!("{}", output::stats_table(&stats));
    }
    Ok(())
}

impl FilterArgs {
    fn to_filter(&self) -> JobFilter {
        let mut filter = JobFilter::new().created(self.since, self.before);
        if let Some(queue) = &self.queue {
            filter = filter.queue(queue.clone());
        }
        if let Some(status) = self.status {
            filter = filter.status(status);
        }
        if let Some(name) = &self.name {
            filter = filter.job_name(name.clone());
        }
        if let Some(prefix) = &self.key_prefix {
            filter = filter.key_prefix(prefix.clone());
        }
        if let Some(tag) = &self.tag {
            filter = filter.tag(tag.clone());
        }
        filter
    }

    fn is_empty(&self) -> bool {
        self.queue.is_none()
            && self.status.is_none()
            && self.name.is_none()
            && self.key_prefix.is_none()
            && self.tag.is_none()
            && self.since.is_none()
            && self.before.is_none()
    }
}

/// A retry or a cancel, by id or by filter.
#[derive(Debug, Clone, Copy)]
struct Bulk {
    verb: &'static str,
    /// What a changed job now is.
    done: &'static str,
    /// The statuses it changes.
    applies_to: &'static [JobStatus],
}

/// The end of an action on one job: `changed` is what the call returned.
fn by_id(
    id: i64,
    filter: &FilterArgs,
    action: Bulk,
    changed: jobq_runtime::Result<bool>,
) -> Result<Outcome, String> {
    if !filter.is_empty() {
        return Err(format!(
            "give a job id or a filter, not both (to {} one job: jobq {} {id})",
            action.verb, action.verb
        ));
    }
    if changed.map_err(|e| error_chain(&e))? {
        outln!("job {id} is {}", action.done);
        Ok(Outcome::Done)
    } else {
        errln!(
            "jobq: job {id} is not {} (or does not exist)",
            action.statuses()
        );
        Ok(Outcome::NotApplicable)
    }
}

impl Bulk {
    /// `failed or cancelled`.
    fn statuses(self) -> String {
        let names: Vec<&str> = self.applies_to.iter().map(|s| s.as_str()).collect();
        names.join(" or ")
    }

    /// Counts what `filter` would change, asks unless `yes`, then acts.
    async fn run(self, jobq: &Jobq, args: &FilterArgs, yes: bool) -> Result<Outcome, String> {
        if args.is_empty() {
            return Err(format!(
                "say which jobs to {}: a job id, or a filter (--queue, --status, --name, --key-prefix, --tag, --since, --before)",
                self.verb
            ));
        }
        let filter = args.to_filter();
        if let Some(status) = filter.status {
            if !self.applies_to.contains(&status) {
                errln!(
                    "jobq: {} applies to {} jobs, not {}: nothing to {}",
                    self.verb,
                    self.statuses(),
                    status.as_str(),
                    self.verb
                );
                return Ok(Outcome::NotApplicable);
            }
        }
        let mut count = 0;
        for &status in self.applies_to {
            if filter.status.is_none_or(|s| s == status) {
                count += jobq
                    .count_where(&filter.clone().status(status))
                    .await
                    .map_err(|e| error_chain(&e))?;
            }
        }
        if count == 0 {
            errln!(
                "jobq: no {} jobs match: nothing to {}",
                self.statuses(),
                self.verb
            );
            return Ok(Outcome::NotApplicable);
        }
        if !yes && !confirm(&format!("{} {count} {} jobs?", self.verb, self.statuses())) {
            errln!("jobq: nothing changed");
            return Ok(Outcome::NotApplicable);
        }
        let changed = match self.verb {
            "retry" => jobq.retry_where(&filter).await,
            _ => jobq.cancel_where(&filter).await,
        }
        .map_err(|e| error_chain(&e))?;
        outln!("{changed} jobs {}", self.done);
        Ok(Outcome::Done)
    }
}

/// Asks `question` on the terminal (on stderr, so stdout stays the
/// command's output); `false` unless the answer is yes. Off a terminal it
/// does not ask, and says to pass `--yes`, rather than read a script's input:
/// not confirmed, like an answer of no.
fn confirm(question: &str) -> bool {
    if !std::io::stdin().is_terminal() {
        errln!("jobq: {question} (not a terminal, so not asking: pass --yes to act)");
        return false;
    }
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let question = if colour {
        format!("\x1b[33m{question}\x1b[0m")
    } else {
        question.to_owned()
    };
    crate::stdio::write_err(format_args!("{question} [y/N] "));
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes" | "YES")
}

/// `jobq schedule …`.
async fn schedule(jobq: &Jobq, action: ScheduleAction) -> Result<Outcome, String> {
    let done = |changed: bool, name: &str, did: &str, was: &str| {
        if changed {
            outln!("schedule {name} {did}");
        } else {
            outln!("no schedule {name} is stored{was}");
        }
    };
    match action {
        ScheduleAction::Put {
            name,
            job,
            cron,
            payload,
            time_zone,
            queue,
            priority,
        } => {
            let mut schedule = Schedule::new(&name, job, cron).payload(payload);
            schedule.time_zone = time_zone;
            schedule.queue = queue;
            schedule.priority = priority;
            jobq.put_schedule(schedule)
                .await
                .map_err(|e| error_chain(&e))?;
            outln!("schedule {name} is stored: every worker runs it from its next tick");
        }
        ScheduleAction::Pause { name } => {
            let changed = jobq
                .pause_schedule(&name)
                .await
                .map_err(|e| error_chain(&e))?;
            done(changed, &name, "is paused", "");
        }
        ScheduleAction::Resume { name } => {
            let changed = jobq
                .resume_schedule(&name)
                .await
                .map_err(|e| error_chain(&e))?;
            done(changed, &name, "is resumed", "");
        }
        ScheduleAction::Remove { name } => {
            let changed = jobq
                .remove_schedule(&name)
                .await
                .map_err(|e| error_chain(&e))?;
            done(changed, &name, "is removed", " (nothing removed)");
        }
    }
    Ok(Outcome::Done)
}
