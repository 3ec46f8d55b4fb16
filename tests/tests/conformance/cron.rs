//! Cron: each tick enqueued and run once, however many workers schedule it.

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use jobq_runtime::Schedule;

use super::*;

/// A job scheduled every second; records the tick it was enqueued for.
#[job(name = "conf_cron_tick", queue = "conf_cron")]
async fn cron_tick(ctx: JobContext, recorder: State<Recorder>, keys: State<KeyLog>) {
    recorder.record(ctx.id(), ctx.attempt());
    keys.note(&ctx);
}

/// Two workers (two processes' worth: each its own pool) schedule the same
/// job every second; each tick is enqueued once and runs once, and no tick
/// between the first and the last is missed.
async fn a_cron_job_runs_once_per_tick_however_many_workers_schedule_it(db: TestDb) {
    let keys = KeyLog::default();
    let recorder = Recorder::default();
    let started = chrono::Utc::now();
    // The ticks of this test's rows, in the order they ran (the queue may
    // hold rows an earlier, interrupted run left; their ticks are older).
    let ticks = || -> Vec<chrono::DateTime<chrono::Utc>> {
        keys.seen()
            .iter()
            .map(|key| {
                let at = key
                    .strip_prefix("cron:conf_cron_tick:")
                    .unwrap_or_else(|| panic!("the key names the job and the tick: {key}"));
                chrono::DateTime::parse_from_rfc3339(at)
                    .unwrap()
                    .with_timezone(&chrono::Utc)
            })
            .filter(|tick| *tick > started)
            .collect()
    };
    let mut handles = Vec::new();
    for _ in 0..2 {
        let jobq = db.jobq().await;
        handles.push(
            Worker::builder(jobq)
                .queue("conf_cron", 2)
                .state(recorder.clone())
                .state(keys.clone())
                .poll_interval(Duration::from_millis(50))
                .cron("* * * * * *", CronTick::new())
                .build()
                .unwrap()
                .start(),
        );
    }
    wait_until("four ticks ran", LONG, || async { ticks().len() >= 4 }).await;
    for handle in handles {
        stop(handle).await;
    }
    let ran = ticks();
    let mut distinct = ran.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ran.len(), "a tick ran twice: {ran:?}");
    for pair in distinct.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            chrono::Duration::seconds(1),
            "ticks one second apart, none missed: {distinct:?}"
        );
    }
    assert!(recorder.repeated().is_empty(), "no job ran twice");
}

/// A fixed-time job in New York, run by a clock set just before a change
/// of daylight saving time.
#[job(name = "conf_cron_fixed", queue = "conf_cron_tz")]
async fn cron_fixed(ctx: JobContext, keys: State<KeyLog>) {
    keys.note(&ctx);
}

/// An interval job (two hours given) in New York, beside [`CronFixed`].
#[job(name = "conf_cron_interval", queue = "conf_cron_tz")]
async fn cron_interval(ctx: JobContext, keys: State<KeyLog>) {
    keys.note(&ctx);
}

/// New York's changes of daylight saving time in `year`: the spring-forward
/// (02:00 EST becomes 03:00 EDT) and the fall-back (02:00 EDT becomes
/// 01:00 EST), as instants.
fn new_york_changes(year: i32) -> (DateTime<Utc>, DateTime<Utc>) {
    let zone = chrono_tz::America::New_York;
    let offset = |t: DateTime<Utc>| t.with_timezone(&zone).naive_local() - t.naive_utc();
    let mut changes = Vec::new();
    let mut t = Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap();
    while t.year() == year {
        let next = t + chrono::TimeDelta::hours(1);
        if offset(t) != offset(next) {
            changes.push(next);
        }
        t = next;
    }
    (changes[0], changes[1])
}

/// A worker whose cron clock reads `now`, scheduling [`CronFixed`] at
/// `fixed` and [`CronInterval`] at `interval`, both in New York; the keys
/// of the rows that ran.
async fn new_york_worker(
    db: &TestDb,
    now: DateTime<Utc>,
    fixed: &str,
    interval: &str,
) -> (jobq_runtime::WorkerHandle, KeyLog) {
    let keys = KeyLog::default();
    let handle = Worker::builder(db.jobq().await)
        .queue("conf_cron_tz", 2)
        .state(keys.clone())
        .poll_interval(Duration::from_millis(50))
        .cron_clock(now)
        .cron_in("America/New_York", fixed, CronFixed::new())
        .cron_in("America/New_York", interval, CronInterval::new())
        .build()
        .unwrap()
        .start();
    (handle, keys)
}

/// Schedules read in a time zone run at its wall-clock times across both
/// changes of daylight saving time, each tick once (a clock set two seconds
/// before, in a year drawn at random so that no earlier run's rows match):
/// at the spring-forward a fixed 02:30 runs at 03:00 EDT, the first time
/// after the gap; in the repeated hour of the fall-back a fixed 01:30 does
/// not run again, while a schedule with two hours runs at 01:30 EST too.
async fn a_cron_schedule_in_a_time_zone_follows_its_clock_across_both_changes(db: TestDb) {
    let year = rand::random_range(2030..2090);
    let (spring, fall) = new_york_changes(year);
    let key = |job: &str, tick: DateTime<Utc>| {
        format!(
            "cron:{job}:{}",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    };
    // Spring: 06:59:58Z is 01:59:58 EST; 02:30 does not exist that day.
    let (handle, keys) = new_york_worker(
        &db,
        spring - chrono::TimeDelta::seconds(2),
        "30 2 * * *",
        "0 0 1 1 *",
    )
    .await;
    let expected = key("conf_cron_fixed", spring);
    wait_until(
        "the fixed time skipped by the gap runs after it",
        LONG,
        || async { keys.seen().contains(&expected) },
    )
    .await;
    stop(handle).await;
    assert_eq!(keys.seen(), [expected], "once, at the end of the gap");

    // Fall: an hour after the change is 01:29:58 EST, the second pass of
    // 01:30, whose first (EDT) was an hour earlier.
    let second = fall + chrono::TimeDelta::minutes(30);
    let (handle, keys) = new_york_worker(
        &db,
        second - chrono::TimeDelta::seconds(2),
        "30 1 * * *",
        "30 0,1 * * *",
    )
    .await;
    let expected = key("conf_cron_interval", second);
    wait_until("the interval's second 01:30 runs", LONG, || async {
        keys.seen().contains(&expected)
    })
    .await;
    stop(handle).await;
    assert_eq!(
        keys.seen(),
        [expected],
        "the fixed 01:30 ran at its first occurrence only (not in this run)"
    );
}

/// An hourly job of a worker that catches up.
#[job(name = "conf_cron_hourly", queue = "conf_cron_up")]
async fn cron_hourly(ctx: JobContext, keys: State<KeyLog>) {
    keys.note(&ctx);
}

/// A job every minute of a worker that catches up.
#[job(name = "conf_cron_minutely", queue = "conf_cron_up")]
async fn cron_minutely(ctx: JobContext, keys: State<KeyLog>) {
    keys.note(&ctx);
}

/// A worker that catches up `window`, its cron clock reading `now`, with
/// [`CronHourly`] and [`CronMinutely`] scheduled; the keys of the rows that
/// ran.
async fn catching_up_worker(
    db: &TestDb,
    now: DateTime<Utc>,
    window: Duration,
) -> (jobq_runtime::WorkerHandle, KeyLog) {
    let keys = KeyLog::default();
    let handle = Worker::builder(db.jobq().await)
        .queue("conf_cron_up", 4)
        .state(keys.clone())
        .poll_interval(Duration::from_millis(50))
        .cron_clock(now)
        .cron_catch_up(window)
        .cron("0 * * * *", CronHourly::new())
        .cron("* * * * *", CronMinutely::new())
        .build()
        .unwrap()
        .start();
    (handle, keys)
}

/// Ticks missed while no worker ran are enqueued by the next worker that
/// catches up — those within its window, at most 100 per schedule (the
/// latest), each once — and a schedule's first start owes nothing (clocks
/// set in a year drawn at random, so that no earlier run's rows match).
async fn a_worker_that_catches_up_enqueues_the_ticks_missed_within_its_window(db: TestDb) {
    let year = rand::random_range(2030..2090);
    let key = |job: &str, h: u32, m: u32| {
        let tick = Utc.with_ymd_and_hms(year, 6, 1, h, m, 0).unwrap();
        format!(
            "cron:{job}:{}",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    };
    let at = |h, m, s| Utc.with_ymd_and_hms(year, 6, 1, h, m, s).unwrap();
    // First start, two seconds before 11:00: nothing owed, then 11:00 runs.
    let hour = Duration::from_secs(3600);
    let (handle, keys) = catching_up_worker(&db, at(10, 59, 58), 3 * hour).await;
    let first = [
        key("conf_cron_hourly", 11, 0),
        key("conf_cron_minutely", 11, 0),
    ];
    wait_until("the 11:00 ticks run", LONG, || async {
        first.iter().all(|k| keys.seen().contains(k))
    })
    .await;
    stop(handle).await;
    let mut seen = keys.seen();
    seen.sort();
    let mut expected = first.to_vec();
    expected.sort();
    assert_eq!(seen, expected, "a first start catches up nothing");

    // Nobody ran from 11:00 to 15:30; a window of three hours: the hourly
    // 13:00, 14:00, 15:00 (12:00 is older), the latest 100 minutes.
    let (handle, keys) = catching_up_worker(&db, at(15, 30, 0), 3 * hour).await;
    let mut expected: Vec<String> = [13, 14, 15]
        .into_iter()
        .map(|h| key("conf_cron_hourly", h, 0))
        .collect();
    let mut minute = at(15, 30, 0) - chrono::TimeDelta::minutes(99);
    while minute <= at(15, 30, 0) {
        expected.push(key("conf_cron_minutely", minute.hour(), minute.minute()));
        minute += chrono::TimeDelta::minutes(1);
    }
    expected.sort();
    wait_until("the missed ticks run", LONG, || async {
        keys.seen().len() >= expected.len()
    })
    .await;
    stop(handle).await;
    let mut seen = keys.seen();
    seen.sort();
    assert_eq!(seen, expected);
}

/// The ticks a stored schedule enqueued: each row's key and payload.
#[derive(Clone, Default)]
struct Ticks(Arc<Mutex<Vec<(String, u64)>>>);

impl Ticks {
    fn seen(&self) -> Vec<(String, u64)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The job of the stored schedules; records its key and `n`.
#[job(name = "conf_cron_stored", queue = "conf_cron_db")]
async fn cron_stored(ctx: JobContext, ticks: State<Ticks>, n: u64) {
    ticks
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((ctx.idempotency_key(), n));
}

/// The instant of a tick's key.
fn tick_of(key: &str) -> DateTime<Utc> {
    let instant = key.splitn(3, ':').nth(2).expect("cron:{name}:{tick}");
    DateTime::parse_from_rfc3339(instant)
        .unwrap_or_else(|e| panic!("{key}: {e}"))
        .with_timezone(&Utc)
}

/// A schedule kept in the database runs on every worker without a restart,
/// each tick once however many processes run it; a change takes effect at
/// the next tick; a pause stops it and a resume restarts it; a removal ends
/// it; a schedule that cannot run is refused with what is wrong.
async fn a_schedule_kept_in_the_database_is_managed_while_workers_run(db: TestDb) {
    // A database of its own: every worker runs every stored schedule, and
    // other tests' workers run theirs by clocks set in other years.
    let scratch = db.scratch("cron_db").await;
    let jobq = scratch.jobq(8).await;
    jobq.migrate().await.unwrap();
    let name = jobq_tests::unique_queue("stored");
    let ticks = Ticks::default();
    let mut handles = Vec::new();
    for _ in 0..2 {
        handles.push(
            Worker::builder(scratch.jobq(8).await)
                .queue("conf_cron_db", 2)
                .state(ticks.clone())
                .poll_interval(Duration::from_millis(50))
                .build()
                .unwrap()
                .start(),
        );
    }
    let every_second =
        Schedule::new(&name, "conf_cron_stored", "* * * * * *").payload(r#"{"n":1}"#);
    jobq.put_schedule(every_second).await.unwrap();
    let count = |n: u64| ticks.seen().iter().filter(|t| t.1 == n).count();
    wait_until("three ticks of the stored schedule", LONG, || async {
        count(1) >= 3
    })
    .await;

    // Changed: every two seconds, with n = 2. Each tick's row is read when
    // the tick is due, so the old schedule has no tick after the change
    // returned, whenever the workers hear of it.
    let every_two = Schedule::new(&name, "conf_cron_stored", "*/2 * * * * *").payload(r#"{"n":2}"#);
    jobq.put_schedule(every_two.clone()).await.unwrap();
    let changed_at = Utc::now();
    wait_until("two ticks of the changed schedule", LONG, || async {
        count(2) >= 2
    })
    .await;
    let stored = jobq.schedules().await.unwrap();
    let mine: Vec<_> = stored.iter().filter(|s| s.schedule.name == name).collect();
    assert_eq!(mine.len(), 1, "{stored:?}");
    assert_eq!((&mine[0].schedule, mine[0].paused), (&every_two, false));

    // Paused: nothing more until resumed.
    assert!(jobq.pause_schedule(&name).await.unwrap());
    let paused_at = Utc::now();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late: Vec<_> = ticks
        .seen()
        .into_iter()
        .filter(|(key, _)| tick_of(key) > paused_at)
        .collect();
    assert_eq!(late, [], "no tick while paused");
    assert!(
        jobq.schedules()
            .await
            .unwrap()
            .iter()
            .any(|s| s.schedule.name == name && s.paused)
    );
    let before = count(2);
    assert!(jobq.resume_schedule(&name).await.unwrap());
    wait_until("a tick after the resume", LONG, || async {
        count(2) > before
    })
    .await;

    // Removed: no tick after it.
    assert!(jobq.remove_schedule(&name).await.unwrap());
    let removed_at = Utc::now();
    assert!(!jobq.remove_schedule(&name).await.unwrap(), "gone");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for handle in handles {
        stop(handle).await;
    }
    let seen = ticks.seen();
    let mut keys: Vec<&String> = seen.iter().map(|(key, _)| key).collect();
    let all = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), all, "each tick once: {seen:?}");
    for (key, n) in &seen {
        let tick = tick_of(key);
        assert!(tick <= removed_at, "{key} after the removal");
        if *n == 2 {
            assert_eq!(
                tick.timestamp() % 2,
                0,
                "{key}: the changed schedule's ticks are even seconds"
            );
        } else {
            assert!(
                tick <= changed_at,
                "{key}: the old schedule after the change"
            );
        }
    }

    // Refused, with what is wrong.
    for (schedule, wrong) in [
        (
            Schedule::new(&name, "conf_cron_stored", "every tuesday"),
            "the cron expression `every tuesday` does not parse",
        ),
        (
            Schedule::new(&name, "conf_cron_stored", "@daily").time_zone("Mars/Olympus"),
            "`Mars/Olympus` is not an IANA time zone",
        ),
        (
            Schedule::new(&name, "conf_cron_stored", "@daily").payload("[1]"),
            "its payload is not a JSON object",
        ),
        (Schedule::new("", "conf_cron_stored", "@daily"), "its name"),
    ] {
        let error = jobq.put_schedule(schedule).await.unwrap_err().to_string();
        assert!(error.contains(wrong), "{error}");
    }
    assert!(
        !jobq
            .schedules()
            .await
            .unwrap()
            .iter()
            .any(|s| s.schedule.name == name)
    );
}

/// A stored schedule changed where no worker hears of it (by hand, or by
/// a process whose announcement is lost) has no tick after the change:
/// each tick reads the schedule's row when it is due. Put back as it was,
/// it ticks again on the same workers.
async fn a_stored_schedule_changed_unannounced_has_no_tick_after_the_change(db: TestDb) {
    let scratch = db.scratch("cron_quiet").await;
    let jobq = scratch.jobq(8).await;
    jobq.migrate().await.unwrap();
    let name = jobq_tests::unique_queue("quiet");
    let ticks = Ticks::default();
    let handle = Worker::builder(scratch.jobq(8).await)
        .queue("conf_cron_db", 2)
        .state(ticks.clone())
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap()
        .start();
    let every_second =
        Schedule::new(&name, "conf_cron_stored", "* * * * * *").payload(r#"{"n":3}"#);
    jobq.put_schedule(every_second.clone()).await.unwrap();
    let count = || ticks.seen().len();
    wait_until("two ticks of the stored schedule", LONG, || async {
        count() >= 2
    })
    .await;

    // The worker reads the stored schedules again only after a minute.
    let changed = jobq_tests::sql::Db::of(&jobq)
        .execute(
            "UPDATE jobq_schedules SET schedule = ? WHERE name = ?",
            &["0 0 1 1 *".into(), name.as_str().into()],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
    let changed_at = Utc::now();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late: Vec<_> = ticks
        .seen()
        .into_iter()
        .filter(|(key, _)| tick_of(key) > changed_at)
        .collect();
    assert_eq!(late, [], "no tick of the old schedule after the change");

    let before = count();
    jobq.put_schedule(every_second).await.unwrap();
    wait_until("a tick after the schedule is put back", LONG, || async {
        count() > before
    })
    .await;
    stop(handle).await;
}

/// A schedule kept in the database catches up as one declared in code
/// does, on a worker that catches up: its first start owes nothing; the
/// ticks missed while no worker ran within the window are enqueued at the
/// next start, each once (in a database of the test's own: every worker
/// runs every stored schedule; the clocks in a year drawn at random).
async fn a_stored_schedule_catches_up_the_ticks_missed_while_no_worker_ran(db: TestDb) {
    let scratch = db.scratch("cron_up").await;
    let jobq = scratch.jobq(8).await;
    jobq.migrate().await.unwrap();
    let year = rand::random_range(2030..2090);
    let at = |h, m, s| Utc.with_ymd_and_hms(year, 6, 1, h, m, s).unwrap();
    let every_ten =
        Schedule::new("every-ten", "conf_cron_stored", "*/10 * * * *").payload(r#"{"n":7}"#);
    jobq.put_schedule(every_ten).await.unwrap();
    let ticks = Ticks::default();
    let start = |now: DateTime<Utc>| {
        Worker::builder(jobq.clone())
            .queue("conf_cron_db", 2)
            .state(ticks.clone())
            .poll_interval(Duration::from_millis(50))
            .cron_clock(now)
            .cron_catch_up(Duration::from_secs(3600))
            .build()
            .unwrap()
            .start()
    };
    let seen = || {
        let mut seen: Vec<DateTime<Utc>> = ticks
            .seen()
            .iter()
            .filter(|(_, n)| *n == 7)
            .map(|(key, _)| tick_of(key))
            .collect();
        seen.sort();
        seen
    };
    // First start, two seconds before 11:00: nothing owed, then 11:00.
    let handle = start(at(10, 59, 58));
    wait_until("the 11:00 tick", LONG, || async { !seen().is_empty() }).await;
    stop(handle).await;
    assert_eq!(seen(), [at(11, 0, 0)], "a first start catches up nothing");
    // Nobody ran from 11:00 to 13:35; an hour's window: 12:40 to 13:30.
    let handle = start(at(13, 35, 0));
    let expected: Vec<DateTime<Utc>> = std::iter::once(at(11, 0, 0))
        .chain(
            [(12, 40), (12, 50), (13, 0), (13, 10), (13, 20), (13, 30)].map(|(h, m)| at(h, m, 0)),
        )
        .collect();
    wait_until("the missed ticks run", LONG, || async {
        seen().len() >= expected.len()
    })
    .await;
    stop(handle).await;
    assert_eq!(seen(), expected);
}

conformance!(
    a_stored_schedule_catches_up_the_ticks_missed_while_no_worker_ran,
    a_cron_job_runs_once_per_tick_however_many_workers_schedule_it,
    a_cron_schedule_in_a_time_zone_follows_its_clock_across_both_changes,
    a_worker_that_catches_up_enqueues_the_ticks_missed_within_its_window,
    a_schedule_kept_in_the_database_is_managed_while_workers_run,
    a_stored_schedule_changed_unannounced_has_no_tick_after_the_change,
);
