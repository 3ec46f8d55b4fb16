//! A sign-up service with jobq inside: one process serves HTTP and runs the
//! worker. `POST /signup` stores the user and enqueues the welcome mail in
//! the same SQLite transaction (an outbox: the job exists exactly when the
//! user does); `GET /jobs/{id}` shows where the job is; `GET /metrics`
//! serves jobq's metrics (see `jobq_runtime::metrics`) to Prometheus, when
//! the service was given a recorder ([`install_prometheus`], [`App::with_metrics`]);
//! `/admin/jobs` is jobq's web dashboard (`jobq_web::Dashboard`), mounted with
//! `nest_service` so that `/admin/jobs/` is the overview too.

use std::time::Duration;

use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use jobq_runtime::{JobContext, Jobq, State, Worker, WorkerBuilder, job};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use serde::{Deserialize, Serialize};
use sqlx::SqlitePool;

/// Sends the welcome mail (here: records it in `sent_mail`, idempotently,
/// since a job may run more than once after a crash).
#[job(
    name = "service_welcome",
    queue = "mail",
    max_attempts = 5,
    key = "welcome:{user_id}"
)]
pub async fn welcome(ctx: JobContext, db: State<SqlitePool>, user_id: i64) -> Result<(), String> {
    let sent = sqlx::query("INSERT OR IGNORE INTO sent_mail (mail_key, user_id) VALUES (?, ?)")
        .bind(ctx.idempotency_key())
        .bind(user_id)
        .execute(&*db)
        .await
        .map_err(|e| e.to_string())?;
    if sent.rows_affected() == 1 {
        tracing::info!(user_id, job.id = ctx.id(), "welcome mail sent");
    } else {
        tracing::info!(
            user_id,
            job.id = ctx.id(),
            "welcome mail was sent before (a job run again after a crash); not sent twice"
        );
    }
    Ok(())
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct App {
    /// jobq on the service's database.
    pub jobq: Jobq,
    /// The service's own pool (the same database). On SQLite it is the one
    /// jobq opened (`Jobq::sqlite_pool`): one file has one writer at a
    /// time, so the service and jobq share its connections. On MySQL/MariaDB
    /// take `Jobq::mysql_pool`, which is a pool of the application's, not
    /// the one jobq's statements run on (their sessions are set up for jobq).
    pub db: SqlitePool,
    /// Renders the metrics for `GET /metrics`, if the service exposes them.
    pub metrics: Option<PrometheusHandle>,
    /// The host names the service is reached by, which the dashboard
    /// answers to besides localhost and IP addresses.
    pub dashboard_hosts: Vec<String>,
}

/// Installs a Prometheus recorder as the process's global `metrics`
/// recorder, with jobq's histogram buckets, and returns its handle (for
/// [`App::with_metrics`]). Call it first thing, before jobq enqueues or
/// builds a worker; once per process.
///
/// The recorder keeps histogram samples until upkeep folds them into the
/// buckets: a task does so every 5 s (a render does it too).
pub fn install_prometheus() -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Prefix("jobq_".into()),
            jobq_runtime::metrics::DURATION_BUCKETS,
        )?
        .install_recorder()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

impl App {
    /// Opens the SQLite database at `url`, migrates jobq and creates the
    /// service's tables.
    pub async fn open(url: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Self::on(Jobq::connect(url).await?).await
    }

    /// The service on `jobq`, which must be on SQLite (a test's
    /// `jobq_runtime::testing::TestJobq`): migrates it and creates the
    /// service's tables.
    pub async fn on(jobq: Jobq) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        jobq.migrate().await?;
        let db = jobq
            .sqlite_pool()
            .ok_or("this example keeps its users in SQLite")?
            .clone();
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE)",
        )
        .execute(&db)
        .await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS sent_mail (mail_key TEXT PRIMARY KEY, user_id INTEGER NOT NULL)")
            .execute(&db)
            .await?;
        Ok(Self {
            jobq,
            db,
            metrics: None,
            dashboard_hosts: Vec::new(),
        })
    }

    /// The same service, serving `GET /metrics` from `metrics`.
    pub fn with_metrics(mut self, metrics: PrometheusHandle) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The same service, its dashboard answering to these host names too
    /// (the names the service is reached by; see `Dashboard::allow_host`).
    pub fn with_dashboard_hosts<H: Into<String>>(
        mut self,
        hosts: impl IntoIterator<Item = H>,
    ) -> Self {
        self.dashboard_hosts
            .extend(hosts.into_iter().map(Into::into));
        self
    }

    /// The HTTP routes.
    pub fn router(&self) -> Router {
        let dashboard = self
            .dashboard_hosts
            .iter()
            .fold(jobq_web::Dashboard::new(self.jobq.clone()), |d, host| {
                d.allow_host(host)
            });
        Router::new()
            .route("/signup", post(signup))
            .route("/jobs/{id}", get(job_status))
            .route("/metrics", get(metrics))
            .with_state(self.clone())
            // The jobq dashboard; in a real service, behind its admin auth.
            // `nest_service` routes `/admin/jobs/` as well as `/admin/jobs`.
            .nest_service("/admin/jobs", dashboard.router())
    }

    /// The worker that sends the mail, with the pool its handler needs.
    pub fn worker(&self) -> WorkerBuilder {
        Worker::builder(self.jobq.clone())
            .queue("mail", 8)
            .state(self.db.clone())
            .poll_interval(Duration::from_millis(200))
    }
}

/// `POST /signup` body.
#[derive(Debug, Serialize, Deserialize)]
pub struct Signup {
    /// The new user's address.
    pub email: String,
}

/// `POST /signup` answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct SignedUp {
    /// The new user.
    pub user_id: i64,
    /// The welcome mail's job.
    pub job_id: i64,
}

/// `GET /jobs/{id}` answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct JobView {
    /// `pending`, `processing`, `done`, `failed` or `cancelled`.
    pub status: String,
    /// Attempts so far.
    pub attempts: u32,
}

type Failure = (StatusCode, String);

fn internal(error: impl std::fmt::Display) -> Failure {
    (StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

async fn signup(
    AxumState(app): AxumState<App>,
    Json(body): Json<Signup>,
) -> Result<(StatusCode, Json<SignedUp>), Failure> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let user_id: i64 = sqlx::query_scalar("INSERT INTO users (email) VALUES (?) RETURNING id")
        .bind(&body.email)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| {
            (
                StatusCode::CONFLICT,
                format!("cannot sign up {}: {e}", body.email),
            )
        })?;
    // Commits with the user or not at all.
    let job = app
        .jobq
        .enqueue_in(&mut *tx, Welcome::new(user_id))
        .await
        .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SignedUp {
            user_id,
            job_id: job.id,
        }),
    ))
}

/// `GET /metrics`: the Prometheus text format, or 404 without a recorder.
async fn metrics(AxumState(app): AxumState<App>) -> Result<String, Failure> {
    match &app.metrics {
        Some(handle) => Ok(handle.render()),
        None => Err((StatusCode::NOT_FOUND, "metrics are off".into())),
    }
}

async fn job_status(
    AxumState(app): AxumState<App>,
    Path(id): Path<i64>,
) -> Result<Json<JobView>, Failure> {
    match app.jobq.job(id).await.map_err(internal)? {
        Some(job) => Ok(Json(JobView {
            status: job.status.as_str().to_owned(),
            attempts: job.attempts,
        })),
        None => Err((StatusCode::NOT_FOUND, format!("no job {id}"))),
    }
}
