//! `jobq web`: serves the dashboard on the address given, says where, warns
//! when it is reachable beyond this machine without a password, and asks for
//! the password when one is set.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// A running `jobq web` and the address it printed.
struct Web {
    child: Child,
    addr: String,
}

impl Web {
    async fn start(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_jobq"))
            .arg("--url")
            .arg(url)
            .arg("web")
            .args(args)
            .env_remove("JOBQ_WEB_PASSWORD")
            .env_remove("JOBQ_WEB_USER")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the jobq binary runs");
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await
        .expect("jobq web says where it listens")
        .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Self { child, addr }
    }

    /// `GET path` over a plain connection: the status line and the body.
    async fn get(&self, path: &str, headers: &str) -> String {
        self.send(&format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"
        ))
        .await
    }

    /// The port it listens on.
    fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    /// Sends `request` as it is over a plain connection: the whole response.
    async fn send(&self, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(format!("127.0.0.1:{}", self.port()))
            .await
            .unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    /// Stops it; what it printed on stderr.
    async fn stop(mut self) -> String {
        self.child.start_kill().unwrap();
        let output = self.child.wait_with_output().await.unwrap();
        String::from_utf8_lossy(&output.stderr).into_owned()
    }
}

async fn migrated_sqlite() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("web.db").display());
    let jobq = jobq_runtime::Jobq::connect(&url).await.unwrap();
    jobq.migrate().await.unwrap();
    jobq.enqueue_json(
        "cli_web_probe",
        "{}",
        jobq_runtime::Enqueue::new().queue("mail"),
    )
    .await
    .unwrap();
    (dir, url)
}

#[tokio::test]
async fn jobq_web_serves_the_dashboard_on_loopback_without_a_warning() {
    let (_dir, url) = migrated_sqlite().await;
    let web = Web::start(&url, &["--listen", "127.0.0.1:0"], &[]).await;
    assert!(web.addr.starts_with("127.0.0.1:"), "{}", web.addr);
    let overview = web.get("/", "").await;
    assert!(overview.starts_with("HTTP/1.1 200"), "{overview}");
    assert!(overview.contains("data-queue=\"mail\""), "{overview}");
    let list = web.get("/list?queue=mail", "").await;
    assert!(list.contains("cli_web_probe"), "{list}");
    let stderr = web.stop().await;
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[tokio::test]
async fn jobq_web_warns_when_reachable_from_elsewhere_without_a_password() {
    let (_dir, url) = migrated_sqlite().await;
    let web = Web::start(&url, &["--listen", "0.0.0.0:0", "--read-only"], &[]).await;
    let overview = web.get("/", "").await;
    assert!(overview.contains("read-only"), "{overview}");
    let stderr = web.stop().await;
    assert!(
        stderr.contains(
            "warning: listening on 0.0.0.0, which is not a loopback address, without a password"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn jobq_web_with_a_password_asks_for_it_and_does_not_warn() {
    let (_dir, url) = migrated_sqlite().await;
    let web = Web::start(
        &url,
        &["--listen", "0.0.0.0:0"],
        &[("JOBQ_WEB_USER", "ops"), ("JOBQ_WEB_PASSWORD", "hunter2")],
    )
    .await;
    let refused = web.get("/", "").await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    // ops:hunter2
    let admitted = web
        .get("/", "Authorization: Basic b3BzOmh1bnRlcjI=\r\n")
        .await;
    assert!(admitted.starts_with("HTTP/1.1 200"), "{admitted}");
    let stderr = web.stop().await;
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// DNS rebinding, as the issue found it: a page of
/// `rebind.attacker.example`, re-pointed at 127.0.0.1, reads a job, takes
/// the form token from `/queues` and pauses a queue. Each is refused; the
/// names given with `--allow-host` are served.
#[tokio::test]
async fn jobq_web_refuses_a_host_it_does_not_serve_and_serves_the_ones_allowed() {
    let (_dir, url) = migrated_sqlite().await;
    let web = Web::start(
        &url,
        &[
            "--listen",
            "127.0.0.1:0",
            "--allow-host",
            "ops.example,.jobs.example",
        ],
        &[],
    )
    .await;
    let port = web.port().to_owned();
    let get = |host: &str, path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    let attacker = format!("rebind.attacker.example:{port}");
    for path in ["/job/1", "/queues", "/"] {
        let response = web.send(&get(&attacker, path)).await;
        assert!(response.starts_with("HTTP/1.1 403"), "{path}: {response}");
        assert!(
            !response.contains("csrf") && !response.contains("cli_web_probe"),
            "{response}"
        );
        assert!(
            response.contains("--allow-host rebind.attacker.example"),
            "{response}"
        );
    }
    let page = web
        .send(&get(&format!("127.0.0.1:{port}"), "/queues"))
        .await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let at = page.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    let form = format!("csrf={}&queue=mail", &page[at..at + 32]);
    let pause = |host: &str| {
        format!(
            "POST /queues/pause HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        )
    };
    let response = web.send(&pause(&attacker)).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    let jobq = jobq_runtime::Jobq::connect(&url).await.unwrap();
    assert!(
        jobq.paused_queues().await.unwrap().is_empty(),
        "nothing paused"
    );
    // A request without a Host header at all (HTTP/1.0).
    let response = web.send("GET /job/1 HTTP/1.0\r\n\r\n").await;
    assert!(
        response.starts_with("HTTP/1.0 400") || response.starts_with("HTTP/1.1 400"),
        "{response}"
    );

    for host in ["localhost", "127.0.0.1", "ops.example", "eu.jobs.example"] {
        let host = format!("{host}:{port}");
        let response = web.send(&get(&host, "/job/1")).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{host}: {response}");
    }
    let response = web.send(&pause(&format!("ops.example:{port}"))).await;
    assert!(response.starts_with("HTTP/1.1 303"), "{response}");
    assert_eq!(jobq.paused_queues().await.unwrap(), ["mail"]);
    web.stop().await;
}
