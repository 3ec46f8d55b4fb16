//! The service example's routes against a SQLite file: a sign-up stores the
//! user and its welcome job together, the worker sends the mail once, the
//! job's route shows it done; a second sign-up of the address stores
//! neither.

use std::time::{Duration, Instant};

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use jobq_examples::service::{App, JobView, SignedUp};
use tower::ServiceExt;

async fn call(app: &App, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = app.router().oneshot(request).await.unwrap();
    let status = response.status();
    (
        status,
        to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec(),
    )
}

fn signup(email: &str) -> Request<Body> {
    Request::post("/signup")
        .header("content-type", "application/json")
        .body(Body::from(format!("{{\"email\":\"{email}\"}}")))
        .unwrap()
}

#[tokio::test]
async fn a_signup_enqueues_its_mail_with_the_user_and_the_worker_sends_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("service.db").display());
    let app = App::open(&url).await.unwrap();

    let (status, body) = call(&app, signup("ada@example.com")).await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let signed_up: SignedUp = serde_json::from_slice(&body).unwrap();

    let (status, _) = call(&app, signup("ada@example.com")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let jobs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_jobs")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(jobs, 1, "the refused sign-up enqueued nothing");

    let worker = app.worker().build().unwrap().start();
    let deadline = Instant::now() + Duration::from_secs(10);
    let view = loop {
        let request = Request::get(format!("/jobs/{}", signed_up.job_id))
            .body(Body::empty())
            .unwrap();
        let (status, body) = call(&app, request).await;
        assert_eq!(status, StatusCode::OK);
        let view: JobView = serde_json::from_slice(&body).unwrap();
        if view.status == "done" || Instant::now() > deadline {
            break view;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    worker.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(view.status, "done");
    assert_eq!(view.attempts, 1);
    let sent: Vec<(String, i64)> = sqlx::query_as("SELECT mail_key, user_id FROM sent_mail")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(
        sent,
        [(format!("welcome:{}", signed_up.user_id), signed_up.user_id)]
    );

    let (status, _) = call(
        &app,
        Request::get("/jobs/999999").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
