//! The dashboard over HTTP (the router called in process), on every
//! backend: values are escaped, actions need the form token and a same-site
//! origin and change nothing otherwise, a read-only dashboard refuses them,
//! every page renders with data and empty, and links follow the mount point.

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode, header};
use jobq_runtime::{Enqueue, JobStatus, Jobq};
use jobq_tests::{TestDb, unique_queue};
use jobq_web::Dashboard;
use tower::ServiceExt;

const SCRIPT: &str = "<script>alert(1)</script>";

struct Reply {
    status: StatusCode,
    location: Option<String>,
    body: String,
}

async fn call(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = to_bytes(response.into_body(), 4 << 20).await.unwrap();
    Reply {
        status,
        location,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// Where the browser of these tests thinks the dashboard is.
const HOST: &str = "localhost:8080";

/// A GET as a browser sends it over HTTP/1.1.
async fn get(router: &Router, uri: &str) -> Reply {
    let request = Request::get(uri)
        .header(header::HOST, HOST)
        .body(Body::empty())
        .unwrap();
    call(router, request).await
}

/// A form POST as a browser on the same host sends it.
async fn post(router: &Router, uri: &str, form: &str) -> Reply {
    let request = Request::post(uri)
        .header(header::HOST, HOST)
        .header(header::ORIGIN, format!("http://{HOST}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap();
    call(router, request).await
}

/// The form token a page carries.
fn token(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    page[at..at + 32].to_owned()
}

async fn pending_job(jobq: &Jobq, queue: &str, payload: &str) -> i64 {
    jobq.enqueue_json("web_echo", payload, Enqueue::new().queue(queue))
        .await
        .unwrap()
        .id
}

async fn status(jobq: &Jobq, id: i64) -> JobStatus {
    jobq.job(id).await.unwrap().unwrap().status
}

async fn a_script_in_a_payload_or_key_renders_as_text(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-escape");
    let payload = serde_json::json!({ "note": SCRIPT }).to_string();
    let id = jobq
        .enqueue_json(
            "web_echo",
            &payload,
            Enqueue::new()
                .queue(&queue)
                .idempotency_key(format!("{SCRIPT}{queue}")),
        )
        .await
        .unwrap()
        .id;
    let router = jobq_web::router(jobq);
    for page in [format!("/job/{id}"), format!("/list?queue={queue}")] {
        let reply = get(&router, &page).await;
        assert_eq!(reply.status, StatusCode::OK, "{page}");
        assert!(
            reply.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page} shows the script as text"
        );
        assert!(!reply.body.contains(SCRIPT), "{page} has a live script tag");
    }
}

async fn an_action_without_the_token_or_from_another_site_is_refused_and_changes_nothing(
    db: TestDb,
) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-csrf");
    let id = pending_job(&jobq, &queue, "{}").await;
    let router = jobq_web::router(jobq.clone());
    let page = get(&router, &format!("/job/{id}")).await;
    let csrf = token(&page.body);

    let no_token = post(&router, &format!("/job/{id}/cancel"), "").await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    assert!(no_token.body.contains("no form token"), "{}", no_token.body);
    let wrong = post(&router, &format!("/job/{id}/cancel"), "csrf=0123").await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let paused = post(&router, "/queues/pause", &format!("queue={queue}")).await;
    assert_eq!(paused.status, StatusCode::FORBIDDEN);
    let bulk = post(&router, "/bulk", &format!("action=cancel&queue={queue}")).await;
    assert_eq!(bulk.status, StatusCode::FORBIDDEN);
    let cross_site = Request::post(format!("/job/{id}/cancel"))
        .header(header::HOST, HOST)
        .header(header::ORIGIN, "https://evil.example")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={csrf}")))
        .unwrap();
    let cross_site = call(&router, cross_site).await;
    assert_eq!(cross_site.status, StatusCode::FORBIDDEN);
    assert!(
        cross_site.body.contains("another site"),
        "{}",
        cross_site.body
    );
    assert_eq!(
        status(&jobq, id).await,
        JobStatus::Pending,
        "nothing changed"
    );
    assert!(!jobq.paused_queues().await.unwrap().contains(&queue));

    // With the token the same request acts, and again changes nothing more.
    for notice in ["cancelled", "unchanged"] {
        let reply = post(
            &router,
            &format!("/job/{id}/cancel"),
            &format!("csrf={csrf}"),
        )
        .await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER);
        assert_eq!(
            reply.location.as_deref(),
            Some(format!("/job/{id}?notice={notice}").as_str())
        );
        assert_eq!(status(&jobq, id).await, JobStatus::Cancelled);
    }
}

async fn a_read_only_dashboard_shows_no_actions_and_refuses_them(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-ro");
    let id = pending_job(&jobq, &queue, "{}").await;
    let writable = get(&jobq_web::router(jobq.clone()), &format!("/job/{id}")).await;
    assert!(
        writable.body.contains("/cancel\""),
        "a writable page has the button"
    );
    let router = Dashboard::new(jobq.clone()).read_only(true).router();
    for page in [
        format!("/job/{id}"),
        format!("/list?queue={queue}"),
        "/queues".to_owned(),
    ] {
        let reply = get(&router, &page).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(
            !reply.body.contains("<form method=\"post\""),
            "{page}: {}",
            reply.body
        );
        assert!(reply.body.contains("read-only"), "{page}");
    }
    // Even a request that carries the writable dashboard's token.
    let csrf = token(&writable.body);
    for (uri, form) in [
        (format!("/job/{id}/cancel"), format!("csrf={csrf}")),
        (
            "/queues/pause".to_owned(),
            format!("csrf={csrf}&queue={queue}"),
        ),
        (
            "/bulk".to_owned(),
            format!("csrf={csrf}&action=cancel&queue={queue}"),
        ),
    ] {
        let reply = post(&router, &uri, &form).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{uri}");
        assert!(reply.body.contains("read-only"), "{uri}");
    }
    assert_eq!(status(&jobq, id).await, JobStatus::Pending);
    assert!(!jobq.paused_queues().await.unwrap().contains(&queue));
}

async fn a_bulk_action_shows_its_count_first_then_acts_on_the_filtered_jobs(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-bulk");
    let other = unique_queue("web-bulk-other");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(pending_job(&jobq, &queue, "{}").await);
    }
    let untouched = pending_job(&jobq, &other, "{}").await;
    let router = jobq_web::router(jobq.clone());

    let confirm = get(&router, &format!("/confirm?action=cancel&queue={queue}")).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("3 jobs"), "{}", confirm.body);
    for id in &ids {
        assert_eq!(
            status(&jobq, *id).await,
            JobStatus::Pending,
            "showing the count acts on nothing"
        );
    }
    let csrf = token(&confirm.body);
    let reply = post(
        &router,
        "/bulk",
        &format!("csrf={csrf}&action=cancel&queue={queue}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let location = reply.location.unwrap();
    assert!(location.ends_with("notice=cancelled&n=3"), "{location}");
    for id in &ids {
        assert_eq!(status(&jobq, *id).await, JobStatus::Cancelled);
    }
    assert_eq!(status(&jobq, untouched).await, JobStatus::Pending);
    let listed = get(&router, &location).await;
    assert!(listed.body.contains("3 jobs cancelled."), "{}", listed.body);

    let confirm = get(
        &router,
        &format!("/confirm?action=retry&queue={queue}&status=cancelled"),
    )
    .await;
    assert!(confirm.body.contains("3 jobs"), "{}", confirm.body);
    let reply = post(
        &router,
        "/bulk",
        &format!("csrf={csrf}&action=retry&queue={queue}&status=cancelled"),
    )
    .await;
    assert!(reply.location.unwrap().ends_with("notice=retried&n=3"));
    for id in &ids {
        assert_eq!(status(&jobq, *id).await, JobStatus::Pending);
    }
}

async fn every_page_renders_with_data_and_empty(db: TestDb) {
    let fresh = db.backend() == jobq_runtime::Backend::Sqlite;
    let jobq = db.jobq().await;
    let router = jobq_web::router(jobq.clone());
    let queue = unique_queue("web-pages");
    if fresh {
        let overview = get(&router, "/").await;
        assert!(overview.body.contains("No queues yet"), "{}", overview.body);
        assert!(overview.body.contains("Nothing finished in the last hour."));
        let list = get(&router, "/list").await;
        assert!(list.body.contains("No jobs yet"), "{}", list.body);
        let queues = get(&router, "/queues").await;
        assert!(queues.body.contains("No queues yet"));
        let workers = get(&router, "/workers").await;
        assert_eq!(workers.status, StatusCode::OK);
        assert!(workers.body.contains("No live worker"), "{}", workers.body);
        assert!(workers.body.contains("No job published."));
    }
    let empty = get(&router, &format!("/list?queue={queue}&status=failed")).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(
        empty.body.contains("No failed jobs match these filters."),
        "{}",
        empty.body
    );
    let failed_only = get(&router, "/list?status=failed&name=web_no_such_job").await;
    assert!(failed_only.body.contains("No failed jobs match"));
    let none = get(&router, &format!("/confirm?action=retry&queue={queue}")).await;
    assert!(none.body.contains("nothing to retry"), "{}", none.body);
    assert_eq!(
        get(&router, "/job/999999999").await.status,
        StatusCode::NOT_FOUND
    );

    let id = pending_job(&jobq, &queue, r#"{"user_id":42,"tags":["a","b"]}"#).await;
    jobq.pause(&queue).await.unwrap();
    let overview = get(&router, "/").await;
    assert_eq!(overview.status, StatusCode::OK);
    let row = &overview.body[overview
        .body
        .find(&format!("data-queue=\"{queue}\""))
        .unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("paused"), "{row}");
    assert!(row.contains("data-figure=\"available\">1<"), "{row}");
    // The Queues page shows a queue's rate and the jobs it holds back.
    let rate = jobq_runtime::Rate::per(5, std::time::Duration::from_secs(60));
    jobq.set_queue_rate(&queue, Some(rate)).await.unwrap();
    let queues = get(&router, "/queues").await;
    let row = &queues.body[queues
        .body
        .find(&format!("data-queue=\"{queue}\""))
        .unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("data-figure=\"rate\">5/60s<"), "{row}");
    assert!(row.contains("data-figure=\"rate-held-back\">"), "{row}");
    jobq.set_queue_rate(&queue, None).await.unwrap();
    // And a concurrency key's rate, until it is removed.
    let key = format!("{queue}:provider");
    jobq.set_key_rate(&key, Some(rate)).await.unwrap();
    let queues = get(&router, "/queues").await;
    let row = &queues.body[queues
        .body
        .find(&format!("data-key=\"{key}\""))
        .unwrap_or_else(|| panic!("no row of key {key}: {}", queues.body))..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("data-figure=\"key-rate\">5/60s<"), "{row}");
    jobq.set_key_rate(&key, None).await.unwrap();
    let queues = get(&router, "/queues").await;
    assert!(!queues.body.contains(&format!("data-key=\"{key}\"")));
    let list = get(&router, &format!("/list?queue={queue}")).await;
    assert!(
        list.body.contains(&format!("href=\"/job/{id}\"")),
        "{}",
        list.body
    );
    let job = get(&router, &format!("/job/{id}")).await;
    assert!(
        job.body.contains("&quot;user_id&quot;: 42"),
        "pretty-printed: {}",
        job.body
    );
    assert!(job.body.contains("No error: no attempt has failed."));
    let queues = get(&router, "/queues").await;
    assert!(queues.body.contains(&format!("data-queue=\"{queue}\"")));
    assert!(queues.body.contains("Resume"));
    jobq.resume(&queue).await.unwrap();
    // Resumed, with no worker serving it: said so, not "running".
    let overview = get(&router, "/").await;
    let row = &overview.body[overview
        .body
        .find(&format!("data-queue=\"{queue}\""))
        .unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(">no worker<") && !row.contains("running"),
        "{row}"
    );

    // The live part alone, for the auto-refresh.
    let fragment = Request::get("/")
        .header(header::HOST, HOST)
        .header("x-jobq-fragment", "1")
        .body(Body::empty())
        .unwrap();
    let fragment = call(&router, fragment).await;
    assert!(!fragment.body.contains("<html"));
    assert!(fragment.body.contains(&queue));
    let bad = get(&router, "/list?status=lost").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("unknown job status"), "{}", bad.body);
    let css = get(&router, "/assets/style.css").await;
    assert!(css.body.contains("prefers-color-scheme"));
    assert!(
        get(&router, "/assets/app.js")
            .await
            .body
            .contains("X-Jobq-Fragment")
    );
}

async fn nested_links_and_forms_point_under_the_mount_point(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-nest");
    let id = pending_job(&jobq, &queue, "{}").await;
    let app = Router::new().nest("/admin/jobs", jobq_web::router(jobq.clone()));
    let overview = get(&app, "/admin/jobs").await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(
        overview
            .body
            .contains("href=\"/admin/jobs/assets/style.css\"")
    );
    assert!(overview.body.contains("href=\"/admin/jobs/list\""));
    assert!(
        overview.body.contains("href=\"/admin/jobs\""),
        "the overview's own link"
    );
    let job = get(&app, &format!("/admin/jobs/job/{id}")).await;
    assert!(
        job.body
            .contains(&format!("action=\"/admin/jobs/job/{id}/cancel\""))
    );
    let reply = post(
        &app,
        &format!("/admin/jobs/job/{id}/cancel"),
        &format!("csrf={}", token(&job.body)),
    )
    .await;
    assert_eq!(
        reply.location.as_deref(),
        Some(format!("/admin/jobs/job/{id}?notice=cancelled").as_str())
    );
}

async fn basic_auth_keeps_out_requests_without_the_password(db: TestDb) {
    let jobq = db.jobq().await;
    let router = Dashboard::new(jobq).basic_auth("ops", "pa:ss").router();
    let reply = get(&router, "/").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let basic = |credentials: &str| {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        )
    };
    for (credentials, expected) in [
        ("ops:pa:ss", StatusCode::OK),
        ("ops:wrong", StatusCode::UNAUTHORIZED),
        ("other:pa:ss", StatusCode::UNAUTHORIZED),
    ] {
        let request = Request::get("/")
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, basic(credentials))
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            call(&router, request).await.status,
            expected,
            "{credentials}"
        );
    }
}

/// A request as it reaches the router: `host` in the `Host` header
/// (HTTP/1.1), or, for HTTP/2, in the target's authority with no `Host`
/// header (hyper hands `:authority` over so).
fn request(method: &str, http2: bool, host: &str, path: &str) -> axum::http::request::Builder {
    if http2 {
        Request::builder()
            .method(method)
            .version(axum::http::Version::HTTP_2)
            .uri(format!("http://{host}{path}"))
    } else {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, host)
    }
}

/// DNS rebinding: a page of `rebind.attacker.example`, whose name now
/// resolves to the dashboard's address, is the same origin as the
/// dashboard to the browser; every request it sends names its own host.
async fn a_request_for_a_host_the_dashboard_does_not_serve_is_refused_reads_and_actions(
    db: TestDb,
) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-rebind");
    let secret = "rebind-secret-payload";
    let id = pending_job(&jobq, &queue, &format!(r#"{{"note":"{secret}"}}"#)).await;
    let router = jobq_web::router(jobq.clone());
    let csrf = token(&get(&router, "/queues").await.body);
    let attacker = "rebind.attacker.example:8080";
    let pause = format!("csrf={csrf}&queue={queue}");

    for http2 in [false, true] {
        for path in [
            format!("/job/{id}"),
            "/queues".into(),
            "/".into(),
            format!("/list?queue={queue}"),
        ] {
            let read = request("GET", http2, attacker, &path)
                .body(Body::empty())
                .unwrap();
            let read = call(&router, read).await;
            assert_eq!(read.status, StatusCode::FORBIDDEN, "{path}, http2 {http2}");
            assert!(
                !read.body.contains(secret) && !read.body.contains("csrf"),
                "{}",
                read.body
            );
            assert!(
                read.body
                    .contains("does not serve the host `rebind.attacker.example`")
                    && read.body.contains("--allow-host rebind.attacker.example"),
                "{}",
                read.body
            );
        }
        // With the token, and an Origin that matches the host it names.
        let act = request("POST", http2, attacker, "/queues/pause")
            .header(header::ORIGIN, format!("http://{attacker}"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(pause.clone()))
            .unwrap();
        assert_eq!(
            call(&router, act).await.status,
            StatusCode::FORBIDDEN,
            "http2 {http2}"
        );
        assert!(
            !jobq.paused_queues().await.unwrap().contains(&queue),
            "http2 {http2}"
        );

        // An HTTP/2 (or HTTP/1.1) action to a served host from another site.
        let cross = request("POST", http2, "127.0.0.1:8080", "/queues/pause")
            .header(header::ORIGIN, format!("http://{attacker}"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(pause.clone()))
            .unwrap();
        let cross = call(&router, cross).await;
        assert_eq!(cross.status, StatusCode::FORBIDDEN, "http2 {http2}");
        assert!(cross.body.contains("another site"), "{}", cross.body);
        assert!(!jobq.paused_queues().await.unwrap().contains(&queue));
    }
    assert_eq!(status(&jobq, id).await, JobStatus::Pending);

    // No host at all: 400. A Host and a target naming two hosts: 400.
    let nameless = Request::get(format!("/job/{id}"))
        .body(Body::empty())
        .unwrap();
    let nameless = call(&router, nameless).await;
    assert_eq!(nameless.status, StatusCode::BAD_REQUEST);
    assert!(!nameless.body.contains(secret));
    let two = Request::get(format!("http://{attacker}/job/{id}"))
        .header(header::HOST, "localhost:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&router, two).await.status, StatusCode::BAD_REQUEST);

    // Served: localhost, its subdomains and IP addresses, over either.
    for http2 in [false, true] {
        for host in [
            "localhost",
            "LocalHost:1",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "[::1]:8080",
            "192.168.1.20",
        ] {
            let read = request("GET", http2, host, &format!("/job/{id}"))
                .body(Body::empty())
                .unwrap();
            let read = call(&router, read).await;
            assert_eq!(read.status, StatusCode::OK, "{host}, http2 {http2}");
            assert!(read.body.contains(secret));
        }
    }
    let act = request("POST", true, "127.0.0.1:8080", "/queues/pause")
        .header(header::ORIGIN, "http://127.0.0.1:8080")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(pause.clone()))
        .unwrap();
    assert_eq!(call(&router, act).await.status, StatusCode::SEE_OTHER);
    assert!(jobq.paused_queues().await.unwrap().contains(&queue));
    jobq.resume(&queue).await.unwrap();

    // The names the operator adds: exact, or a domain with its subdomains.
    let named = Dashboard::new(jobq.clone())
        .allow_host("jobs.example.com")
        .allow_host(".ops.example")
        .router();
    for (host, expected) in [
        ("jobs.example.com", StatusCode::OK),
        ("JOBS.example.com.:443", StatusCode::OK),
        ("ops.example", StatusCode::OK),
        ("eu.ops.example:8443", StatusCode::OK),
        ("www.jobs.example.com", StatusCode::FORBIDDEN),
        (attacker, StatusCode::FORBIDDEN),
    ] {
        let read = request("GET", false, host, "/queues")
            .body(Body::empty())
            .unwrap();
        assert_eq!(call(&named, read).await.status, expected, "{host}");
    }
    let csrf = token(
        &call(
            &named,
            request("GET", false, "jobs.example.com", "/queues")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .body,
    );
    let act = request("POST", false, "jobs.example.com", "/queues/pause")
        .header(header::ORIGIN, "https://jobs.example.com")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={csrf}&queue={queue}")))
        .unwrap();
    // Behind a TLS proxy: the origin names the host the request was sent to.
    assert_eq!(call(&named, act).await.status, StatusCode::SEE_OTHER);
    assert!(jobq.paused_queues().await.unwrap().contains(&queue));
    jobq.resume(&queue).await.unwrap();
}

/// What each highlighted figure of a page shows: the value of every card
/// and the text of every cell whose class has `hot`.
fn hot_figures(page: &str) -> Vec<String> {
    let text_after = |rest: &str, marker: &str| {
        let rest = &rest[rest.find(marker).unwrap() + marker.len()..];
        rest[..rest.find('<').unwrap()].trim().to_owned()
    };
    let cards = page
        .match_indices("class=\"card hot\"")
        .map(|(at, _)| text_after(&page[at..], "class=\"value\">"));
    let cells = page
        .match_indices("class=\"num hot\"")
        .map(|(at, _)| text_after(&page[at..], ">"));
    cards.chain(cells).collect()
}

/// The overview highlights a figure to alert on (processing, lag, expired
/// leases) only when it is not zero: a job due this second has a lag of
/// `0s`, which is not highlighted.
async fn a_figure_is_highlighted_only_when_it_is_not_zero(db: TestDb) {
    let jobq = db.jobq().await;
    let router = jobq_web::router(jobq.clone());
    let mut seen_zero = false;
    for _ in 0..5 {
        let queue = unique_queue("web-hot");
        pending_job(&jobq, &queue, "{}").await;
        let overview = get(&router, "/").await;
        for figure in hot_figures(&overview.body) {
            assert!(
                !matches!(figure.as_str(), "0" | "0s" | "–" | ""),
                "a highlighted zero `{figure}`: {}",
                overview.body
            );
        }
        let row = &overview.body[overview
            .body
            .find(&format!("data-queue=\"{queue}\""))
            .unwrap()..];
        let lag = &row[row.find("data-figure=\"lag\"").unwrap()..];
        let lag = &lag[lag.find('>').unwrap() + 1..lag.find('<').unwrap()];
        if lag == "0s" {
            seen_zero = true;
            break;
        }
    }
    assert!(seen_zero, "no lag of 0s was shown in 5 tries");
}

/// Nested with `nest_service`, the overview answers at the mount point
/// with and without the trailing slash, its links under the mount point.
async fn the_mount_point_with_a_trailing_slash_is_the_overview(db: TestDb) {
    let jobq = db.jobq().await;
    let app = Router::new().nest_service("/admin/jobs", jobq_web::router(jobq.clone()));
    for path in ["/admin/jobs", "/admin/jobs/"] {
        let overview = get(&app, path).await;
        assert_eq!(overview.status, StatusCode::OK, "{path}");
        assert!(
            overview.body.contains("href=\"/admin/jobs/list\"")
                && overview
                    .body
                    .contains("href=\"/admin/jobs/assets/style.css\""),
            "{path}: {}",
            overview.body
        );
    }
    assert_eq!(get(&app, "/admin/jobs/queues").await.status, StatusCode::OK);
    assert_eq!(
        get(&app, "/admin/jobs/nothing").await.status,
        StatusCode::NOT_FOUND
    );
}

/// The job page shows the job's output and each attempt (the failed one
/// from the history, the successful one from the row) with its worker,
/// every text escaped.
async fn the_job_page_shows_the_output_and_each_attempt_with_its_worker(db: TestDb) {
    use jobq_runtime::__store;
    let jobq = db.jobq().await;
    let queue = unique_queue("web-attempts");
    let id = pending_job(&jobq, &queue, "{}").await;
    let lease = std::time::Duration::from_secs(30);
    let first = __store::claim(&jobq, &queue, 1, lease, "web-a")
        .await
        .unwrap();
    let error = format!("failed with {SCRIPT}");
    let moved = __store::transition(
        &jobq,
        (id, first[0].token),
        false,
        std::time::Duration::ZERO,
        false,
        Some(error),
    )
    .await
    .unwrap();
    assert!(moved);
    let second = __store::claim(&jobq, &queue, 1, lease, "web-b")
        .await
        .unwrap();
    let progress = serde_json::json!({ "done": 4, "total": 10, "note": SCRIPT }).to_string();
    assert!(
        __store::save_progress(&jobq, (id, second[0].token), &progress)
            .await
            .unwrap()
    );
    let listed = get(
        &jobq_web::router(jobq.clone()),
        &format!("/list?queue={queue}"),
    )
    .await;
    assert!(
        listed
            .body
            .contains("4/10 (40%) &lt;script&gt;alert(1)&lt;/script&gt;"),
        "a running job's progress in the list: {}",
        listed.body
    );
    let output = serde_json::json!({ "said": SCRIPT }).to_string();
    assert!(
        __store::complete_with_output(&jobq, (id, second[0].token), &output)
            .await
            .unwrap()
    );
    let reply = get(&jobq_web::router(jobq), &format!("/job/{id}")).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = &reply.body;
    let attempts = body
        .split_once("id=\"attempts\"")
        .map_or("", |(_, rest)| rest);
    let failed = attempts.find("data-attempt=\"1\" data-outcome=\"error\"");
    let succeeded = attempts.find("data-attempt=\"2\" data-outcome=\"succeeded\"");
    assert!(
        failed.is_some() && succeeded.is_some() && failed < succeeded,
        "{body}"
    );
    assert!(
        attempts.contains(">web-a<") && attempts.contains(">web-b<"),
        "{body}"
    );
    assert!(
        attempts.contains("failed with &lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    let shown = body
        .split_once("id=\"output\"")
        .map_or("", |(_, rest)| rest);
    assert!(
        shown.contains("\"said\": \"&lt;script&gt;alert(1)&lt;/script&gt;\"")
            || shown
                .contains("&quot;said&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;"),
        "the output, escaped: {body}"
    );
    let progress = body
        .split_once("id=\"progress\"")
        .map_or("", |(_, rest)| rest);
    assert!(progress.starts_with(">4/10 (40%) &lt;script&gt;"), "{body}");
    assert!(!body.contains(SCRIPT), "no live script tag");
}

/// The job page shows a job's tags (each a link to the list of its jobs)
/// and metadata, escaped; the list filters by tag.
async fn the_job_page_shows_tags_and_metadata_and_the_list_filters_by_tag(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("web-tags");
    let tag = format!("{queue}:{SCRIPT}");
    let options = Enqueue::new()
        .queue(&queue)
        .tag(&tag)
        .metadata(serde_json::json!({ "note": SCRIPT }));
    let tagged = jobq
        .enqueue_json("web_echo", "{}", options)
        .await
        .unwrap()
        .id;
    let plain = pending_job(&jobq, &queue, "{}").await;
    let reply = get(&jobq_web::router(jobq.clone()), &format!("/job/{tagged}")).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = &reply.body;
    let tags = body.split_once("id=\"tags\"").map_or("", |(_, rest)| rest);
    assert!(
        tags.contains(&format!("{queue}:&lt;script&gt;alert(1)&lt;/script&gt;")),
        "the tag, escaped: {body}"
    );
    assert!(tags.contains("tag="), "a link to the tag's jobs: {body}");
    let metadata = body
        .split_once("id=\"metadata\"")
        .map_or("", |(_, rest)| rest);
    assert!(
        metadata.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the metadata, escaped: {body}"
    );
    assert!(!body.contains(SCRIPT), "no live script tag");
    let encoded: String = url_encode(&tag);
    let listed = get(&jobq_web::router(jobq), &format!("/list?tag={encoded}")).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(
        listed.body.contains(&format!("/job/{tagged}\""))
            && !listed.body.contains(&format!("/job/{plain}\"")),
        "only the tagged job: {}",
        listed.body
    );
}

/// `text` percent-encoded for a query value.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The schedules page lists a stored schedule and pauses and resumes it,
/// with the form token only; a schedule's name in it renders as text.
async fn the_schedules_page_lists_stored_schedules_and_pauses_and_resumes_them(db: TestDb) {
    let jobq = db.jobq().await;
    let router = jobq_web::router(jobq.clone());
    let name = format!("{}<b>", unique_queue("web-schedule"));
    let schedule =
        jobq_runtime::Schedule::new(&name, "web_probe", "0 3 * * *").time_zone("Europe/Paris");
    jobq.put_schedule(schedule).await.unwrap();
    let paused = |jobq: Jobq, name: String| async move {
        jobq.schedules()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.schedule.name == name)
            .map(|s| s.paused)
    };
    let page = get(&router, "/schedules").await;
    assert_eq!(page.status, StatusCode::OK);
    let escaped = name.replace('<', "&lt;").replace('>', "&gt;");
    assert!(
        page.body.contains(&escaped) && !page.body.contains(&name),
        "{}",
        page.body
    );
    assert!(page.body.contains("Europe/Paris") && page.body.contains("0 3 * * *"));
    let form = |csrf: &str| format!("csrf={csrf}&schedule={}", url_encode(&name));
    let refused = post(&router, "/schedules/pause", &form("0123")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(paused(jobq.clone(), name.clone()).await, Some(false));
    let csrf = token(&page.body);
    let reply = post(&router, "/schedules/pause", &form(&csrf)).await;
    assert_eq!(
        (reply.status, reply.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/schedules"))
    );
    assert_eq!(paused(jobq.clone(), name.clone()).await, Some(true));
    assert!(get(&router, "/schedules").await.body.contains("paused"));
    post(&router, "/schedules/resume", &form(&csrf)).await;
    assert_eq!(paused(jobq.clone(), name.clone()).await, Some(false));

    // Edit: the form is filled with the schedule's values.
    let edit = get(&router, &format!("/schedules?edit={}", url_encode(&name))).await;
    assert!(
        edit.body.contains(r#"value="0 3 * * *""#) && edit.body.contains(r#"value="Europe/Paris""#),
        "{}",
        edit.body
    );
    // Changed through the form: every two hours, in Tokyo, with a payload.
    let put = |csrf: &str, cron: &str| {
        format!(
            "csrf={csrf}&schedule={}&job=web_probe&cron={}&time_zone=Asia%2FTokyo&queue=&priority=3&payload={}",
            url_encode(&name),
            url_encode(cron),
            url_encode(r#"{"n":2}"#)
        )
    };
    let reply = post(&router, "/schedules/put", &put(&csrf, "0 */2 * * *")).await;
    assert_eq!(
        (reply.status, reply.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/schedules"))
    );
    let stored = jobq.schedules().await.unwrap();
    let mine = stored
        .iter()
        .find(|s| s.schedule.name == name)
        .expect("stored");
    assert_eq!(
        (
            mine.schedule.cron.as_str(),
            mine.schedule.time_zone.as_deref(),
            mine.schedule.priority,
            mine.schedule.payload.as_str()
        ),
        ("0 */2 * * *", Some("Asia/Tokyo"), Some(3), r#"{"n":2}"#)
    );
    // Refused with what is wrong, and nothing changed; without the token, refused.
    let refused = post(&router, "/schedules/put", &put(&csrf, "every tuesday")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("does not parse"), "{}", refused.body);
    let refused = post(&router, "/schedules/put", &put("0123", "@daily")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let stored = jobq.schedules().await.unwrap();
    let mine = stored
        .iter()
        .find(|s| s.schedule.name == name)
        .expect("stored");
    assert_eq!(mine.schedule.cron, "0 */2 * * *");
    // Added through the form, then removed through it.
    let added = format!("{}-added", unique_queue("web-schedule"));
    let reply = post(
        &router,
        "/schedules/put",
        &format!("csrf={csrf}&schedule={added}&job=web_probe&cron=%40daily"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert!(get(&router, "/schedules").await.body.contains(&added));
    for gone in [&added, &name] {
        let reply = post(
            &router,
            "/schedules/remove",
            &format!("csrf={csrf}&schedule={}", url_encode(gone)),
        )
        .await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER);
    }
    let left = jobq.schedules().await.unwrap();
    assert!(
        !left
            .iter()
            .any(|s| s.schedule.name == name || s.schedule.name == added)
    );
}

/// A batch's page shows its state and callbacks (a hostile id renders as
/// text); a job of it and a callback link to it; an unknown batch is a 404.
async fn the_batch_page_shows_its_state_and_callbacks(db: TestDb) {
    let jobq = db.jobq().await;
    let router = jobq_web::router(jobq.clone());
    let id = format!("{}<b>&", unique_queue("web-batch"));
    let mut batch = jobq_runtime::Batch::new(&id);
    batch.add(WebProbe::new(1));
    batch.on(jobq_runtime::BatchCallback::Finish, WebProbe::new(2));
    batch.keep_open();
    let stored = jobq.enqueue_batch(batch).await.unwrap();
    let page = get(&router, &format!("/batch?id={}", url_encode(&id))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let escaped = id
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        page.body.contains(&escaped) && !page.body.contains(&id),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"data-callback="finish""#)
            && page.body.contains("blocked")
            && page.body.contains("It is open"),
        "{}",
        page.body
    );
    for job in [stored.jobs[0], stored.callbacks[0].1] {
        let shown = get(&router, &format!("/job/{job}")).await;
        assert!(shown.body.contains(r#"id="batch""#), "{}", shown.body);
    }
    let missing = get(&router, "/batch?id=no-such-batch").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(jobq.cancel_batch(&id).await.unwrap(), 1);
}

/// A job of the workflow test's (never run here).
#[jobq_runtime::job(name = "web_flow_probe")]
async fn web_probe(n: u64) {
    let _ = n;
}

/// A workflow's page lists its jobs with what each waits on (a hostile id
/// renders as text); a job of it links to it and says what it waits on;
/// an unknown workflow is a 404.
async fn the_workflow_page_shows_each_job_and_what_it_waits_on(db: TestDb) {
    let jobq = db.jobq().await;
    let router = jobq_web::router(jobq.clone());
    let id = format!("{}<b>&", unique_queue("web-flow"));
    let mut flow = jobq_runtime::Workflow::new(&id);
    flow.add("first", WebProbe::new(1));
    flow.add("second", WebProbe::new(2)).after(["first"]);
    let stored = jobq.enqueue_workflow(flow).await.unwrap();
    let page = get(&router, &format!("/workflow?id={}", url_encode(&id))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let escaped = id
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        page.body.contains(&escaped) && !page.body.contains(&id),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"data-task="second""#) && page.body.contains("blocked"),
        "{}",
        page.body
    );
    let job = get(&router, &format!("/job/{}", stored.jobs["second"])).await;
    assert!(job.body.contains(r#"id="workflow""#), "{}", job.body);
    assert!(
        job.body.contains(r#"<dd id="waiting-on">first</dd>"#),
        "{}",
        job.body
    );
    let missing = get(&router, "/workflow?id=no-such-workflow").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(jobq.cancel_workflow(&id).await.unwrap(), 2);
}

jobq_tests::on_every_backend!(
    the_batch_page_shows_its_state_and_callbacks,
    the_workflow_page_shows_each_job_and_what_it_waits_on,
    the_schedules_page_lists_stored_schedules_and_pauses_and_resumes_them,
    the_job_page_shows_tags_and_metadata_and_the_list_filters_by_tag,
    the_job_page_shows_the_output_and_each_attempt_with_its_worker,
    a_figure_is_highlighted_only_when_it_is_not_zero,
    a_request_for_a_host_the_dashboard_does_not_serve_is_refused_reads_and_actions,
    the_mount_point_with_a_trailing_slash_is_the_overview,
    a_script_in_a_payload_or_key_renders_as_text,
    an_action_without_the_token_or_from_another_site_is_refused_and_changes_nothing,
    a_read_only_dashboard_shows_no_actions_and_refuses_them,
    a_bulk_action_shows_its_count_first_then_acts_on_the_filtered_jobs,
    every_page_renders_with_data_and_empty,
    nested_links_and_forms_point_under_the_mount_point,
    basic_auth_keeps_out_requests_without_the_password,
);
