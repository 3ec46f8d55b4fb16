//! The service example as a program: its binary runs, takes sign-ups over
//! HTTP from several clients at once, and SIGTERM in the middle of that
//! load shuts it down gracefully: it exits 0 in bounded time, every sign-up
//! answered 2xx has its user and its welcome job stored, and no job is left
//! `processing`.
//!
//! The binary is the example cargo built with this test
//! (`target/<profile>/examples/service`; `cargo test` builds examples).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqlx::SqlitePool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `target/<profile>/examples/service`, next to this test's `deps/` folder.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = profile_dir.join("examples").join("service");
    assert!(
        binary.exists(),
        "{} is not built: run this test with `cargo test -p jobq-examples` (which builds the examples), not --test alone",
        binary.display()
    );
    // `cargo test --test service_sigterm` alone does not rebuild examples.
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .unwrap();
    for source in ["examples/service.rs", "src/service.rs"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
        let changed = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap();
        assert!(
            changed <= built,
            "{} is older than {source}: run `cargo test -p jobq-examples` (which rebuilds the examples)",
            binary.display()
        );
    }
    binary
}

/// A POST of a sign-up; the status code, or `None` when the connection was
/// refused or cut (the server shutting down).
async fn sign_up(addr: &str, email: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let body = format!("{{\"email\":\"{email}\"}}");
    let request = format!(
        "POST /signup HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// Waits for `child` to exit, at most `limit`.
fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the service did not exit within {limit:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_under_load_drains_and_loses_no_signup() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("service.db").display());
    let mut child = Command::new(example_binary())
        .env("DATABASE_URL", &url)
        .env("PORT", "0")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();

    // The address from its `listening on` line; all its output collected.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut before = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("it ended before listening:\n{}", before.join("\n")))
            .unwrap();
        if let Some(rest) = line.strip_prefix("listening on http://") {
            break rest.split(',').next().unwrap().to_owned();
        }
        before.push(line);
    };
    let output = std::thread::spawn(move || {
        before.extend(lines.map_while(Result::ok));
        before
    });

    // Eight clients signing up distinct addresses until the server is gone.
    let accepted = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for client in 0..8 {
        let (addr, accepted, stopped) = (addr.clone(), accepted.clone(), stopped.clone());
        clients.push(tokio::spawn(async move {
            let mut answered = Vec::new();
            for n in 0.. {
                let email = format!("user-{client}-{n}@example.com");
                match sign_up(&addr, &email).await {
                    Some((status, body)) => {
                        assert!(status == 202, "{email}: {status} {body}");
                        let signed_up: serde_json::Value = serde_json::from_str(&body).unwrap();
                        answered.push((email, signed_up["job_id"].as_i64().unwrap()));
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    None if stopped.load(Ordering::Relaxed) => break,
                    None => panic!("{email}: no answer before SIGTERM"),
                }
            }
            answered
        }));
    }

    // SIGTERM once the load is well under way and the worker has sent a
    // mail (it may not have yet after 200 sign-ups on a busy machine: the
    // log's "welcome mail sent" below would then be a race).
    let pool = SqlitePool::connect(&url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_jobs WHERE status = 'done'")
            .fetch_one(&pool)
            .await
            .unwrap();
        if accepted.load(Ordering::Relaxed) >= 200 && done > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the service took no load or sent no mail"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stopped.store(true, Ordering::Relaxed);
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let signalled_at = accepted.load(Ordering::Relaxed);

    let status =
        tokio::task::spawn_blocking(move || wait_exit(&mut child, Duration::from_secs(40)))
            .await
            .unwrap();
    assert_eq!(status.code(), Some(0), "exit status {status}");
    let mut answered = Vec::new();
    for client in clients {
        answered.extend(client.await.unwrap());
    }
    let log = output.join().unwrap().join("\n");

    // Every answered sign-up is stored with its job; nothing is processing.
    for (email, job_id) in &answered {
        let stored: Option<(String,)> = sqlx::query_as(
            "SELECT j.status FROM users u JOIN jobq_jobs j ON j.id = ? WHERE u.email = ?",
        )
        .bind(job_id)
        .bind(email)
        .fetch_optional(&pool)
        .await
        .unwrap();
        assert!(
            stored.is_some(),
            "{email} was answered 202 but is not stored"
        );
    }
    let processing: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM jobq_jobs WHERE status = 'processing'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(processing, 0, "rows left processing");
    let jobs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        jobs as usize,
        answered.len(),
        "a job for each answered sign-up and no other"
    );
    assert!(answered.len() >= signalled_at);

    // The shutdown's steps and the mails sent are in its log.
    for step in [
        "signal=\"SIGTERM\"",
        "shutting down: no new connections",
        "HTTP server stopped; stopping the worker",
        "worker stopped, no job left processing",
        "welcome mail sent",
    ] {
        assert!(log.contains(step), "{step:?} is not in the log:\n{log}");
    }
}
