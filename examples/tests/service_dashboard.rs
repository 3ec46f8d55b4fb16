//! The service example mounts jobq's dashboard under `/admin/jobs` (and
//! `/admin/jobs/`): its pages show the service's jobs, its links stay under
//! the mount point, and the service's own routes still answer. It answers
//! the service's host names and refuses others.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use jobq_examples::service::App;
use tower::ServiceExt;

async fn get(app: &App, uri: &str) -> (StatusCode, String) {
    get_from(app, "localhost:3000", uri).await
}

/// A GET sent to `host`, as a browser sends it.
async fn get_from(app: &App, host: &str, uri: &str) -> (StatusCode, String) {
    let request = Request::get(uri)
        .header("host", host)
        .body(Body::empty())
        .unwrap();
    let response = app.router().oneshot(request).await.unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), 4 << 20).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn the_dashboard_is_mounted_under_admin_jobs_beside_the_services_routes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("service.db").display());
    let app = App::open(&url).await.unwrap();
    let signup = Request::post("/signup")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"email":"grace@example.com"}"#))
        .unwrap();
    let response = app.router().oneshot(signup).await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);

    for mount in ["/admin/jobs", "/admin/jobs/"] {
        let (status, overview) = get(&app, mount).await;
        assert_eq!(status, StatusCode::OK, "{mount}");
        assert!(overview.contains("data-queue=\"mail\""), "{overview}");
        assert!(overview.contains("href=\"/admin/jobs/list\""), "{overview}");
    }
    let (status, list) = get(&app, "/admin/jobs/list?queue=mail").await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains("service_welcome"), "{list}");
    assert!(list.contains("href=\"/admin/jobs/job/1\""), "{list}");
    let (status, job) = get(&app, "/admin/jobs/job/1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(job.contains("welcome:1"), "{job}");
    let (status, css) = get(&app, "/admin/jobs/assets/style.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(css.contains("prefers-color-scheme"));

    let (status, view) = get(&app, "/jobs/1").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the service's own job route: {view}"
    );
}

#[tokio::test]
async fn the_dashboard_answers_the_services_host_names_only() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("service.db").display());
    let app = App::open(&url)
        .await
        .unwrap()
        .with_dashboard_hosts(["signup.example.com"]);
    for (host, expected) in [
        ("localhost:3000", StatusCode::OK),
        ("127.0.0.1:3000", StatusCode::OK),
        ("signup.example.com", StatusCode::OK),
        ("rebind.attacker.example:3000", StatusCode::FORBIDDEN),
    ] {
        let (status, body) = get_from(&app, host, "/admin/jobs/queues").await;
        assert_eq!(status, expected, "{host}: {body}");
    }
}
