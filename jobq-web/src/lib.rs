//! A web dashboard for jobq: see and steer the queues from a browser.
//!
//! [`router`] is an [`axum::Router`] to nest in your own service, so it lives
//! behind your authentication middleware:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let jobq = jobq_runtime::Jobq::connect("sqlite://jobs.db").await?;
//! let app = axum::Router::new()
//!     // … the service's own routes …
//!     .nest("/admin/jobs", jobq_web::router(jobq.clone()));
//! # let _: axum::Router = app;
//! # Ok(()) }
//! ```
//!
//! [`Dashboard`] takes options first: a read-only dashboard
//! ([`Dashboard::read_only`]), HTTP basic authentication
//! ([`Dashboard::basic_auth`]), the auto-refresh interval. The `jobq web`
//! command of the CLI serves one on its own.
//!
//! # Pages
//! - **Overview** (`/`): every queue's available, scheduled, processing and
//!   failed jobs, its lag (how long the oldest due job has waited), expired
//!   leases, state (`paused`, `served by N workers` or `no worker`, from the
//!   live workers' rows), and its throughput over the last hour as an SVG chart.
//!   The three figures to alert on (processing, lag, expired leases) stand
//!   out when they are not zero.
//! - **Jobs** (`/list`): filtered by queue, status, job name, key prefix and
//!   time enqueued; newest or oldest first, a page at a time (keyset paging);
//!   retry or cancel every job the filter matches, after a page that shows
//!   how many that is.
//! - **Job** (`/job/{id}`): every column, the payload pretty-printed, the last
//!   error in full; retry or cancel when its state allows.
//! - **Queues** (`/queues`): each queue's state; pause and resume.
//! - **Workers** (`/workers`): the live workers (host, pid, jobq version,
//!   queues and concurrency, running jobs, started, last seen) and the jobs
//!   they publish with their defaults (queue, priority, attempts, timeout,
//!   key template, payload fields), a job that live workers define
//!   differently marked with whose definition wins (the newest worker's).
//!
//! Pages refresh themselves every few seconds (a button pauses that): a few
//! lines of JavaScript fetch the page's live part and swap it in. Without
//! JavaScript every page reads the same, and every action is a plain form.
//!
//! # What it reads and does
//! Only the public API of [`Jobq`]: [`Jobq::stats`], [`Jobq::list`],
//! [`Jobq::count_where`], [`Jobq::job`], [`Jobq::workers`],
//! [`Jobq::job_kinds`], and for actions [`Jobq::retry`],
//! [`Jobq::cancel`], [`Jobq::retry_where`], [`Jobq::cancel_where`],
//! [`Jobq::pause`], [`Jobq::resume`]. It runs no SQL of its own.
//!
//! # Safety
//! - Every value from the database (payloads, errors, keys, queue and job
//!   names) is HTML-escaped by the templates (maud).
//! - Actions are `POST` forms carrying a token drawn at random when the
//!   [`Dashboard`] is built; a request without it, or whose `Origin` or
//!   `Referer` names another host, is refused (403) and changes nothing.
//!   Every action is idempotent: retrying a job that is pending already,
//!   pausing a paused queue, do nothing.
//! - A read-only dashboard shows no actions and refuses them (403).
//! - No payload or error is ever put in a URL; only filters are (in the
//!   query string) and job ids.
//! - CSS and JavaScript are compiled into the binary and served by the
//!   router: nothing is fetched from elsewhere.

mod assets;
mod auth;
mod format;
mod pages;
mod routes;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use jobq_runtime::Jobq;

/// The dashboard with its defaults (actions on, no authentication, a
/// refresh every 3 s), ready to nest: `Dashboard::new(jobq).router()`.
pub fn router(jobq: Jobq) -> Router {
    Dashboard::new(jobq).router()
}

/// The dashboard's options; [`router`](Self::router) builds it.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// # let jobq = jobq_runtime::Jobq::connect("sqlite://jobs.db").await?;
/// let dashboard = jobq_web::Dashboard::new(jobq)
///     .read_only(true)
///     .basic_auth("ops", std::env::var("JOBQ_WEB_PASSWORD")?)
///     .router();
/// # let _: axum::Router = dashboard;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Dashboard {
    jobq: Jobq,
    read_only: bool,
    basic_auth: Option<auth::BasicAuth>,
    refresh: Duration,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password stays out of logs.
        f.debug_struct("Dashboard")
            .field("backend", &self.jobq.backend())
            .field("read_only", &self.read_only)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|a| a.user.as_str()),
            )
            .field("refresh", &self.refresh)
            .finish()
    }
}

/// How often pages refresh themselves unless told otherwise.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(3);

impl Dashboard {
    /// A dashboard of `jobq` with actions, no authentication, and a refresh
    /// every [`DEFAULT_REFRESH`].
    pub fn new(jobq: Jobq) -> Self {
        Self {
            jobq,
            read_only: false,
            basic_auth: None,
            refresh: DEFAULT_REFRESH,
        }
    }

    /// `true`: no retry, cancel, pause or resume; the buttons are not shown
    /// and such requests are refused (403).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Every request must carry HTTP basic authentication with this user
    /// and password (401 otherwise). Use it over HTTPS, or on localhost:
    /// basic authentication sends the password in the clear.
    pub fn basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic_auth = Some(auth::BasicAuth::new(user.into(), password.into()));
        self
    }

    /// How often pages refresh themselves (at least 500 ms).
    pub fn refresh_interval(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_millis(500));
        self
    }

    /// The routes, to nest wherever the service likes (`/` is the overview).
    pub fn router(self) -> Router {
        let state = Arc::new(routes::Shared {
            jobq: self.jobq,
            read_only: self.read_only,
            csrf: auth::new_token(),
            refresh: self.refresh,
        });
        let router = Router::new()
            .route("/", get(routes::overview))
            .route("/list", get(routes::list))
            .route("/confirm", get(routes::confirm))
            .route("/bulk", post(routes::bulk))
            .route("/job/{id}", get(routes::job))
            .route("/job/{id}/{action}", post(routes::act_on_job))
            .route("/queues", get(routes::queues))
            .route("/queues/{action}", post(routes::act_on_queue))
            .route("/workers", get(routes::workers))
            .route("/assets/style.css", get(assets::css))
            .route("/assets/app.js", get(assets::js))
            .with_state(state);
        match self.basic_auth {
            Some(basic) => router.layer(axum::middleware::from_fn_with_state(
                Arc::new(basic),
                auth::require_basic,
            )),
            None => router,
        }
    }
}
