//! The service example's output: logs into a pipe carry no colour codes,
//! and a closed stdout and stderr (the log reader gone) end the logging,
//! not the service: it goes on serving and shuts down on SIGTERM with 0.
//!
//! The binary is the example cargo built with this test
//! (`target/<profile>/examples/service`; `cargo test` builds examples).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `target/<profile>/examples/service`, next to this test's `deps/` folder.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = profile_dir.join("examples").join("service");
    assert!(
        binary.exists(),
        "{} is not built: run `cargo test -p jobq-examples`",
        binary.display()
    );
    binary
}

/// A port free now, for the service's `PORT`.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `method path` with `body` to the service; the status and the body, or
/// `None` while it does not accept connections yet.
async fn request(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost:{port}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
}

/// Waits for the answer to `method path` that `done` accepts.
async fn until(port: u16, method: &str, path: &str, body: &str, done: impl Fn(u16, &str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((status, text)) = request(port, method, path, body).await {
            if done(status, &text) {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no answer to {method} {path} as expected in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the service did not exit within 40 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(port: u16, db: &std::path::Path) -> Command {
    let mut command = Command::new(example_binary());
    command
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("PORT", port.to_string())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_keeps_serving_with_its_output_closed() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = start(port, &dir.path().join("closed.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    // Signs up (its log lines have nowhere to go), the job runs.
    until(
        port,
        "POST",
        "/signup",
        r#"{"email":"ada@example.com"}"#,
        |s, _| s == 202,
    )
    .await;
    until(port, "GET", "/jobs/1", "", |s, body| {
        s == 200 && body.contains("\"done\"")
    })
    .await;
    until(port, "GET", "/admin/jobs/", "", |s, _| s == 200).await;
    let status = terminate(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_logs_into_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = start(port, &dir.path().join("plain.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    until(
        port,
        "POST",
        "/signup",
        r#"{"email":"ada@example.com"}"#,
        |s, _| s == 202,
    )
    .await;
    until(port, "GET", "/jobs/1", "", |s, body| {
        s == 200 && body.contains("\"done\"")
    })
    .await;
    assert_eq!(terminate(&mut child).code(), Some(0));
    let mut logs = String::new();
    stdout.read_to_string(&mut logs).unwrap();
    assert!(logs.contains("welcome mail sent"), "{logs}");
    assert!(!logs.contains('\x1b'), "colour codes in a pipe: {logs}");
}
