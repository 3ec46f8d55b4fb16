//! Periodic jobs: every worker that schedules one enqueues it at each tick
//! of its cron schedule with the idempotency key `cron:{name}:{tick}`, so
//! exactly one row exists per tick however many workers schedule it, without
//! a leader.
//!
//! A schedule is read in UTC or in an IANA time zone. The tick is an instant
//! (its key is in UTC), so every process computes the same ticks whatever
//! its own zone. Daylight saving time follows Vixie cron (the `croner`
//! crate's rules): a fixed time that a spring-forward skips (02:30 when
//! 02:00 becomes 03:00) runs at the first time after the gap, that day; a
//! fixed time that a fall-back repeats runs once, at its first occurrence;
//! a schedule with a wildcard or a step in its seconds, minutes or hours
//! (every 15 minutes) runs at each time the wall clock shows, none in the
//! gap and twice in the repeated hour.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, LocalResult, SecondsFormat, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::{Cron, JobType};
use futures_util::future::BoxFuture;
use jobq_core::Job;
use tokio_util::sync::CancellationToken;

use crate::error::{ConfigError, Result};
use crate::handle::Jobq;
use crate::types::{Enqueue, Enqueued, Schedule};

/// Longest single sleep before a tick: the wall clock is looked at again
/// after it, so a clock that was set or a machine that slept is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Pause after a failed enqueue of a tick, doubling up to [`MAX_RETRY_PAUSE`].
const RETRY_PAUSE: Duration = Duration::from_millis(250);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(10);

/// Enqueues the entry's job with the given idempotency key; `None` if the
/// entry no longer runs (a stored schedule changed, paused or removed).
type EnqueueFn =
    Arc<dyn Fn(Jobq, String) -> BoxFuture<'static, Result<Option<Enqueued>>> + Send + Sync>;

/// A schedule as given to the builder, parsed at `build`.
pub(in crate::worker) struct CronSpec {
    /// The job's name (declared in code) or the stored schedule's.
    name: Cow<'static, str>,
    schedule: String,
    /// The IANA name of the zone the schedule is read in; `None`: UTC.
    time_zone: Option<String>,
    enqueue: EnqueueFn,
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSpec")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("time_zone", &self.time_zone)
            .finish_non_exhaustive()
    }
}

impl CronSpec {
    pub(in crate::worker) fn new<J>(
        time_zone: Option<&str>,
        schedule: &str,
        job: J,
        options: Enqueue,
    ) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        let enqueue: EnqueueFn = Arc::new(move |jobq: Jobq, key: String| {
            let job = job.clone();
            let options = options.clone().idempotency_key(key);
            Box::pin(async move { jobq.enqueue_with(job, options).await.map(Some) })
        });
        Self {
            name: Cow::Borrowed(J::NAME),
            schedule: schedule.to_owned(),
            time_zone: time_zone.map(str::to_owned),
            enqueue,
        }
    }

    pub(in crate::worker) fn name(&self) -> &str {
        &self.name
    }

    /// A schedule kept in the database: its ticks enqueue its job by name
    /// ([`Jobq::enqueue_json`]) while the schedule is stored as it is, not
    /// paused. The row is read at each tick, when the tick is due: a change
    /// takes effect at the next tick even before the worker has heard of it
    /// (a tick is enqueued by the old schedule only if the old one was
    /// still stored at that tick or after it).
    fn stored(schedule: &Schedule) -> Self {
        let (job, payload) = (schedule.job_name.clone(), schedule.payload.clone());
        let this = Arc::new(schedule.clone());
        let mut options = Enqueue::new();
        if let Some(queue) = &schedule.queue {
            options = options.queue(queue);
        }
        if let Some(priority) = schedule.priority {
            options = options.priority(priority);
        }
        let enqueue: EnqueueFn = Arc::new(move |jobq: Jobq, key: String| {
            let (job, payload, this) = (job.clone(), payload.clone(), this.clone());
            let options = options.clone().idempotency_key(key);
            Box::pin(async move {
                let stored = jobq.store().stored_schedule(&this.name).await?;
                if !stored.is_some_and(|now| !now.paused && now.schedule == *this) {
                    return Ok(None);
                }
                jobq.enqueue_json(&job, &payload, options).await.map(Some)
            })
        });
        Self {
            name: Cow::Owned(schedule.name.clone()),
            schedule: schedule.cron.clone(),
            time_zone: schedule.time_zone.clone(),
            enqueue,
        }
    }

    /// Parses the schedule and its time zone (see
    /// [`WorkerBuilder::cron`](crate::worker::WorkerBuilder::cron)); the
    /// entry's clock runs `clock` ahead of this host's (zero but in tests).
    pub(in crate::worker) fn parse(
        self,
        clock: TimeDelta,
        catch_up: Option<Duration>,
    ) -> Result<CronEntry> {
        let cron = Cron::from_str(&self.schedule).map_err(|e| ConfigError::CronSchedule {
            job: self.name.to_string(),
            schedule: self.schedule.clone(),
            reason: e.to_string(),
        })?;
        let zone = match &self.time_zone {
            None => Tz::UTC,
            Some(name) => Tz::from_str(name).map_err(|_| ConfigError::CronTimeZone {
                job: self.name.to_string(),
                time_zone: name.clone(),
            })?,
        };
        Ok(CronEntry {
            spec: self,
            cron,
            zone,
            clock,
            catch_up,
        })
    }
}

/// A parsed schedule and the job it enqueues.
pub(in crate::worker) struct CronEntry {
    spec: CronSpec,
    cron: Cron,
    /// The zone the schedule is read in.
    zone: Tz,
    /// How far the entry's clock runs ahead of this host's.
    clock: TimeDelta,
    /// How far back a start enqueues the ticks missed since the last one
    /// recorded (`WorkerBuilder::cron_catch_up`); `None`: none, and no
    /// record is kept.
    catch_up: Option<Duration>,
}

impl fmt::Debug for CronEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronEntry").field(&self.spec).finish()
    }
}

impl CronEntry {
    /// The job's name.
    pub(in crate::worker) fn name(&self) -> &str {
        &self.spec.name
    }

    /// The first tick after `after`, the schedule read in the entry's zone.
    fn next_tick(&self, after: DateTime<Utc>) -> Result<DateTime<Utc>, croner::errors::CronError> {
        next_tick(&self.cron, self.zone, after)
    }

    /// Now by the entry's clock.
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock
    }
}

/// The first tick of `cron` after `after`, the schedule read in `zone` with
/// the daylight saving rules of the module docs.
///
/// `croner` finds the next matching wall-clock time (searched in a frame
/// without daylight saving: the wall time written as if it were UTC); this
/// function maps wall times to instants itself, since across a transition
/// the crate's own search returned a time before `after` (started in a
/// repeated hour) and skipped an interval's second pass.
fn next_tick(
    cron: &Cron,
    zone: Tz,
    after: DateTime<Utc>,
) -> Result<DateTime<Utc>, croner::errors::CronError> {
    let fixed = cron.determine_job_type() == JobType::FixedTime;
    let wall = |t: DateTime<Utc>| t.with_timezone(&zone).naive_local().and_utc();
    let best = if fixed {
        None
    } else {
        second_pass(cron, zone, after)?
    };
    let mut at = wall(after);
    loop {
        at = cron.find_next_occurrence(&at, false)?;
        let tick = match zone.from_local_datetime(&at.naive_utc()) {
            LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(early, late) => {
                let (early, late) = (early.with_timezone(&Utc), late.with_timezone(&Utc));
                if early > after {
                    Some(early)
                } else if !fixed && late > after {
                    Some(late)
                } else {
                    None
                }
            }
            LocalResult::None if fixed => Some(gap_end(zone, at)),
            LocalResult::None => None,
        };
        if let Some(tick) = tick.filter(|t| *t > after) {
            return Ok(best.map_or(tick, |best: DateTime<Utc>| best.min(tick)));
        }
    }
}

/// In the first pass of a repeated hour, an interval's wall times up to
/// `after`'s own come again in the second pass, after `after`: the first of
/// those instants, if any.
fn second_pass(
    cron: &Cron,
    zone: Tz,
    after: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, croner::errors::CronError> {
    let wall = after.with_timezone(&zone).naive_local().and_utc();
    let LocalResult::Ambiguous(early, late) = zone.from_local_datetime(&wall.naive_utc()) else {
        return Ok(None);
    };
    let (early, late) = (early.with_timezone(&Utc), late.with_timezone(&Utc));
    if early != after {
        return Ok(None); // in the second pass already
    }
    let mut at = wall - (late - early);
    loop {
        at = cron.find_next_occurrence(&at, false)?;
        if at > wall {
            return Ok(None);
        }
        if let LocalResult::Ambiguous(_, late) = zone.from_local_datetime(&at.naive_utc()) {
            return Ok(Some(late.with_timezone(&Utc)));
        }
    }
}

/// The instant a spring-forward that skips the wall time `wall` (written as
/// UTC) ends: the first instant whose wall time is past it.
fn gap_end(zone: Tz, wall: DateTime<Utc>) -> DateTime<Utc> {
    let past = |second: i64| {
        DateTime::from_timestamp(second, 0)
            .is_some_and(|t| t.with_timezone(&zone).naive_local() > wall.naive_utc())
    };
    // Every real gap lies within a day, and no zone is 26 hours off UTC:
    // the first whole second past it, between two days either side.
    let day = 86_400;
    let (mut before, mut after) = (wall.timestamp() - 2 * day, wall.timestamp() + 2 * day);
    while after - before > 1 {
        let middle = before + (after - before) / 2;
        if past(middle) {
            after = middle;
        } else {
            before = middle;
        }
    }
    DateTime::from_timestamp(after, 0).unwrap_or(wall)
}

/// The idempotency key of `name`'s row for `tick`.
pub(in crate::worker) fn tick_key(name: &str, tick: DateTime<Utc>) -> String {
    format!(
        "cron:{name}:{}",
        tick.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// Most ticks a start enqueues for one schedule that it missed (the latest
/// ones): a catch-up is bounded by count as well as by its window.
pub(in crate::worker) const MAX_CATCH_UP: usize = 100;

/// A worker's cron schedules: those declared in code, and how it runs
/// the ones kept in the database.
#[derive(Debug)]
pub(in crate::worker) struct Schedules {
    pub(in crate::worker) entries: Vec<CronEntry>,
    pub(in crate::worker) stored: StoredCron,
}

/// How a worker runs the schedules kept in the database: by its cron clock
/// (`WorkerBuilder::cron_clock`, zero but in tests), catching up as its
/// schedules declared in code do (`WorkerBuilder::cron_catch_up`).
#[derive(Debug, Clone, Copy)]
pub(in crate::worker) struct StoredCron {
    pub(in crate::worker) clock: TimeDelta,
    pub(in crate::worker) catch_up: Option<Duration>,
}

/// Enqueues `entry`'s job at each tick until `stop`. Ticks that pass while
/// the database refuses the enqueue, or while the process is not running,
/// are skipped, not made up — unless the entry catches up ([`catch_up`])
/// and this is its worker's start (`start`; a stored schedule changed or
/// resumed later starts from its next tick).
pub(in crate::worker) async fn cron_loop(
    jobq: Jobq,
    entry: CronEntry,
    stop: CancellationToken,
    start: bool,
) {
    let mut after = entry.now();
    if let (Some(window), true) = (entry.catch_up, start) {
        if !catch_up(&jobq, &entry, window, &stop).await {
            return;
        }
    }
    loop {
        let tick = match entry.next_tick(after) {
            Ok(tick) => tick,
            Err(error) => {
                tracing::error!(job.name = entry.name(), %error, "the cron schedule has no next tick; it stops");
                return;
            }
        };
        while let Ok(left) = (tick - entry.now()).to_std() {
            if left.is_zero() {
                break;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(left.min(MAX_SLEEP)) => {}
            }
        }
        if !enqueue_tick(&jobq, &entry, tick, &stop).await {
            return;
        }
        if entry.catch_up.is_some() && !record_tick(&jobq, &entry, tick, &stop).await {
            return;
        }
        after = tick.max(entry.now());
    }
}

/// How often a worker reads the stored schedules when no change was
/// announced (a change is announced as a pause is, to every process).
const STORED_EVERY: Duration = Duration::from_secs(60);

/// Runs the schedules kept in the database ([`Jobq::put_schedule`]) until
/// `stop`, each as a schedule declared in code runs ([`cron_loop`], as
/// `how` says): reads them at the start, when a change is announced and
/// every [`STORED_EVERY`]; those of the first read catch up if the worker
/// does (the ticks missed while no worker ran); a schedule added, changed
/// or resumed later starts from the next tick after the read, one paused,
/// changed or removed stops. A row that does not parse (written by hand)
/// is logged and left out.
pub(in crate::worker) async fn stored_loop(jobq: Jobq, stop: CancellationToken, how: StoredCron) {
    let control = crate::wakeup::subscribe(crate::wakeup::CONTROL);
    let mut running: HashMap<String, (Schedule, CancellationToken)> = HashMap::new();
    let mut start = true;
    loop {
        // Armed before the read: a change announced during it is not missed.
        let announced = control.notified();
        tokio::pin!(announced);
        announced.as_mut().enable();
        let read = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            read = jobq.store().stored_schedules() => read,
        };
        match read {
            Ok(rows) => {
                run_stored(&jobq, &stop, &mut running, rows, how, start);
                start = false;
            }
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "reading the stored cron schedules failed; they are read again later"
            ),
        }
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = &mut announced => {}
            () = tokio::time::sleep(STORED_EVERY) => {}
        }
    }
    for (_, (_, token)) in running {
        token.cancel();
    }
}

/// Brings `running` in line with the stored schedules `rows`.
fn run_stored(
    jobq: &Jobq,
    stop: &CancellationToken,
    running: &mut HashMap<String, (Schedule, CancellationToken)>,
    rows: Vec<crate::types::ScheduleInfo>,
    how: StoredCron,
    start: bool,
) {
    let active: HashMap<String, Schedule> = rows
        .into_iter()
        .filter(|row| !row.paused)
        .map(|row| (row.schedule.name.clone(), row.schedule))
        .collect();
    running.retain(|name, (schedule, token)| {
        let same = active.get(name) == Some(schedule);
        if !same {
            token.cancel();
        }
        same
    });
    for (name, schedule) in active {
        if running.contains_key(&name) {
            continue;
        }
        let entry = match CronSpec::stored(&schedule).parse(how.clock, how.catch_up) {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(
                    schedule = %name,
                    error = &error as &dyn std::error::Error,
                    "a stored cron schedule does not parse; it is left out"
                );
                continue;
            }
        };
        let token = stop.child_token();
        let span = tracing::info_span!("jobq.cron", job.name = %name);
        tokio::spawn(tracing::Instrument::instrument(
            cron_loop(jobq.clone(), entry, token.clone(), start),
            span,
        ));
        running.insert(name, (schedule, token));
    }
}

/// Enqueues, oldest first, the ticks of `entry` that passed since the last
/// one recorded and within `window` of now — at most [`MAX_CATCH_UP`], the
/// latest — each with its own key (a tick another process enqueued is a
/// duplicate), then records the last. With no tick recorded (the
/// schedule's first start with a catch-up) nothing is owed: now is
/// recorded. A read that fails is logged and the loop goes on without
/// catching up. `false` if stopped meanwhile.
async fn catch_up(
    jobq: &Jobq,
    entry: &CronEntry,
    window: Duration,
    stop: &CancellationToken,
) -> bool {
    let now = entry.now();
    let last = tokio::select! {
        biased;
        () = stop.cancelled() => return false,
        last = jobq.store().last_tick(entry.name()) => last,
    };
    let last = match last {
        Ok(last) => last,
        Err(error) => {
            tracing::warn!(
                job.name = entry.name(),
                error = &error as &dyn std::error::Error,
                "reading a cron schedule's last tick failed; the ticks it missed are not caught up"
            );
            return true;
        }
    };
    let Some(last) = last else {
        return record_tick(jobq, entry, now, stop).await;
    };
    let window = TimeDelta::from_std(window).unwrap_or(TimeDelta::MAX);
    let mut from = last.max(now.checked_sub_signed(window).unwrap_or(last));
    let mut missed = std::collections::VecDeque::new();
    while let Ok(tick) = entry.next_tick(from) {
        if tick > now {
            break;
        }
        if missed.len() == MAX_CATCH_UP {
            missed.pop_front();
        }
        missed.push_back(tick);
        from = tick;
    }
    let Some(&latest) = missed.back() else {
        return true;
    };
    tracing::info!(
        job.name = entry.name(),
        ticks = missed.len(),
        since = %last,
        "catching up the cron ticks missed while no worker ran"
    );
    for tick in missed {
        if !enqueue_tick(jobq, entry, tick, stop).await {
            return false;
        }
    }
    record_tick(jobq, entry, latest, stop).await
}

/// Records `tick` as `entry`'s last tick enqueued; a failure is logged (the
/// next tick records again). `false` if stopped meanwhile.
async fn record_tick(
    jobq: &Jobq,
    entry: &CronEntry,
    tick: DateTime<Utc>,
    stop: &CancellationToken,
) -> bool {
    let recorded = tokio::select! {
        biased;
        () = stop.cancelled() => return false,
        recorded = jobq.store().record_tick(entry.name(), tick) => recorded,
    };
    if let Err(error) = recorded {
        tracing::warn!(
            job.name = entry.name(),
            %tick,
            error = &error as &dyn std::error::Error,
            "recording a cron tick failed; a later tick records again"
        );
    }
    true
}

/// Enqueues the row of `tick`, retrying until it is stored or the next tick
/// is due; `false` if stopped meanwhile.
async fn enqueue_tick(
    jobq: &Jobq,
    entry: &CronEntry,
    tick: DateTime<Utc>,
    stop: &CancellationToken,
) -> bool {
    let key = tick_key(entry.name(), tick);
    let next = entry.next_tick(tick).ok();
    let mut pause = RETRY_PAUSE;
    loop {
        let enqueue = (entry.spec.enqueue)(jobq.clone(), key.clone());
        let enqueued = tokio::select! {
            biased;
            () = stop.cancelled() => return false,
            enqueued = enqueue => enqueued,
        };
        match enqueued {
            Ok(None) => {
                tracing::debug!(
                    job.name = entry.name(),
                    %tick,
                    "the stored schedule changed, paused or was removed before its tick; not enqueued"
                );
                return true;
            }
            Ok(Some(enqueued)) => {
                tracing::debug!(
                    job.name = entry.name(),
                    %tick,
                    id = enqueued.id,
                    duplicate = enqueued.duplicate,
                    "cron tick enqueued"
                );
                return true;
            }
            Err(error) => {
                let give_up = next.is_none_or(|next| next <= entry.now() + pause);
                tracing::warn!(
                    job.name = entry.name(),
                    %tick,
                    error = &error as &dyn std::error::Error,
                    give_up,
                    "enqueueing a cron tick failed"
                );
                if give_up {
                    return true;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_RETRY_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(instant: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(instant)
            .unwrap()
            .with_timezone(&Utc)
    }

    /// The first `n` ticks of `schedule` read in `zone` after `after`, in UTC.
    fn ticks(schedule: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
        let cron = Cron::from_str(schedule).unwrap();
        let zone = Tz::from_str(zone).unwrap();
        let mut after = at(after);
        (0..n)
            .map(|_| {
                after = next_tick(&cron, zone, after).unwrap();
                after.to_rfc3339_opts(SecondsFormat::Secs, true)
            })
            .collect()
    }

    #[test]
    fn a_schedule_in_a_zone_ticks_at_its_wall_clock_summer_and_winter() {
        // 03:00 in Paris: 01:00Z in summer (CEST), 02:00Z in winter (CET).
        assert_eq!(
            ticks("0 3 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"]
        );
        assert_eq!(
            ticks("0 3 * * *", "Europe/Paris", "2026-07-01T12:00:00Z", 1),
            ["2026-07-02T01:00:00Z"]
        );
    }

    #[test]
    fn a_fixed_time_a_spring_forward_skips_runs_right_after_the_gap() {
        // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00Z).
        assert_eq!(
            ticks("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T07:00:00Z",
                "2026-03-09T06:30:00Z",
                "2026-03-10T06:30:00Z"
            ]
        );
        // Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00Z).
        assert_eq!(
            ticks("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
        );
    }

    #[test]
    fn a_fixed_time_a_fall_back_repeats_runs_once() {
        // New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00Z), so
        // 01:30 is 05:30Z and again 06:30Z.
        assert_eq!(
            ticks("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
        );
        // Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00Z).
        assert_eq!(
            ticks("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
    }

    #[test]
    fn a_process_started_in_the_repeated_hour_does_not_run_its_fixed_time_again() {
        // 01:10 EST, the second pass of the hour: 01:30 ran at 05:30Z.
        assert_eq!(
            ticks("30 1 * * *", "America/New_York", "2026-11-01T06:10:00Z", 1),
            ["2026-11-02T06:30:00Z"]
        );
    }

    #[test]
    fn an_interval_runs_at_each_wall_clock_time_none_in_the_gap_twice_in_the_repeat() {
        assert_eq!(
            ticks(
                "*/30 * * * *",
                "America/New_York",
                "2026-03-08T06:45:00Z",
                2
            ),
            ["2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"]
        );
        // From 01:05 EDT, in the first pass: 01:30 EDT, then 01:00 EST.
        assert_eq!(
            ticks(
                "*/30 * * * *",
                "America/New_York",
                "2026-11-01T05:05:00Z",
                2
            ),
            ["2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z"]
        );
        assert_eq!(
            ticks(
                "*/30 * * * *",
                "America/New_York",
                "2026-11-01T04:45:00Z",
                5
            ),
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T05:30:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T06:30:00Z",
                "2026-11-01T07:00:00Z"
            ]
        );
    }

    #[test]
    fn a_ticks_key_names_the_job_and_the_second() {
        let tick = DateTime::parse_from_rfc3339("2026-11-30T07:45:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            tick_key("nightly_report", tick),
            "cron:nightly_report:2026-11-30T07:45:00Z"
        );
    }

    /// The daylight saving rules, against an oracle that walks the minutes
    /// one by one: a minute is a tick if its wall time matches and it is
    /// that wall time's first instant (or, for an interval, any of them), or
    /// if a fixed time's wall time was skipped by the jump that ends at it.
    /// Every `after` within three hours of each of 2026's transitions in
    /// zones with a one-hour and a half-hour shift.
    #[test]
    fn ticks_across_every_transition_match_a_minute_by_minute_walk() {
        let schedules = [
            "*/15 * * * *",
            "30 2 * * *",
            "0 1 * * *",
            "0 */2 * * *",
            "45 1 * * *",
            "15 2 * * SUN",
        ];
        let minute = TimeDelta::minutes(1);
        let wall_of = |zone: Tz, t: DateTime<Utc>| t.with_timezone(&zone).naive_local();
        for zone in ["America/New_York", "Europe/Paris", "Australia/Lord_Howe"] {
            let zone = Tz::from_str(zone).unwrap();
            let offset = |t: DateTime<Utc>| wall_of(zone, t) - t.naive_utc();
            let mut transitions = Vec::new();
            let mut t = at("2026-01-01T00:00:00Z");
            while t < at("2027-01-01T00:00:00Z") {
                if offset(t) != offset(t + TimeDelta::minutes(15)) {
                    let mut m = t;
                    while offset(m) == offset(t) {
                        m += minute;
                    }
                    transitions.push(m);
                }
                t += TimeDelta::minutes(15);
            }
            assert_eq!(transitions.len(), 2, "{zone}: {transitions:?}");
            for schedule in schedules {
                let cron = Cron::from_str(schedule).unwrap();
                let fixed = cron.determine_job_type() == JobType::FixedTime;
                let matches =
                    |wall: chrono::NaiveDateTime| cron.is_time_matching(&wall.and_utc()).unwrap();
                let oracle = |after: DateTime<Utc>| {
                    let mut t =
                        chrono::DurationRound::duration_trunc(after, minute).unwrap() + minute;
                    loop {
                        let wall = wall_of(zone, t);
                        let earliest = match zone.from_local_datetime(&wall) {
                            LocalResult::Ambiguous(early, _) => early.with_timezone(&Utc) == t,
                            _ => true,
                        };
                        if matches(wall) && (earliest || !fixed) {
                            return t;
                        }
                        let before = wall_of(zone, t - minute) + minute;
                        if fixed && before < wall {
                            let mut skipped = before;
                            while skipped < wall {
                                if matches(skipped) {
                                    return t;
                                }
                                skipped += minute;
                            }
                        }
                        t += minute;
                    }
                };
                for transition in &transitions {
                    let mut after = *transition - TimeDelta::hours(3);
                    while after < *transition + TimeDelta::hours(3) {
                        let expected = oracle(after);
                        let got = next_tick(&cron, zone, after).unwrap();
                        assert_eq!(got, expected, "{schedule} in {zone} after {after}");
                        after += TimeDelta::minutes(7);
                    }
                }
            }
        }
    }
}
