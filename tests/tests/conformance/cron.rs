//! Cron: each tick enqueued and run once, however many workers schedule it.

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

conformance!(a_cron_job_runs_once_per_tick_however_many_workers_schedule_it,);
