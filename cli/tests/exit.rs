//! How `jobq` ends: the exit status the README promises (0 done, 1 an
//! error, 2 nothing to apply or not confirmed), and a closed stdout or
//! stderr (`| head`) ends the output quietly, never with a panic.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};

use jobq_runtime::{Enqueue, Jobq};

/// A migrated SQLite database with `failed` jobs enough that the list of
/// a thousand and the stats as JSON are far more than a pipe holds (64 KiB).
async fn database() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("exit.db").display());
    let jobq = Jobq::connect(&url).await.unwrap();
    jobq.migrate().await.unwrap();
    let note = "x".repeat(200);
    for queue in 0..200 {
        let jobs = (0..6).map(|n| {
            (
                "cli_exit_probe".to_owned(),
                format!(r#"{{"n":{n},"note":"{note}"}}"#),
                Enqueue::new().queue(format!("q{queue:03}")),
            )
        });
        for (name, payload, options) in jobs {
            jobq.enqueue_json(&name, &payload, options).await.unwrap();
        }
    }
    (dir, url)
}

fn jobq(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jobq"));
    command
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null());
    command
}

/// Runs `args` with stdout a pipe that is closed before `jobq` writes
/// (its reader dropped at once); stderr read. The status and stderr.
fn with_stdout_closed(url: &str, args: &[&str]) -> (ExitStatus, String) {
    let mut child = jobq(url, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

/// Runs `args` with stdout and stderr pipes closed before it writes.
fn with_both_closed(url: &str, args: &[&str]) -> ExitStatus {
    let mut child = jobq(url, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().unwrap()
}

/// Every command, with the status it ends with when nothing goes wrong.
const COMMANDS: &[(&[&str], i32)] = &[
    (&["stats"], 0),
    (&["stats", "--json"], 0),
    (&["stats", "--watch", "100ms"], 0),
    (&["stats", "--watch", "100ms", "--json"], 0),
    (&["counts", "q001"], 0),
    (&["counts", "q001", "--json"], 0),
    (&["list", "--limit", "1000"], 0),
    (&["list", "--limit", "1000", "--json"], 0),
    (&["list", "--status", "failed", "--json"], 0),
    (&["show", "1"], 0),
    (&["show", "1", "--json"], 0),
    (&["show", "999999"], 2),
    (&["doctor"], 0),
    (&["doctor", "--json"], 0),
    (&["migrate"], 0),
    (&["pause", "q001"], 0),
    (&["resume", "q001"], 0),
    (&["cancel", "--queue", "q002"], 2),
    (&["cancel", "--queue", "q003", "--yes"], 0),
    (
        &["retry", "--queue", "q004", "--status", "pending", "--yes"],
        2,
    ),
    (&["enqueue", "cli_exit_probe", "{}", "--queue", "q005"], 0),
    (&["prune", "--finished", "7d"], 0),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_with_a_closed_stdout_or_stderr_ends_quietly() {
    let (_dir, url) = database().await;
    for (args, code) in COMMANDS {
        let (status, stderr) = with_stdout_closed(&url, args);
        assert_eq!(status.code(), Some(*code), "jobq {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "jobq {args:?}: {stderr}");
        assert!(!stderr.contains("cannot write"), "jobq {args:?}: {stderr}");
        // Again with stderr closed too; the cancel on jobs not cancelled yet.
        let args: Vec<&str> = args
            .iter()
            .map(|&a| if a == "q003" { "q006" } else { a })
            .collect();
        let status = with_both_closed(&url, &args);
        assert_eq!(
            status.code(),
            Some(*code),
            "jobq {args:?}, stderr closed too"
        );
    }
}

/// The shell's way: `jobq … | head -c N`, the reader gone after a few
/// bytes of an output far longer than the pipe holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_command_piped_into_head_exits_0_without_a_panic() {
    let (_dir, url) = database().await;
    let reads: &[&[&str]] = &[
        &["list", "--status", "pending", "--json"],
        &["list", "--limit", "1000"],
        &["list", "--limit", "1000", "--json"],
        &["stats"],
        &["stats", "--json"],
        &["stats", "--watch", "50ms"],
        &["show", "1"],
        &["doctor"],
    ];
    for args in reads {
        for bytes in [0, 10, 300] {
            let line = format!(
                "\"$0\" --url \"$1\" {} | head -c {bytes} >/dev/null; echo \"${{PIPESTATUS[0]}}\"",
                args.join(" ")
            );
            let output = Command::new("bash")
                .arg("-c")
                .arg(&line)
                .arg(env!("CARGO_BIN_EXE_jobq"))
                .arg(&url)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let status = String::from_utf8_lossy(&output.stdout);
            assert_eq!(
                status.trim(),
                "0",
                "jobq {args:?} | head -c {bytes}: {stderr}"
            );
            assert!(
                stderr.is_empty(),
                "jobq {args:?} | head -c {bytes}: {stderr}"
            );
        }
    }
}

/// README: "2 nothing to apply (no such job, wrong status, not confirmed)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_that_applies_to_nothing_or_is_not_confirmed_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("bulk.db").display());
    let handle = Jobq::connect(&url).await.unwrap();
    handle.migrate().await.unwrap();
    handle
        .enqueue_json("cli_exit_probe", "{}", Enqueue::new().queue("mail"))
        .await
        .unwrap();
    let run = |args: &[&str]| {
        let output = jobq(&url, args).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // A filter that matches nothing the action applies to.
    let (code, said) = run(&["retry", "--queue", "mail", "--yes"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("no failed or cancelled jobs match"), "{said}");
    let (code, said) = run(&["cancel", "--queue", "no-such-queue", "--yes"]);
    assert_eq!(code, Some(2), "{said}");
    // A status the action does not apply to.
    let (code, said) = run(&["cancel", "--status", "done", "--yes"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("cancel applies to pending or processing jobs, not done"),
        "{said}"
    );
    // Off a terminal, without --yes: not asked, not confirmed.
    let (code, said) = run(&["cancel", "--queue", "mail"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("pass --yes"), "{said}");
    assert_eq!(
        handle.counts("mail").await.unwrap().pending,
        1,
        "nothing changed"
    );
    let (code, _) = run(&["cancel", "--queue", "mail", "--yes"]);
    assert_eq!(code, Some(0));
}
