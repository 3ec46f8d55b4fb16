//! The service's jobs tested the way an application tests its own, with
//! `jobq_runtime::testing`: the service on a throwaway in-memory `TestJobq`,
//! what a sign-up enqueued asserted by type, the mail queue drained through
//! a real worker, the handler run inline.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use jobq_examples::service::{App, SignedUp, Welcome};
use jobq_runtime::testing::{Ended, TestJobq, perform};
use jobq_runtime::{JobContext, JobMeta, States};
use tower::ServiceExt;

async fn sign_up(app: &App, email: &str) -> SignedUp {
    let request = Request::post("/signup")
        .header("content-type", "application/json")
        .body(Body::from(format!("{{\"email\":\"{email}\"}}")))
        .unwrap();
    let response = app.router().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

async fn sent_mail(app: &App) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT mail_key, user_id FROM sent_mail ORDER BY user_id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_signup_enqueues_one_welcome_for_its_user_and_a_drain_sends_it() {
    let test = TestJobq::new().await.unwrap();
    let app = App::on(test.jobq().clone()).await.unwrap();
    // The worker's handler takes the service's pool as its state.
    let test = test.state(app.db.clone());

    let ada = sign_up(&app, "ada@example.com").await;
    let bob = sign_up(&app, "bob@example.com").await;
    test.assert_enqueued::<Welcome>(|job| job.user_id == ada.user_id)
        .await;
    let queued: Vec<i64> = test
        .enqueued::<Welcome>()
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.user_id)
        .collect();
    assert_eq!(queued, [ada.user_id, bob.user_id]);

    let drained = test.drain("mail").await.unwrap();
    assert_eq!(drained.succeeded(), 2, "{drained:?}");
    assert!(drained.of(ada.job_id).all(|a| a.ended == Ended::Succeeded));
    assert_eq!(
        sent_mail(&app).await,
        [
            (format!("welcome:{}", ada.user_id), ada.user_id),
            (format!("welcome:{}", bob.user_id), bob.user_id),
        ]
    );
    assert!(test.enqueued::<Welcome>().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_welcome_handler_sends_one_mail_however_often_it_runs() {
    let test = TestJobq::new().await.unwrap();
    let app = App::on(test.jobq().clone()).await.unwrap();
    let mut states = States::default();
    states.insert(app.db.clone());
    let mut meta = JobMeta::new(1, "service_welcome", "mail");
    meta.idempotency_key = Some("welcome:7".into());
    for attempt in 1..=2 {
        meta.attempt = attempt;
        let ctx = JobContext::detached(meta.clone());
        perform(Welcome::new(7), ctx, &states).await.unwrap();
    }
    assert_eq!(sent_mail(&app).await, [("welcome:7".to_owned(), 7)]);
}
