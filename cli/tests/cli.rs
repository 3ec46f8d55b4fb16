//! The `jobq` binary against a SQLite file: every command, its output and
//! its exit status.

use std::process::{Command, Output};

use jobq_runtime::{Enqueue, JobStatus, Jobq, job};

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

#[tokio::test]
async fn every_command_does_what_it_says_and_exits_accordingly() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("cli.db").display());

    let migrate = jobq_cli(&url, &["migrate"]);
    assert!(migrate.status.success(), "{migrate:?}");

    let jobq = Jobq::connect(&url).await.unwrap();
    let on = || Enqueue::new().queue("cli");
    let a = jobq.enqueue_with(Probe::new(1), on()).await.unwrap().id;
    let b = jobq.enqueue_with(Probe::new(2), on()).await.unwrap().id;

    let counts = jobq_cli(&url, &["counts", "cli"]);
    assert!(counts.status.success());
    assert!(
        stdout(&counts).contains("pending 2\n"),
        "{}",
        stdout(&counts)
    );

    let show = jobq_cli(&url, &["show", &a.to_string()]);
    assert!(show.status.success());
    let text = stdout(&show);
    assert!(
        text.contains("job cli_probe\n") && text.contains("status pending\n"),
        "{text}"
    );
    assert!(text.contains("payload {\"n\":1}\n"), "{text}");

    let cancel = jobq_cli(&url, &["cancel", &a.to_string()]);
    assert!(cancel.status.success(), "{cancel:?}");
    assert_eq!(
        jobq.job(a).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
    let again = jobq_cli(&url, &["cancel", &a.to_string()]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "cancelling twice does not apply"
    );

    let retry = jobq_cli(&url, &["retry", &a.to_string()]);
    assert!(retry.status.success(), "{retry:?}");
    assert_eq!(
        jobq.job(a).await.unwrap().unwrap().status,
        JobStatus::Pending
    );

    assert!(jobq.cancel(b).await.unwrap());
    let prune = jobq_cli(&url, &["prune", "--finished", "0s"]);
    assert!(prune.status.success(), "{prune:?}");
    assert!(
        stdout(&prune).contains("deleted 1 done or cancelled jobs"),
        "{}",
        stdout(&prune)
    );
    assert!(jobq.job(b).await.unwrap().is_none());
    assert!(
        jobq.job(a).await.unwrap().is_some(),
        "the pending job stays"
    );

    let missing = jobq_cli(&url, &["show", "999999"]);
    assert_eq!(missing.status.code(), Some(2));
    let nothing = jobq_cli(&url, &["prune"]);
    assert_eq!(nothing.status.code(), Some(2), "prune needs an age");
    let bad_age = jobq_cli(&url, &["prune", "--finished", "a while"]);
    assert!(!bad_age.status.success());
    assert!(String::from_utf8_lossy(&bad_age.stderr).contains("a while"));
}

#[test]
fn an_unreachable_database_is_an_error_with_a_message() {
    let output = jobq_cli("mysql://nobody@127.0.0.1:1/none", &["counts", "q"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("jobq: no connection to the database within 5 s"),
        "{stderr}"
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

    let missing_database = format!("{scheme}://{userinfo}@{host}/jobq_no_such_database");
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
