//! The `jobq` binary against every backend: every command, its output
//! (text and `--json`) and its exit status.

use std::process::{Command, Output};

use jobq_runtime::{JobStatus, job};
use jobq_tests::{TestDb, unique_queue};
use serde_json::Value;

#[job(name = "cli_probe")]
async fn probe(n: u64) {
    let _ = n;
}

fn jobq_cli(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jobq"))
        .arg("--url")
        .arg(url)
        .args(args)
        .output()
        .expect("the jobq binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs a command that must succeed; its stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let output = jobq_cli(url, args);
    assert!(output.status.success(), "jobq {args:?}: {output:?}");
    stdout(&output)
}

/// Runs a `--json` command that must succeed; its document.
fn json(url: &str, args: &[&str]) -> Value {
    let text = ok(url, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("jobq {args:?}: {e}: {text}"))
}

/// The id `enqueue` printed.
fn enqueued_id(text: &str) -> i64 {
    text.strip_prefix("job ")
        .and_then(|t| t.split_whitespace().next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no id in {text:?}"))
}

async fn every_command_does_what_it_says_and_exits_accordingly(db: TestDb) {
    let url = db.url().to_owned();
    ok(&url, &["migrate"]);
    let jobq = db.jobq().await;
    let queue = unique_queue("cli");
    let q = queue.as_str();

    // enqueue: by name with JSON; a key stores once; bad JSON stores nothing.
    let a = enqueued_id(&ok(
        &url,
        &["enqueue", "cli_probe", r#"{"n":1}"#, "--queue", q],
    ));
    let b = enqueued_id(&ok(
        &url,
        &[
            "enqueue",
            "cli_probe",
            r#"{"n":2}"#,
            "--queue",
            q,
            "--key",
            &format!("{q}:b"),
            "--priority",
            "-3",
        ],
    ));
    let again = ok(
        &url,
        &[
            "enqueue",
            "cli_probe",
            r#"{"n":2}"#,
            "--queue",
            q,
            "--key",
            &format!("{q}:b"),
        ],
    );
    assert!(
        again.contains(&format!("job {b} already stored")),
        "{again}"
    );
    let bad = jobq_cli(&url, &["enqueue", "cli_probe", "{not json", "--queue", q]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not valid JSON"),
        "{bad:?}"
    );
    let stored = jobq.job(b).await.unwrap().unwrap();
    assert_eq!(
        (stored.priority, stored.payload.as_str()),
        (-3, r#"{"n":2}"#)
    );

    // counts, text and JSON.
    assert!(ok(&url, &["counts", q]).contains("pending 2\n"));
    assert_eq!(json(&url, &["counts", q, "--json"])["pending"], 2);

    // list: newest first, a page at a time, the cursor printed.
    let first = ok(&url, &["list", "--queue", q, "--limit", "1"]);
    let ids: Vec<String> = first
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("more:"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(ids, [b.to_string()], "{first}");
    let cursor = first
        .lines()
        .find_map(|l| l.strip_prefix("more: --after "))
        .unwrap_or_else(|| panic!("no cursor: {first}"));
    let second = json(
        &url,
        &[
            "list", "--queue", q, "--limit", "1", "--after", cursor, "--json",
        ],
    );
    assert_eq!(second["jobs"][0]["id"], a, "{second}");
    let oldest = json(&url, &["list", "--queue", q, "--oldest-first", "--json"]);
    assert_eq!(oldest["jobs"][0]["id"], a);
    assert_eq!(oldest["jobs"][0]["payload"]["n"], 1, "the payload as JSON");
    assert!(ok(&url, &["list", "--queue", q, "--status", "failed"]).contains("no jobs match"));

    // show: the payload pretty-printed.
    let text = ok(&url, &["show", &a.to_string()]);
    assert!(
        text.contains("job cli_probe\n") && text.contains("status pending\n"),
        "{text}"
    );
    assert!(text.contains("payload\n  {\n    \"n\": 1\n  }\n"), "{text}");
    assert_eq!(
        json(&url, &["show", &a.to_string(), "--json"])["status"],
        "pending"
    );

    // cancel / retry by id.
    ok(&url, &["cancel", &a.to_string()]);
    assert_eq!(
        jobq.job(a).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
    let twice = jobq_cli(&url, &["cancel", &a.to_string()]);
    assert_eq!(
        twice.status.code(),
        Some(2),
        "cancelling twice does not apply"
    );
    ok(&url, &["retry", &a.to_string()]);
    assert_eq!(
        jobq.job(a).await.unwrap().unwrap().status,
        JobStatus::Pending
    );

    // cancel / retry by filter: counted, confirmed (off a terminal: only with --yes).
    let unconfirmed = jobq_cli(&url, &["cancel", "--queue", q]);
    assert_eq!(unconfirmed.status.code(), Some(2), "{unconfirmed:?}");
    let said = String::from_utf8_lossy(&unconfirmed.stderr);
    assert!(
        said.contains("cancel 2 pending or processing jobs?") && said.contains("--yes"),
        "{said}"
    );
    assert_eq!(jobq.counts(q).await.unwrap().pending, 2, "nothing changed");
    assert!(ok(&url, &["cancel", "--queue", q, "--yes"]).contains("2 jobs cancelled"));
    let wrong = jobq_cli(
        &url,
        &["retry", "--queue", q, "--status", "pending", "--yes"],
    );
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert!(
        ok(
            &url,
            &["retry", "--queue", q, "--name", "cli_probe", "--yes"]
        )
        .contains("2 jobs pending again")
    );
    let none = jobq_cli(&url, &["retry", "--queue", q, "--yes"]);
    assert_eq!(none.status.code(), Some(2), "{none:?}");
    assert!(String::from_utf8_lossy(&none.stderr).contains("no failed or cancelled jobs match"));

    // pause / resume, seen by stats.
    assert!(ok(&url, &["pause", q]).contains("is paused"));
    assert!(ok(&url, &["pause", q]).contains("paused already"));
    let stats = json(&url, &["stats", "--json"]);
    let row = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["queue"] == q)
        .unwrap_or_else(|| panic!("{q} not in {stats}"))
        .clone();
    assert_eq!(
        (row["paused"].clone(), row["available"].clone()),
        (Value::Bool(true), Value::from(2))
    );
    let table = ok(&url, &["stats"]);
    assert!(
        table.starts_with("QUEUE")
            && table
                .lines()
                .any(|l| l.starts_with(q) && l.contains("paused")),
        "{table}"
    );
    assert!(ok(&url, &["resume", q]).contains("is resumed"));
    assert!(ok(&url, &["resume", q]).contains("was not paused"));

    // workflow: each job's status and what it waits on (text and JSON);
    // --cancel cancels what has not ended; an unknown id exits 2.
    let flow_id = format!("{q}-flow");
    let mut flow = jobq_runtime::Workflow::new(&flow_id);
    flow.add_with("first", Probe::new(1), jobq_tests::on(q));
    flow.add_with("second", Probe::new(2), jobq_tests::on(q))
        .after(["first"]);
    jobq.enqueue_workflow(flow).await.unwrap();
    let shown = json(&url, &["workflow", &flow_id, "--json"]);
    assert_eq!(
        shown["jobs"][1]["status"],
        Value::from("blocked"),
        "{shown}"
    );
    assert_eq!(shown["jobs"][1]["waiting_on"], serde_json::json!(["first"]));
    let table = ok(&url, &["workflow", &flow_id]);
    assert!(
        table.starts_with(&format!("workflow {flow_id}: running"))
            && table
                .lines()
                .any(|l| l.starts_with("second") && l.contains("blocked") && l.contains("first")),
        "{table}"
    );
    let cancelled = ok(&url, &["workflow", &flow_id, "--cancel"]);
    assert!(cancelled.contains("cancelled 2 job(s)"), "{cancelled}");
    let none = jobq_cli(&url, &["workflow", "no-such-workflow"]);
    assert_eq!(none.status.code(), Some(2), "{none:?}");

    // batch: its state and callbacks (text and JSON); --close closes it,
    // --cancel cancels what has not ended; an unknown id exits 2.
    let batch_id = format!("{q}-batch");
    let mut batch = jobq_runtime::Batch::new(&batch_id);
    batch.add_with(Probe::new(3), jobq_tests::on(q));
    batch.on_with(
        jobq_runtime::BatchCallback::Finish,
        Probe::new(4),
        jobq_tests::on(q),
    );
    batch.keep_open();
    jobq.enqueue_batch(batch).await.unwrap();
    let shown = json(&url, &["batch", &batch_id, "--json"]);
    assert_eq!(shown["state"], Value::from("open"), "{shown}");
    assert_eq!(
        shown["callbacks"][0]["when"],
        Value::from("finish"),
        "{shown}"
    );
    assert_eq!(
        shown["callbacks"][0]["status"],
        Value::from("blocked"),
        "{shown}"
    );
    let closed = ok(&url, &["batch", &batch_id, "--close"]);
    assert!(
        closed.contains(&format!("batch {batch_id} closed"))
            && closed.contains(&format!("batch {batch_id}: running"))
            && closed.contains("jobs 1: 1 unfinished"),
        "{closed}"
    );
    let cancelled = ok(&url, &["batch", &batch_id, "--cancel"]);
    assert!(
        cancelled.contains("cancelled 1 job(s)")
            && cancelled.contains("finished with failures")
            && cancelled
                .lines()
                .any(|l| l.starts_with("finish") && l.contains("pending")),
        "{cancelled}"
    );
    let none = jobq_cli(&url, &["batch", "no-such-batch"]);
    assert_eq!(none.status.code(), Some(2), "{none:?}");

    // schedule put / pause / resume / remove, seen by schedules (text and
    // JSON); a cron expression that does not parse is refused.
    let name = format!("{q}-nightly");
    let put = [
        "schedule",
        "put",
        &name,
        "cli_probe",
        "0 3 * * *",
        "--payload",
        r#"{"n": 1}"#,
        "--time-zone",
        "Europe/Paris",
        "--queue",
        q,
    ];
    assert!(ok(&url, &put).contains("is stored"));
    let mine = |url: &str| {
        json(url, &["schedules", "--json"])["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .cloned()
    };
    let stored = mine(&url).expect("listed");
    assert_eq!(
        (
            stored["cron"].clone(),
            stored["time_zone"].clone(),
            stored["paused"].clone()
        ),
        (
            Value::from("0 3 * * *"),
            Value::from("Europe/Paris"),
            Value::Bool(false)
        )
    );
    assert!(ok(&url, &["schedule", "pause", &name]).contains("is paused"));
    assert_eq!(mine(&url).unwrap()["paused"], Value::Bool(true));
    let table = ok(&url, &["schedules"]);
    assert!(
        table.starts_with("SCHEDULE")
            && table
                .lines()
                .any(|l| l.starts_with(name.as_str()) && l.contains("paused")),
        "{table}"
    );
    assert!(ok(&url, &["schedule", "resume", &name]).contains("is resumed"));
    let bad = jobq_cli(
        &url,
        &["schedule", "put", &name, "cli_probe", "every tuesday"],
    );
    assert_ne!(bad.status.code(), Some(0), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("the cron expression `every tuesday` does not parse"),
        "{bad:?}"
    );
    assert!(ok(&url, &["schedule", "remove", &name]).contains("is removed"));
    assert!(ok(&url, &["schedule", "remove", &name]).contains("no schedule"));
    assert_eq!(mine(&url), None);

    // limit: set, seen by stats (text and JSON), refused out of range, removed.
    assert!(ok(&url, &["limit", q, "3"]).contains("limited to 3 jobs at once"));
    let limit_of = |url: &str| {
        json(url, &["stats", "--json"])["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["queue"] == q)
            .map(|r| r["limit"].clone())
    };
    assert_eq!(limit_of(&url), Some(Value::from(3)));
    let table = ok(&url, &["stats"]);
    // Counted from the end: the STATE cell may hold a space ("no worker").
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let from_end = header.len()
        - header
            .iter()
            .position(|h| *h == "LIMIT")
            .expect("a LIMIT column");
    let cells: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with(q))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(cells[cells.len() - from_end], "3", "{table}");
    for bad in ["0", "10001", "many"] {
        let refused = jobq_cli(&url, &["limit", q, bad]);
        assert!(!refused.status.success(), "limit {bad}: {refused:?}");
    }
    assert_eq!(
        limit_of(&url),
        Some(Value::from(3)),
        "a refused limit changes nothing"
    );
    assert!(ok(&url, &["limit", q, "none"]).contains("has no limit"));
    assert_eq!(limit_of(&url), Some(Value::Null));

    // rate: set, seen by stats (text and JSON), refused out of range, removed.
    assert!(ok(&url, &["rate", q, "100/1m"]).contains("at most 100/60s"));
    let rate_of = |url: &str| {
        json(url, &["stats", "--json"])["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["queue"] == q)
            .map(|r| (r["rate"].clone(), r["rate_held_back"].clone()))
    };
    let (rate, held) = rate_of(&url).unwrap();
    assert_eq!(
        (
            rate["starts"].as_u64(),
            rate["period_seconds"].as_f64(),
            rate["burst"].as_u64()
        ),
        (Some(100), Some(60.0), Some(1))
    );
    assert!(held.is_u64());
    assert!(ok(&url, &["rate", q, "5/min", "--burst", "2"]).contains("5/60s burst 2"));
    let table = ok(&url, &["stats"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let from_end = header.len()
        - header
            .iter()
            .position(|h| *h == "RATE")
            .expect("a RATE column");
    let cells: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with(q))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(cells[cells.len() - from_end], "5/60s,burst=2", "{table}");
    for bad in [
        &["0/1s"][..],
        &["10/0s"],
        &["10/2d"],
        &["often"],
        &["5/1s", "--burst", "6"],
    ] {
        let mut args = vec!["rate", q];
        args.extend_from_slice(bad);
        let refused = jobq_cli(&url, &args);
        assert!(!refused.status.success(), "rate {bad:?}: {refused:?}");
    }
    assert_eq!(
        rate_of(&url).unwrap().0["starts"].as_u64(),
        Some(5),
        "a refused rate changes nothing"
    );
    assert!(ok(&url, &["rate", q, "none"]).contains("has no rate"));
    assert_eq!(rate_of(&url).unwrap().0, Value::Null);

    // rate --key: a concurrency key's rate, set and removed; the queue of
    // the same name keeps none.
    let said = ok(&url, &["rate", q, "30/1m", "--key"]);
    assert!(
        said.contains(&format!("key {q} starts at most 30/60s")),
        "{said}"
    );
    assert_eq!(rate_of(&url).unwrap().0, Value::Null, "not the queue's");
    // stats lists it, text and JSON.
    let stats = ok(&url, &["stats"]);
    let line = stats
        .lines()
        .skip_while(|l| !l.starts_with("CONCURRENCY KEY"))
        .find(|l| l.split_whitespace().next() == Some(q))
        .unwrap_or_else(|| panic!("no row of key {q} under CONCURRENCY KEY: {stats}"));
    assert!(line.contains("30/60s"), "{line}");
    let listed = json(&url, &["stats", "--json"]);
    let key_rate = listed["key_rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == *q)
        .unwrap_or_else(|| panic!("no key {q} in {listed}"));
    assert_eq!(
        (
            &key_rate["rate"]["starts"],
            &key_rate["rate"]["period_seconds"]
        ),
        (&Value::from(30), &Value::from(60.0))
    );
    let refused = jobq_cli(&url, &["rate", q, "0/1s", "--key"]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(ok(&url, &["rate", q, "none", "--key"]).contains(&format!("key {q} has no rate")));
    let listed = json(&url, &["stats", "--json"]);
    assert!(
        !listed["key_rates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["key"] == *q),
        "a removed key rate is no longer listed: {listed}"
    );

    // doctor: every check passes on this machine's servers.
    let report = jobq_cli(&url, &["doctor"]);
    assert!(report.status.success(), "{report:?}");
    assert!(
        stdout(&report).lines().all(|l| !l.starts_with("fail")),
        "{}",
        stdout(&report)
    );
    assert!(
        json(&url, &["doctor", "--json"])["checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );

    // prune, and what does not apply.
    jobq.cancel(b).await.unwrap();
    let _ = ok(&url, &["prune", "--finished", "0s"]);
    assert!(jobq.job(b).await.unwrap().is_none());
    assert!(
        jobq.job(a).await.unwrap().is_some(),
        "the pending job stays"
    );
    assert_eq!(
        jobq_cli(&url, &["show", "999999999"]).status.code(),
        Some(2)
    );
    assert_eq!(
        jobq_cli(&url, &["prune"]).status.code(),
        Some(2),
        "prune needs an age"
    );
    let bad_age = jobq_cli(&url, &["prune", "--finished", "a while"]);
    assert!(!bad_age.status.success());
    assert!(String::from_utf8_lossy(&bad_age.stderr).contains("a while"));
    jobq.cancel(a).await.unwrap();
}

/// Welcomes a user: published by the worker of the test below, and not
/// linked into the `jobq` binary.
#[job(
    name = "cli_send_welcome",
    queue = "cli-mail",
    max_attempts = 5,
    key = "welcome:{user_id}"
)]
async fn send_welcome(user_id: u64, locale: Option<String>) {
    let _ = (user_id, locale);
}

/// `jobq workers` lists a live worker and the jobs it publishes; `jobq
/// enqueue` of such a job without flags takes its queue, attempts and key
/// (it went to `default` with 20 attempts and no key before), checks the
/// JSON against its fields, and refuses a name no worker publishes unless
/// `--queue` is given; `stats` says who serves the queue.
async fn workers_lists_live_workers_and_enqueue_takes_their_defaults(db: TestDb) {
    let url = db.url().to_owned();
    let jobq = db.jobq().await;
    let queue = unique_queue("cli-served");
    let q = queue.as_str();
    let worker = jobq_runtime::Worker::builder(jobq.clone())
        .queue_unchecked(q, 2)
        .presence_interval(std::time::Duration::from_millis(200))
        .build()
        .unwrap()
        .start();
    let id = worker.id().to_owned();
    jobq_tests::wait_until(
        "the worker is listed",
        std::time::Duration::from_secs(30),
        || async {
            jobq.workers()
                .await
                .unwrap()
                .iter()
                .any(|w| w.worker_id == id)
        },
    )
    .await;

    let text = ok(&url, &["workers"]);
    let line = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("no line for {id}: {text}"));
    assert!(line.contains(&format!("{q}×2")), "{line}");
    let job_line = text
        .lines()
        .find(|l| l.starts_with("cli_send_welcome "))
        .unwrap_or_else(|| panic!("no job line: {text}"));
    for part in [
        "cli-mail",
        " 5 ",
        "welcome:{user_id}",
        "user_id: u64, locale?: Option<String>",
    ] {
        assert!(job_line.contains(part), "{part}: {job_line}");
    }
    let doc = json(&url, &["workers", "--json"]);
    let mine = doc["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not in {doc}"))
        .clone();
    assert_eq!(
        mine["queues"],
        serde_json::json!([{"name": q, "concurrency": 2}])
    );
    assert_eq!(mine["pid"], i64::from(std::process::id()));
    let kind = doc["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "cli_send_welcome")
        .unwrap_or_else(|| panic!("no job in {doc}"))
        .clone();
    assert_eq!(
        (
            kind["queue"].clone(),
            kind["max_attempts"].clone(),
            kind["key_template"].clone()
        ),
        ("cli-mail".into(), 5.into(), "welcome:{user_id}".into())
    );
    assert_eq!(
        kind["fields"][0],
        serde_json::json!({"name": "user_id", "type": "u64", "required": true})
    );

    // The job's own queue, attempts and key, from what its worker publishes.
    // A user id no other run of this test used: the key is unique.
    let user = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000_000_000;
    let payload = format!(r#"{{"user_id":{user}}}"#);
    let stored = enqueued_id(&ok(&url, &["enqueue", "cli_send_welcome", &payload]));
    let stored = jobq.job(stored).await.unwrap().unwrap();
    assert_eq!(
        (
            stored.queue.as_str(),
            stored.max_attempts,
            stored.idempotency_key.clone()
        ),
        ("cli-mail", 5, Some(format!("welcome:{user}")))
    );
    let again = ok(&url, &["enqueue", "cli_send_welcome", &payload]);
    assert!(again.contains("already stored"), "{again}");

    // The JSON is checked against the published fields.
    let bad = jobq_cli(&url, &["enqueue", "cli_send_welcome", r#"{"usr":1}"#]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("unknown field `usr`"), "{bad:?}");

    // A name no live worker publishes: refused, naming the known ones.
    let unknown = jobq_cli(&url, &["enqueue", "cli_no_such_job", "{}"]);
    assert_eq!(unknown.status.code(), Some(1));
    let said = stderr(&unknown);
    assert!(
        said.contains("no job named `cli_no_such_job`")
            && said.contains("cli_send_welcome")
            && said.contains("--queue"),
        "{said}"
    );

    // stats: who serves the queue.
    let table = ok(&url, &["stats"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(q) && l.contains("served by 1 worker")),
        "{table}"
    );
    let stats = json(&url, &["stats", "--json"]);
    let row = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["queue"] == q)
        .unwrap_or_else(|| panic!("{q} not in {stats}"))
        .clone();
    assert_eq!(
        (row["workers"].clone(), row["state"].clone()),
        (1.into(), "served by 1 worker".into())
    );

    worker
        .shutdown(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let doc = json(&url, &["workers", "--json"]);
    assert!(
        doc["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["worker_id"] != id.as_str()),
        "{doc}"
    );
    jobq.cancel(stored.id).await.unwrap();
}

/// `stats` lists a running job's progress; `show` prints the job's output, and each attempt, oldest first: its number, how it ended,
/// when it started, how long it took, the worker, and its message below —
/// a failed attempt from the history, the successful one from the row.
async fn show_prints_the_output_and_each_attempt_with_its_worker(db: TestDb) {
    use jobq_runtime::__store;
    let url = db.url().to_owned();
    ok(&url, &["migrate"]);
    let jobq = db.jobq().await;
    let queue = unique_queue("cli_history");
    let id = enqueued_id(&ok(
        &url,
        &["enqueue", "cli_probe", r#"{"n":7}"#, "--queue", &queue],
    ));
    let lease = std::time::Duration::from_secs(30);
    let first = __store::claim(&jobq, &queue, 1, lease, "cli-a")
        .await
        .unwrap();
    let moved = __store::transition(
        &jobq,
        (id, first[0].token),
        false,
        std::time::Duration::ZERO,
        false,
        Some("the first try failed\nand said why".into()),
    )
    .await
    .unwrap();
    assert!(moved);
    let second = __store::claim(&jobq, &queue, 1, lease, "cli-b")
        .await
        .unwrap();
    let progress = r#"{"done":4,"total":10,"note":"halfway"}"#;
    assert!(
        __store::save_progress(&jobq, (id, second[0].token), progress)
            .await
            .unwrap()
    );
    let listed = ok(&url, &["list", "--queue", &queue]);
    assert!(
        listed.contains("PROGRESS") && listed.contains("4/10 (40%) halfway"),
        "{listed}"
    );
    // stats: the running job with its progress, in the table and in JSON.
    let table = ok(&url, &["stats"]);
    let row = table
        .lines()
        .find(|l| l.starts_with(&queue) && l.contains("cli_probe"))
        .unwrap_or_else(|| panic!("a running row for {queue} in {table}"));
    assert!(
        table.contains("RUNNING")
            && row.contains(&id.to_string())
            && row.contains("4/10 (40%) halfway"),
        "{table}"
    );
    let stats = json(&url, &["stats", "--json"]);
    let running = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == queue.as_str())
        .map(|q| q["in_progress"].clone())
        .unwrap_or_else(|| panic!("{queue} not in {stats}"));
    assert_eq!(running[0]["id"], id, "{stats}");
    assert_eq!(running[0]["attempt"], 2, "{stats}");
    assert_eq!(running[0]["progress"]["done"], 4, "{stats}");
    assert!(
        __store::complete_with_output(&jobq, (id, second[0].token), r#"{"sent":true}"#)
            .await
            .unwrap()
    );
    let text = ok(&url, &["show", &id.to_string()]);
    assert!(
        text.contains("output\n  {\n    \"sent\": true\n  }\n")
            && text.contains("progress 4/10 (40%) halfway\n"),
        "{text}"
    );
    let history = text.split_once("history\n").map_or("", |(_, h)| h);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("  #1 ")
            && lines[0].contains(" error ")
            && lines[0].ends_with(" by cli-a"),
        "{text}"
    );
    assert_eq!(
        lines[1..3],
        ["    the first try failed", "    and said why"],
        "{text}"
    );
    assert!(
        lines[3].starts_with("  #2 ")
            && lines[3].contains(" succeeded ")
            && lines[3].ends_with(" by cli-b"),
        "{text}"
    );
    let shown = json(&url, &["show", &id.to_string(), "--json"]);
    assert_eq!(shown["output"]["sent"], true, "{shown}");
    let attempts = shown["history"].as_array().expect("a history array");
    assert_eq!(attempts.len(), 2, "{shown}");
    assert_eq!(
        (
            &attempts[0]["outcome"],
            &attempts[0]["worker"],
            &attempts[0]["attempt"]
        ),
        (
            &Value::from("error"),
            &Value::from("cli-a"),
            &Value::from(1)
        )
    );
    assert_eq!(attempts[0]["error"], "the first try failed\nand said why");
    assert_eq!(
        (&attempts[1]["outcome"], &attempts[1]["worker"]),
        (&Value::from("succeeded"), &Value::from("cli-b"))
    );
}

/// `enqueue --tag --metadata` stores them; `list --tag` finds the job,
/// `show` prints them (text and JSON); `cancel --tag` acts on the tag's jobs;
/// a bad tag or metadata is refused with a clear error and exit 1.
async fn tags_and_metadata_from_the_shell(db: TestDb) {
    let url = db.url().to_owned();
    ok(&url, &["migrate"]);
    let queue = unique_queue("cli_tags");
    let tag = format!("{queue}:vip");
    let id = enqueued_id(&ok(
        &url,
        &[
            "enqueue",
            "cli_probe",
            r#"{"n":1}"#,
            "--queue",
            &queue,
            "--tag",
            &tag,
            "--tag",
            "nightly",
            "--metadata",
            r#"{"ticket":"OPS-12"}"#,
        ],
    ));
    let other = enqueued_id(&ok(
        &url,
        &["enqueue", "cli_probe", r#"{"n":2}"#, "--queue", &queue],
    ));
    let listed = json(&url, &["list", "--tag", &tag, "--json"]);
    let jobs = listed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{listed}");
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["tags"], serde_json::json!([tag, "nightly"]));
    let text = ok(&url, &["show", &id.to_string()]);
    assert!(
        text.contains(&format!("tags {tag}, nightly\n"))
            && text.contains("metadata\n  {\n    \"ticket\": \"OPS-12\"\n  }\n"),
        "{text}"
    );
    let shown = json(&url, &["show", &id.to_string(), "--json"]);
    assert_eq!(shown["metadata"]["ticket"], "OPS-12", "{shown}");
    let text = ok(&url, &["show", &other.to_string()]);
    assert!(
        text.contains("tags -\n") && text.contains("metadata -\n"),
        "{text}"
    );
    ok(&url, &["cancel", "--tag", &tag, "--yes"]);
    let cancelled = json(
        &url,
        &["list", "--queue", &queue, "--status", "cancelled", "--json"],
    );
    let ids: Vec<i64> = cancelled["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [id], "only the tag's job");
    for (args, says) in [
        (vec!["--tag", ""], "at most 16 tags"),
        (vec!["--metadata", "[1]"], "is not a JSON object"),
        (vec!["--metadata", "{"], "--metadata is not JSON"),
    ] {
        let mut all = vec!["enqueue", "cli_probe", r#"{"n":3}"#, "--queue", &queue];
        all.extend(args);
        let output = jobq_cli(&url, &all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{all:?}: {stderr}");
        assert!(stderr.contains(says), "{all:?}: {stderr}");
    }
}

jobq_tests::on_every_backend!(
    every_command_does_what_it_says_and_exits_accordingly,
    workers_lists_live_workers_and_enqueue_takes_their_defaults,
    show_prints_the_output_and_each_attempt_with_its_worker,
    tags_and_metadata_from_the_shell,
);

#[test]
fn a_refused_connection_fails_at_once_and_says_so() {
    for url in [
        "mysql://nobody@127.0.0.1:1/none",
        "postgres://nobody@127.0.0.1:1/none",
    ] {
        let started = std::time::Instant::now();
        let output = jobq_cli(url, &["counts", "q"]);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(4),
            "{url}: took {:?}",
            started.elapsed()
        );
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with(
                "jobq: database error: error communicating with database: Connection refused"
            ),
            "{url}: {stderr}"
        );
    }
}

#[test]
fn a_command_on_an_unmigrated_database_says_to_run_jobq_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let output = jobq_cli(&url, &["counts", "mail"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "jobq: the database has no table `jobq_jobs`: jobq's tables are not created yet; run Jobq::migrate() (or `jobq migrate`) once before using it: error returned from database: (code: 1) no such table: jobq_jobs\n"
    );
}

/// The `jobq` binary with `env` set and no `--url`.
fn jobq_cli_env(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jobq"));
    command
        .env_remove("JOBQ_DATABASE_URL")
        .env_remove("DATABASE_URL");
    for (name, value) in env {
        command.env(name, value);
    }
    command.args(args).output().expect("the jobq binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_bad_url_is_shown_without_its_password_from_the_flag_or_the_environment() {
    let url = "postgress://admin:S3cret@db.example/app?sslpassword=K3y";
    let from_flag = jobq_cli(url, &["counts", "q"]);
    let from_env = jobq_cli_env(&[("JOBQ_DATABASE_URL", url)], &["counts", "q"]);
    let from_database_url = jobq_cli_env(&[("DATABASE_URL", url)], &["counts", "q"]);
    for output in [from_flag, from_env, from_database_url] {
        assert!(!output.status.success());
        let text = format!("{}{}", stderr(&output), stdout(&output));
        assert!(
            !text.contains("S3cret") && !text.contains("K3y"),
            "a password was printed: {text}"
        );
        assert!(
            text.contains("postgress://admin:***@db.example/app?sslpassword=***"),
            "{text}"
        );
    }
}

/// MySQL/MariaDB from `JOBQ_MYSQL_URL` (skipped when unset, unless `CI=true`).
fn mysql_url() -> Option<String> {
    match std::env::var("JOBQ_MYSQL_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("JOBQ_MYSQL_URL is not set: under CI=true every backend must be tested")
        }
        _ => None,
    }
}

#[test]
fn a_refused_connection_prints_the_servers_cause() {
    let Some(url) = mysql_url() else { return };
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host_db) = rest.rsplit_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    let (host, _db) = host_db.split_once('/').unwrap();

    let wrong_password = format!("{scheme}://{user}:N0tThePassword@{host}/test");
    let output = jobq_cli(&wrong_password, &["counts", "q"]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("jobq: database error: "), "{text}");
    assert!(text.contains("Access denied"), "the cause: {text}");
    assert!(!text.contains("N0tThePassword"), "{text}");

    // A name the tests' user may use (see `jobq_tests::scratch::scoped`): a
    // database it has no privilege on is refused, not reported missing.
    let missing = jobq_tests::scratch::scoped(&url, "no_such_database");
    let missing_database = format!("{scheme}://{userinfo}@{host}/{missing}");
    let output = jobq_cli(&missing_database, &["counts", "q"]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("jobq: database error: "), "{text}");
    assert!(text.contains("Unknown database"), "the cause: {text}");
}

/// `doctor` prints one `status  name  found — advice` line per check and
/// exits 1 when one fails; `--json` gives the same as one object.
#[tokio::test]
async fn doctor_prints_a_line_per_check_and_exits_1_when_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("doctor.db").display());

    let unmigrated = jobq_cli(&url, &["doctor"]);
    assert_eq!(unmigrated.status.code(), Some(1), "{unmigrated:?}");
    let text = stdout(&unmigrated);
    let line = text
        .lines()
        .find(|l| l.starts_with("fail  migrations"))
        .unwrap_or_else(|| panic!("no failing migrations line in:\n{text}"));
    assert!(
        line.contains("not migrated") && line.contains(" — run `jobq migrate`"),
        "{line}"
    );

    assert!(jobq_cli(&url, &["migrate"]).status.success());
    let healthy = jobq_cli(&url, &["doctor"]);
    assert!(healthy.status.success(), "{healthy:?}");
    let text = stdout(&healthy);
    for name in ["server_version", "migrations", "clock_skew", "plan_claim"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(name)),
            "{name} passes:\n{text}"
        );
    }
    assert!(text.lines().all(|l| l.starts_with("ok  ")), "{text}");

    let json = jobq_cli(&url, &["doctor", "--json"]);
    assert!(json.status.success(), "{json:?}");
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(report["worst"], "ok");
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), text.lines().count());
    let migrations = checks.iter().find(|c| c["name"] == "migrations").unwrap();
    assert_eq!(migrations["status"], "ok");
    assert!(migrations["advice"].is_null());
}

/// The same against MariaDB (its own checks: engine, binlog, lock waits).
#[test]
fn doctor_checks_a_mariadb_server() {
    let Some(url) = mysql_url() else { return };
    assert!(jobq_cli(&url, &["migrate"]).status.success());
    let output = jobq_cli(&url, &["doctor"]);
    let text = stdout(&output);
    for name in [
        "storage_engine",
        "binlog_format",
        "lock_waits",
        "plan_claim",
    ] {
        assert!(
            text.lines().any(|l| l.contains(&format!("  {name}  "))),
            "{name}:\n{text}"
        );
    }
    let fails = text.lines().filter(|l| l.starts_with("fail")).count();
    assert_eq!(output.status.success(), fails == 0, "{text}");
}
