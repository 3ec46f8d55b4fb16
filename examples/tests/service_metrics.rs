//! The service example's `/metrics`, scraped over HTTP: sign-ups run their
//! welcome jobs, and the Prometheus text names them under their queue and
//! job, with the counts they had. In a test binary of its own: a process has
//! one global recorder.

use std::time::{Duration, Instant};

use jobq_examples::service::{App, install_prometheus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 request to `addr`; the status code and the body.
async fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// The value of the sample `name{labels}` in a Prometheus text `page`.
fn sample(page: &str, name: &str, labels: &str) -> Option<f64> {
    let series = format!("{name}{{{labels}}} ");
    page.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scraped_over_http_count_the_jobs_run_under_their_queue_and_job() {
    let metrics = install_prometheus().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("service.db").display());
    let app = App::open(&url).await.unwrap().with_metrics(metrics);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app.router();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let worker = app.worker().build().unwrap().start();

    for email in ["ada@example.com", "grace@example.com", "edsger@example.com"] {
        let (status, body) = http(
            addr,
            "POST",
            "/signup",
            &format!("{{\"email\":\"{email}\"}}"),
        )
        .await;
        assert_eq!(status, 202, "{body}");
    }
    let labels = r#"queue="mail",job="service_welcome""#;
    let succeeded = format!(r#"{labels},outcome="succeeded""#);
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let (status, page) = http(addr, "GET", "/metrics", "").await;
        assert_eq!(status, 200);
        if sample(&page, "jobq_attempts_total", &succeeded) == Some(3.0) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "3 successes never showed in:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    worker.shutdown(Duration::from_secs(5)).await.unwrap();
    server.abort();

    assert_eq!(
        sample(&page, "jobq_jobs_enqueued_total", labels),
        Some(3.0),
        "{page}"
    );
    assert_eq!(
        sample(&page, "jobq_jobs_claimed_total", r#"queue="mail""#),
        Some(3.0),
        "{page}"
    );
    let failed = format!(r#"{labels},outcome="failed""#);
    assert_eq!(
        sample(&page, "jobq_attempts_total", &failed),
        Some(0.0),
        "{page}"
    );
    // The run-time histogram: three samples, each under the last finite
    // bucket (10 minutes), all in the +Inf one.
    assert_eq!(
        sample(&page, "jobq_run_seconds_count", labels),
        Some(3.0),
        "{page}"
    );
    assert_eq!(
        sample(
            &page,
            "jobq_run_seconds_bucket",
            &format!(r#"{labels},le="600""#)
        ),
        Some(3.0),
        "{page}"
    );
    assert_eq!(
        sample(
            &page,
            "jobq_run_seconds_bucket",
            &format!(r#"{labels},le="+Inf""#)
        ),
        Some(3.0),
        "{page}"
    );
    let run_time = sample(&page, "jobq_run_seconds_sum", labels).unwrap();
    assert!((0.0..10.0).contains(&run_time), "{page}");
    assert_eq!(
        sample(&page, "jobq_queue_wait_seconds_count", r#"queue="mail""#),
        Some(3.0),
        "{page}"
    );
    assert!(
        sample(&page, "jobq_claim_seconds_count", r#"queue="mail""#).unwrap() >= 1.0,
        "{page}"
    );
    assert!(
        sample(&page, "jobq_settle_seconds_count", r#"settle="complete""#).unwrap() >= 1.0,
        "{page}"
    );
}
