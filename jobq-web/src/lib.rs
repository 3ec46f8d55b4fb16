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
//!     .nest_service("/admin/jobs", jobq_web::router(jobq.clone()));
//! # let _: axum::Router = app;
//! # Ok(()) }
//! ```
//!
//! [`Dashboard`] takes options first: a read-only dashboard
//! ([`Dashboard::read_only`]), HTTP basic authentication
//! ([`Dashboard::basic_auth`]), the host names it is reached by besides
//! localhost and IP addresses ([`Dashboard::allow_host`]), the auto-refresh
//! interval. The `jobq web`
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
//! - Only requests sent to a host the dashboard serves get an answer:
//!   `localhost` (and its subdomains), any IP address, and the names given
//!   to [`Dashboard::allow_host`]. Any other `Host` (or HTTP/2
//!   `:authority`) gets 403 and a line saying how to allow it, a request
//!   naming no host 400, for pages and actions alike: a site whose name
//!   is re-pointed at the dashboard's address (DNS rebinding) can neither
//!   read it nor act. Mounted in a service, add the service's names.
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
mod params;
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
    hosts: auth::Hosts,
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
            .field("hosts", &self.hosts)
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
            hosts: auth::Hosts::default(),
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

    /// Serves requests for the host `name` too (call it once per name).
    ///
    /// Without it the dashboard answers only requests sent to `localhost`
    /// (or a subdomain of it) or to an IP address, whatever the port, and
    /// refuses any other `Host` with 403: a web page whose own name an
    /// attacker re-points at this server's address (DNS rebinding) would
    /// otherwise be the same site as the dashboard to the browser, read
    /// every page and press every button. Add the names the service is
    /// reached by. `name` is compared without case, port or a trailing dot;
    /// `.example.com` serves example.com and every subdomain of it; `*`
    /// serves any host, for a dashboard behind a proxy that checks `Host`
    /// itself.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// # let jobq = jobq_runtime::Jobq::connect("sqlite://jobs.db").await?;
    /// let dashboard = jobq_web::Dashboard::new(jobq)
    ///     .allow_host("ops.example.com")
    ///     .router();
    /// # let _: axum::Router = dashboard;
    /// # Ok(()) }
    /// ```
    pub fn allow_host(mut self, name: impl AsRef<str>) -> Self {
        self.hosts.allow(name.as_ref());
        self
    }

    /// The routes, to nest wherever the service likes (`/` is the overview).
    ///
    /// Nested with [`Router::nest_service`] the overview answers at the
    /// mount point with and without a trailing slash (`/admin/jobs` and
    /// `/admin/jobs/`); with [`Router::nest`] axum routes only the first.
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
            .route("/workflow", get(routes::workflow))
            .route("/queues", get(routes::queues))
            .route("/queues/{action}", post(routes::act_on_queue))
            .route("/workers", get(routes::workers))
            .route("/schedules", get(routes::schedules))
            .route("/schedules/{action}", post(routes::act_on_schedule))
            .route("/batch", get(routes::batch))
            .route("/assets/style.css", get(assets::css))
            .route("/assets/app.js", get(assets::js))
            .with_state(state);
        let router = match self.basic_auth {
            Some(basic) => router.layer(axum::middleware::from_fn_with_state(
                Arc::new(basic),
                auth::require_basic,
            )),
            None => router,
        };
        // Outermost: a request for a host the dashboard does not serve gets
        // no further, not even to the password prompt.
        router.layer(axum::middleware::from_fn_with_state(
            Arc::new(self.hosts),
            auth::require_served_host,
        ))
    }
}
