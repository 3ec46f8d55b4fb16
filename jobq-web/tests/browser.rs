//! The dashboard in a real headless Chromium (driven over WebDriver by
//! fantoccini), against a live worker in this process, on SQLite and on
//! MariaDB: the overview follows jobs as they are enqueued and drained (by
//! its own auto-refresh), filtering to failed jobs and retrying them all
//! makes them run, a job's page shows its error, pause stops claiming and
//! resume restarts it, a `<script>` payload is text, and a form whose token
//! was removed is refused; the Workers page lists a live worker and the
//! jobs it publishes, and each queue says who serves it; a job's page shows
//! its attempts (each with its worker), tags, metadata and output, and the
//! Tag filter and a tag's link list only its jobs.
//!
//! Needs `/usr/bin/chromium` and `chromedriver` (Debian's `chromium`,
//! `chromium-driver`): missing, the test is skipped, or fails under
//! `CI=true`. With `JOBQ_WEB_SCREENSHOTS=1` the SQLite run writes
//! `docs/dashboard/{overview,jobs,job,attempts,workers}.png`, 1280 px wide, and
//! `overview-phone.png`, 390 px wide. A third test checks at 390 px (a
//! phone, emulated) that every figure and button is on screen.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use jobq_runtime::{
    Enqueue, JobContext, JobError, JobFilter, JobStatus, Jobq, State, Worker, WorkerHandle, job,
};
use jobq_tests::{TestDb, unique_queue, wait_until};
use tokio::process::{Child, Command};

const CHROMIUM: &str = "/usr/bin/chromium";
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// Whether [`flaky`] fails.
#[derive(Debug, Clone, Default)]
struct Failing(Arc<AtomicBool>);

impl Failing {
    fn on(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self, failing: bool) {
        self.0.store(failing, Ordering::SeqCst);
    }
}

/// Fails for good (one attempt) while the test says so, with an error
/// that holds markup.
#[job(name = "web_browser_flaky", max_attempts = 1)]
async fn flaky(failing: State<Failing>, n: u64) -> Result<(), String> {
    if failing.on() {
        return Err(format!(
            "mail server refused message {n}: 550 <b>mailbox full</b>"
        ));
    }
    Ok(())
}

/// What [`receipt`] returns: its job's output.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Delivery {
    sent: u64,
    note: String,
}

/// Fails its first attempt (retried at once), returns a receipt at its
/// second: a job page with two attempts and an output.
#[job(name = "web_browser_receipt", max_attempts = 2)]
async fn receipt(ctx: &JobContext, n: u64) -> Result<Delivery, JobError> {
    if ctx.attempt() == 1 {
        return Err(JobError::retry_in(
            Duration::ZERO,
            format!("relay <b>busy</b> for message {n}"),
        ));
    }
    Ok(Delivery {
        sent: n,
        note: "<i>delivered</i>".to_owned(),
    })
}

/// `chromedriver` on a free port, and a headless Chromium session on it.
struct Browser {
    driver: Child,
    client: Client,
    _profile: tempfile::TempDir,
}

fn find_chromedriver() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromedriver"))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// `None` (skipped) when Chromium or chromedriver is missing, unless `CI=true`.
    async fn start() -> Option<Self> {
        Self::start_at(1280, 1000).await
    }

    /// [`start`](Self::start) with a window (and so a viewport) of
    /// `width` × `height` CSS pixels.
    async fn start_at(width: u32, height: u32) -> Option<Self> {
        let driver_path = find_chromedriver();
        let Some(driver_path) = driver_path.filter(|_| Path::new(CHROMIUM).is_file()) else {
            let message =
                "chromium or chromedriver is missing (apt-get install chromium chromium-driver)";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{message}: under CI=true the browser tests must run");
            }
            eprintln!("skipped: {message}");
            return None;
        };
        let port = free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let mut capabilities = serde_json::Map::new();
        let mut options = serde_json::json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", format!("--window-size={},{height}", width.max(500)),
                "--hide-scrollbars",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        });
        if width < 500 {
            // A window is at least 500 px wide: narrower is a phone's
            // viewport, emulated.
            options["mobileEmulation"] = serde_json::json!({
                "deviceMetrics": { "width": width, "height": height, "pixelRatio": 3.0, "touch": true },
            });
        }
        capabilities.insert("goog:chromeOptions".into(), options);
        let url = format!("http://127.0.0.1:{port}");
        let mut client = None;
        // chromedriver takes a moment to listen.
        for _ in 0..100 {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(c) => {
                    client = Some(c);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let client = client.expect("a WebDriver session from chromedriver");
        Some(Self {
            driver,
            client,
            _profile: profile,
        })
    }

    async fn stop(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// The text of the first element `css` finds, trying again for a moment while an auto-refresh
/// swaps it out (found, then gone before its text was read: a CI run's
/// `#tags` read `None` on a job page that had it); `None` if it stays absent.
async fn text(client: &Client, css: &str) -> Option<String> {
    for _ in 0..10 {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                return Some(text);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Clicks `css`, trying again while an auto-refresh swaps it out.
async fn click(client: &Client, css: &str) {
    for _ in 0..50 {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            if element.click().await.is_ok() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("could not click {css}");
}

async fn wait_for_text(client: &Client, css: &str, expected: &str) {
    let what = format!("{css} reads {expected:?}");
    wait_until(what, WAIT, || async {
        text(client, css).await.as_deref() == Some(expected)
    })
    .await;
}

async fn count(jobq: &Jobq, queue: &str, status: JobStatus) -> u64 {
    jobq.count_where(&JobFilter::new().queue(queue).status(status))
        .await
        .unwrap()
}

async fn screenshot(client: &Client, db: &TestDb, name: &str) {
    if std::env::var("JOBQ_WEB_SCREENSHOTS").as_deref() != Ok("1")
        || db.backend() != jobq_runtime::Backend::Sqlite
    {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

fn start_worker(jobq: &Jobq, queue: &str, failing: &Failing) -> WorkerHandle {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 4)
        .state(failing.clone())
        .poll_interval(POLL)
        .build()
        .expect("build")
        .start()
}

async fn serve(jobq: &Jobq) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().nest(
        "/ops/jobs",
        jobq_web::Dashboard::new(jobq.clone())
            .refresh_interval(Duration::from_millis(500))
            .router(),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A browser (see [`Browser::start`]: `None` when skipped), a handle on
/// `db`, and the address of a dashboard on it.
async fn open(db: &TestDb) -> Option<(Browser, Jobq, String)> {
    let browser = Browser::start().await?;
    let jobq = db.jobq().await;
    let base = format!("http://{}/ops/jobs", serve(&jobq).await);
    Some((browser, jobq, base))
}

async fn the_dashboard_follows_and_steers_a_live_worker(db: TestDb) {
    let Some((browser, jobq, base)) = open(&db).await else {
        return;
    };
    let queue = unique_queue("mail");
    let c = &browser.client;
    let row = format!("tr[data-queue=\"{queue}\"]");
    let cell = |figure: &str| format!("{row} td[data-figure=\"{figure}\"]");
    let on = || Enqueue::new().queue(&queue);

    // The overview, open before anything is enqueued, picks the jobs up by
    // itself, then follows the worker draining them.
    c.goto(&base).await.unwrap();
    for n in 0..3 {
        jobq.enqueue_with(Flaky::new(n), on()).await.unwrap();
    }
    wait_for_text(c, &cell("available"), "3").await;
    let failing = Failing::default();
    let worker = start_worker(&jobq, &queue, &failing);
    wait_for_text(c, &cell("done"), "3").await;
    wait_for_text(c, &cell("available"), "0").await;

    // Four fail for good; the overview counts them.
    failing.set(true);
    let mut failed_ids = Vec::new();
    for n in 10..14 {
        failed_ids.push(jobq.enqueue_with(Flaky::new(n), on()).await.unwrap().id);
    }
    wait_for_text(c, &cell("failed"), "4").await;

    // A job's page shows its error in full, as text.
    c.goto(&format!("{base}/job/{}", failed_ids[0]))
        .await
        .unwrap();
    let error = text(c, "#last-error").await.unwrap();
    assert!(
        error
            .starts_with("mail server refused message 10: 550 <b>mailbox full</b> (attempt 1 of 1"),
        "{error}"
    );
    screenshot(c, &db, "job").await;

    // The list, filtered to the failed jobs of the queue with the form.
    c.goto(&format!("{base}/list")).await.unwrap();
    c.find(Locator::Css("input[name=queue]"))
        .await
        .unwrap()
        .send_keys(&queue)
        .await
        .unwrap();
    click(c, "select[name=status] option[value=failed]").await;
    click(c, "form.filters button[type=submit]").await;
    wait_until("the list shows the 4 failed jobs", WAIT, || async {
        let rows = c.find_all(Locator::Css("tr[data-status=failed]")).await;
        rows.is_ok_and(|rows| rows.len() == 4)
    })
    .await;
    let url = c.current_url().await.unwrap();
    assert!(url.as_str().contains("status=failed"), "{url}");
    screenshot(c, &db, "jobs").await;

    // "Retry all…" shows the count first; confirming runs them.
    failing.set(false);
    click(c, "#retry-all").await;
    wait_for_text(c, "#affected", "4 jobs").await;
    assert_eq!(
        count(&jobq, &queue, JobStatus::Failed).await,
        4,
        "nothing retried before confirming"
    );
    click(c, "#confirm").await;
    // The page that says so comes once the retry has returned: the worker
    // may have run the jobs before it is shown.
    wait_until("the notice of the retry", WAIT, || async {
        text(c, ".notice")
            .await
            .is_some_and(|t| t.contains("4 jobs sent back to pending"))
    })
    .await;
    wait_until("the 4 retried jobs are done", WAIT, || async {
        count(&jobq, &queue, JobStatus::Done).await == 7
    })
    .await;
    assert_eq!(count(&jobq, &queue, JobStatus::Failed).await, 0);

    // Pause from the queues page: jobs enqueued meanwhile are not claimed.
    c.goto(&format!("{base}/queues")).await.unwrap();
    click(c, &format!("{row} button[data-action=pause]")).await;
    wait_until("the queue is paused", WAIT, || async {
        jobq.paused_queues().await.unwrap().contains(&queue)
    })
    .await;
    wait_for_text(c, &format!("{row} .badge"), "paused").await;
    // A pause reaches a worker at its next read of the paused queues, within
    // one poll interval (Jobq::pause's docs): a job enqueued before that may
    // still be claimed (seen once in CI).
    tokio::time::sleep(POLL * 2).await;
    let held = jobq.enqueue_with(Flaky::new(20), on()).await.unwrap().id;
    // A negative: claiming would take one poll interval; give it ten.
    tokio::time::sleep(POLL * 10).await;
    let row_now = jobq.job(held).await.unwrap().unwrap();
    assert_eq!((row_now.status, row_now.attempts), (JobStatus::Pending, 0));
    click(c, &format!("{row} button[data-action=resume]")).await;
    wait_until("the held job runs after resume", WAIT, || async {
        jobq.job(held).await.unwrap().unwrap().status == JobStatus::Done
    })
    .await;

    // A form whose token was taken out is refused, and pauses nothing.
    c.goto(&format!("{base}/queues")).await.unwrap();
    c.execute(
        "document.querySelectorAll('form.inline input[name=csrf]').forEach(e => e.remove());",
        vec![],
    )
    .await
    .unwrap();
    c.find(Locator::Css("form.inline input[name=queue]"))
        .await
        .unwrap()
        .send_keys(&queue)
        .await
        .unwrap();
    click(c, "form.inline button[type=submit]").await;
    wait_until("the refusal shows", WAIT, || async {
        c.source()
            .await
            .is_ok_and(|page| page.contains("carries no form token"))
    })
    .await;
    assert!(!jobq.paused_queues().await.unwrap().contains(&queue));

    // A payload with a script shows as text and runs nothing.
    let script = "<script>document.title='pwned'</script>";
    let payload = serde_json::json!({ "note": script }).to_string();
    let other = unique_queue("markup");
    let id = jobq
        .enqueue_json("web_browser_markup", &payload, Enqueue::new().queue(&other))
        .await
        .unwrap()
        .id;
    c.goto(&format!("{base}/job/{id}")).await.unwrap();
    let shown = text(c, "#payload").await.unwrap();
    assert!(shown.contains(script), "{shown}");
    assert_eq!(c.title().await.unwrap(), format!("Job {id} · jobq"));
    only_the_dashboards_script(c).await;

    // The overview at the end, for the README: throughput and the queue.
    for n in 30..33 {
        jobq.enqueue_with(Flaky::new(n), on().delay(Duration::from_secs(600)))
            .await
            .unwrap();
    }
    c.goto(&base).await.unwrap();
    wait_for_text(c, &cell("scheduled"), "3").await;
    screenshot(c, &db, "overview").await;

    worker.shutdown(Duration::from_secs(10)).await.unwrap();
    browser.stop().await;
}

/// The page runs no script but the dashboard's own: markup from a job
/// (payload, error, metadata, output, tags) was shown as text.
async fn only_the_dashboards_script(client: &Client) {
    let scripts = client
        .execute("return document.scripts.length;", vec![])
        .await
        .unwrap();
    assert_eq!(
        scripts,
        serde_json::json!(1),
        "only the dashboard's own script"
    );
}

/// Whether `css` finds an element now.
async fn present(client: &Client, css: &str) -> bool {
    client.find(Locator::Css(css)).await.is_ok()
}

/// The Workers page lists a live worker (its queue, running count) and
/// the jobs it publishes, and drops it when it shuts down; a queue's badge
/// says `no worker` until a worker serves it, then `served by 1 worker`
/// (it said `running` whether or not any worker served the queue).
async fn the_workers_page_lists_live_workers_and_queues_say_who_serves_them(db: TestDb) {
    let Some((browser, jobq, base)) = open(&db).await else {
        return;
    };
    let queue = unique_queue("served");
    let c = &browser.client;
    let badge = format!("tr[data-queue=\"{queue}\"] .badge");
    let later = Enqueue::new().queue(&queue).delay(Duration::from_secs(600));
    jobq.enqueue_with(Flaky::new(1), later).await.unwrap();

    c.goto(&base).await.unwrap();
    wait_for_text(c, &badge, "no worker").await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 3)
        .state(Failing::default())
        .poll_interval(POLL)
        .presence_interval(Duration::from_millis(200))
        .build()
        .expect("build")
        .start();
    let id = worker.id().to_owned();
    // The overview's own refresh picks the worker up.
    wait_for_text(c, &badge, "served by 1 worker").await;

    c.goto(&format!("{base}/workers")).await.unwrap();
    let row = format!("tr[data-worker=\"{id}\"]");
    wait_until("the worker is listed", WAIT, || async {
        present(c, &row).await
    })
    .await;
    assert_eq!(
        text(c, &format!("{row} a[data-queue]")).await.as_deref(),
        Some(queue.as_str())
    );
    assert!(
        text(c, &row)
            .await
            .unwrap()
            .contains(&format!("{queue} ×3")),
        "{:?}",
        text(c, &row).await
    );
    assert_eq!(
        text(c, &format!("{row} td[data-figure=running]"))
            .await
            .as_deref(),
        Some("0")
    );
    let kind = text(c, "tr[data-job=web_browser_flaky]").await.unwrap();
    assert!(kind.contains("n: u64"), "{kind}");
    screenshot(c, &db, "workers").await;

    // Shut down, it drops out of the page (its own refresh) and the queue
    // has no worker again.
    worker.shutdown(Duration::from_secs(10)).await.unwrap();
    wait_until("the worker drops out of the page", WAIT, || async {
        !present(c, &row).await
    })
    .await;
    c.goto(&base).await.unwrap();
    wait_for_text(c, &badge, "no worker").await;
    jobq.cancel_where(&JobFilter::new().queue(&queue))
        .await
        .unwrap();
    browser.stop().await;
}

/// A job's page shows what a worker in this process did with it: each
/// attempt (how it ended, the worker that ran it, what it said), the
/// job's tags as links to their jobs, its metadata and its output, all as
/// text; the list's Tag filter, and a tag's link, list only its jobs.
async fn a_job_page_shows_its_attempts_tags_metadata_and_output(db: TestDb) {
    let Some((browser, jobq, base)) = open(&db).await else {
        return;
    };
    let queue = unique_queue("receipts");
    let c = &browser.client;
    let (tag, other_tag) = (format!("{queue}:vip"), format!("{queue}:<b>bulk</b>"));
    let tagged = Enqueue::new()
        .queue(&queue)
        .tag(&tag)
        .metadata(serde_json::json!({ "request": "<script>alert(1)</script>" }));
    let id = jobq.enqueue_with(Receipt::new(7), tagged).await.unwrap().id;
    let other = jobq
        .enqueue_with(
            Receipt::new(8),
            Enqueue::new().queue(&queue).tag(&other_tag),
        )
        .await
        .unwrap()
        .id;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .poll_interval(POLL)
        .build()
        .expect("build")
        .start();
    let worker_id = worker.id().to_owned();
    for job in [id, other] {
        wait_until("the job succeeds at its second attempt", WAIT, || async {
            jobq.job(job).await.unwrap().unwrap().status == JobStatus::Done
        })
        .await;
    }

    c.goto(&format!("{base}/job/{id}")).await.unwrap();
    let first = "#attempts tr[data-attempt=\"1\"][data-outcome=error]";
    let second = "#attempts tr[data-attempt=\"2\"][data-outcome=succeeded]";
    let failed = text(c, first).await.expect("a row for the failed attempt");
    assert!(
        failed.contains(&worker_id) && failed.contains("relay <b>busy</b> for message 7"),
        "{failed}"
    );
    let succeeded = text(c, second)
        .await
        .expect("a row for the attempt that succeeded");
    assert!(succeeded.contains(&worker_id), "{succeeded}");
    let output = text(c, "#output").await.expect("the output");
    assert!(
        output.contains("\"sent\": 7") && output.contains("<i>delivered</i>"),
        "{output}"
    );
    let metadata = text(c, "#metadata").await.expect("the metadata");
    assert!(metadata.contains("<script>alert(1)</script>"), "{metadata}");
    assert_eq!(text(c, "#tags").await.as_deref(), Some(tag.as_str()));
    only_the_dashboards_script(c).await;
    screenshot(c, &db, "attempts").await;

    // The tag's link lists its job, not the queue's other one.
    click(c, "#tags a.tag").await;
    let listed = |job: i64| format!("a[href$=\"/job/{job}\"]");
    wait_until("the tag's list shows its job", WAIT, || async {
        present(c, &listed(id)).await
    })
    .await;
    assert!(!present(c, &listed(other)).await, "only the tagged job");

    // The Tag filter, typed in: the other tag, markup and all.
    c.goto(&format!("{base}/list")).await.unwrap();
    c.find(Locator::Css("input[name=tag]"))
        .await
        .unwrap()
        .send_keys(&other_tag)
        .await
        .unwrap();
    click(c, "form.filters button[type=submit]").await;
    wait_until("the filtered list shows the other job", WAIT, || async {
        present(c, &listed(other)).await
    })
    .await;
    assert!(!present(c, &listed(id)).await, "only the job with that tag");

    worker.shutdown(Duration::from_secs(10)).await.unwrap();
    browser.stop().await;
}

/// What of `css` lies outside the viewport, sideways (as `tag.class text:
/// left..right`), and whether the page itself scrolls sideways.
async fn off_screen(client: &Client, css: &str) -> Vec<String> {
    let script = r#"
        const [css] = arguments;
        const width = document.documentElement.clientWidth;
        const off = [];
        for (const el of document.querySelectorAll(css)) {
            const r = el.getBoundingClientRect();
            if (r.width > 0 && (r.left < -0.5 || r.right > width + 0.5)) {
                off.push(`${el.tagName.toLowerCase()}.${el.className} ${el.textContent.trim().slice(0, 30)}: ${Math.round(r.left)}..${Math.round(r.right)} of ${width}`);
            }
        }
        if (document.documentElement.scrollWidth > width) {
            off.push(`the page is ${document.documentElement.scrollWidth} px wide in ${width}`);
        }
        return off;
    "#;
    let found = client
        .execute(script, vec![serde_json::json!(css)])
        .await
        .expect("the layout check runs");
    serde_json::from_value(found).unwrap()
}

/// On a phone (390 px wide, as an iPhone 12–15), every figure of the
/// overview, every cell of the queues page and every button of every page
/// is on screen, without scrolling sideways.
async fn at_390_px_every_figure_and_button_is_on_screen(db: TestDb) {
    let Some(browser) = Browser::start_at(390, 844).await else {
        return;
    };
    let jobq = db.jobq().await;
    let base = format!("http://{}/ops/jobs", serve(&jobq).await);
    let c = &browser.client;
    // Queues with long names, a paused one, every figure non-zero.
    let queues = [
        unique_queue("notifications-email-digest"),
        unique_queue("mail"),
    ];
    for queue in &queues {
        for n in 0..3 {
            jobq.enqueue_with(Flaky::new(n), Enqueue::new().queue(queue))
                .await
                .unwrap();
        }
        jobq.enqueue_with(
            Flaky::new(9),
            Enqueue::new().queue(queue).delay(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    }
    jobq.pause(&queues[1]).await.unwrap();
    let failed = jobq
        .enqueue_with(Flaky::new(10), Enqueue::new().queue(&queues[0]))
        .await
        .unwrap()
        .id;

    let mut found = Vec::new();
    let pages = [
        ("", "[data-figure], th, button, .button"),
        ("/queues", "td, th, button, .button, input"),
        ("/workers", "td, th, button, .button"),
        ("/list", "button, .button, input, select"),
        (&format!("/job/{failed}") as &str, "button, .button, dd"),
        ("/confirm?action=cancel", "button, .button"),
    ];
    for (path, css) in pages {
        c.goto(&format!("{base}{path}")).await.unwrap();
        c.wait()
            .for_element(Locator::Css("main#live"))
            .await
            .unwrap();
        if path.is_empty() {
            screenshot(c, &db, "overview-phone").await;
        }
        for what in off_screen(c, css).await {
            let page = if path.is_empty() { "/" } else { path };
            found.push(format!("{page}: {what}"));
        }
    }
    jobq.resume(&queues[1]).await.unwrap();
    browser.stop().await;
    assert!(
        found.is_empty(),
        "off screen at 390 px:\n{}",
        found.join("\n")
    );
}

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_page_shows_its_attempts_tags_metadata_and_output() {
        if let Some(db) = jobq_tests::TestDb::sqlite() {
            super::a_job_page_shows_its_attempts_tags_metadata_and_output(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_390_px_every_figure_and_button_is_on_screen() {
        if let Some(db) = jobq_tests::TestDb::sqlite() {
            super::at_390_px_every_figure_and_button_is_on_screen(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_dashboard_follows_and_steers_a_live_worker() {
        if let Some(db) = jobq_tests::TestDb::sqlite() {
            super::the_dashboard_follows_and_steers_a_live_worker(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_workers_page_lists_live_workers_and_queues_say_who_serves_them() {
        if let Some(db) = jobq_tests::TestDb::sqlite() {
            super::the_workers_page_lists_live_workers_and_queues_say_who_serves_them(db).await;
        }
    }
}

mod mariadb {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_page_shows_its_attempts_tags_metadata_and_output() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::a_job_page_shows_its_attempts_tags_metadata_and_output(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_dashboard_follows_and_steers_a_live_worker() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::the_dashboard_follows_and_steers_a_live_worker(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_workers_page_lists_live_workers_and_queues_say_who_serves_them() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::the_workers_page_lists_live_workers_and_queues_say_who_serves_them(db).await;
        }
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_page_shows_its_attempts_tags_metadata_and_output() {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::a_job_page_shows_its_attempts_tags_metadata_and_output(db).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_workers_page_lists_live_workers_and_queues_say_who_serves_them() {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::the_workers_page_lists_live_workers_and_queues_say_who_serves_them(db).await;
        }
    }
}
