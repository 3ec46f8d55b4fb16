//! The handlers: read the request, call [`Jobq`], render a page or act and
//! redirect.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::extract::{FromRequestParts, OriginalUri, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use jobq_runtime::{Cursor, JobFilter, JobStatus, Jobq, Order, Page};
use maud::Markup;
use serde::Deserialize;

use crate::auth;
use crate::format;
use crate::pages::{self, Ctx};

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) jobq: Jobq,
    pub(crate) read_only: bool,
    pub(crate) csrf: String,
    pub(crate) refresh: Duration,
}

type AppState = State<Arc<Shared>>;

/// Where the dashboard is mounted and whether the page's live part alone
/// is asked for (the auto-refresh).
pub(crate) struct Req {
    base: String,
    fragment: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for Req {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let inner = parts.uri.path();
        let original = parts
            .extensions
            .get::<OriginalUri>()
            .map_or(inner, |original| original.0.path());
        // Nested at `/jobs`, `/jobs/list` arrives here as `/list`.
        let base = original
            .strip_suffix(inner)
            .unwrap_or_else(|| original.trim_end_matches('/'))
            .to_owned();
        let fragment = parts.headers.contains_key("x-jobq-fragment");
        Ok(Self { base, fragment })
    }
}

impl Shared {
    fn ctx<'a>(&'a self, req: &'a Req) -> Ctx<'a> {
        Ctx {
            base: &req.base,
            csrf: &self.csrf,
            read_only: self.read_only,
            refresh_ms: self.refresh.as_millis(),
        }
    }

    /// Refuses an action: on a read-only dashboard, from another site, or
    /// without this dashboard's token.
    fn guard(
        &self,
        headers: &HeaderMap,
        host: &auth::ServedHost,
        token: Option<&str>,
    ) -> Result<(), Failure> {
        if self.read_only {
            return Err(Failure::Forbidden(
                "refused: this dashboard is read-only".into(),
            ));
        }
        match auth::refusal(headers, &host.0, &self.csrf, token) {
            Some(why) => Err(Failure::Forbidden(why)),
            None => Ok(()),
        }
    }
}

/// A page, whole or its live part only.
fn respond(req: &Req, page: pages::Page<'_>) -> Response {
    let markup: Markup = if req.fragment {
        page.live
    } else {
        pages::layout(page)
    };
    (
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::VARY, HeaderValue::from_static("x-jobq-fragment")),
        ],
        markup,
    )
        .into_response()
}

/// Why a request did not go through.
#[derive(Debug)]
pub(crate) enum Failure {
    Jobq(jobq_runtime::Error),
    BadRequest(String),
    NotFound(String),
    Forbidden(String),
}

impl From<jobq_runtime::Error> for Failure {
    fn from(error: jobq_runtime::Error) -> Self {
        match error {
            // A filter or queue name the user typed.
            jobq_runtime::Error::Invalid(invalid) => Self::BadRequest(invalid.to_string()),
            other => Self::Jobq(other),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Self::Jobq(error) => {
                let mut message = error.to_string();
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    message.push_str(": ");
                    message.push_str(&cause.to_string());
                    source = cause.source();
                }
                (StatusCode::INTERNAL_SERVER_ERROR, message)
            }
            Self::BadRequest(message) => (StatusCode::BAD_REQUEST, message),
            Self::NotFound(message) => (StatusCode::NOT_FOUND, message),
            Self::Forbidden(message) => (StatusCode::FORBIDDEN, message),
        };
        (status, pages::failure(status, &message)).into_response()
    }
}

/// The query of the list and confirm pages and the form of a bulk action:
/// the filter as typed, paging, and what to do.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    pub(crate) queue: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) from: Option<String>,
    pub(crate) before: Option<String>,
    pub(crate) order: Option<String>,
    pub(crate) after: Option<String>,
    pub(crate) limit: Option<String>,
    pub(crate) action: Option<String>,
    pub(crate) notice: Option<String>,
    pub(crate) n: Option<String>,
    pub(crate) csrf: Option<String>,
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl Params {
    pub(crate) fn queue(&self) -> &str {
        given(&self.queue).unwrap_or_default()
    }
    pub(crate) fn status(&self) -> &str {
        given(&self.status).unwrap_or_default()
    }
    pub(crate) fn name(&self) -> &str {
        given(&self.name).unwrap_or_default()
    }
    pub(crate) fn key(&self) -> &str {
        // A key prefix is matched byte for byte: kept as typed.
        self.key.as_deref().unwrap_or_default()
    }
    pub(crate) fn from(&self) -> &str {
        given(&self.from).unwrap_or_default()
    }
    pub(crate) fn before(&self) -> &str {
        given(&self.before).unwrap_or_default()
    }
    pub(crate) fn oldest_first(&self) -> bool {
        given(&self.order) == Some("oldest")
    }

    /// The filter's fields as query pairs (for links and hidden fields).
    pub(crate) fn filter_pairs(&self) -> [(&'static str, &str); 6] {
        [
            ("queue", self.queue()),
            ("status", self.status()),
            ("name", self.name()),
            ("key", self.key()),
            ("from", self.from()),
            ("before", self.before()),
        ]
    }

    /// The filter and the order as a query string.
    pub(crate) fn filter_query(&self) -> String {
        let order = if self.oldest_first() { "oldest" } else { "" };
        format::query(self.filter_pairs().into_iter().chain([("order", order)]))
    }

    /// Whether any filter is set.
    pub(crate) fn filtered(&self) -> bool {
        self.filter_pairs().iter().any(|(_, v)| !v.is_empty())
    }

    pub(crate) fn filter(&self) -> Result<JobFilter, Failure> {
        let mut filter = JobFilter::new();
        if !self.queue().is_empty() {
            filter = filter.queue(self.queue());
        }
        if !self.status().is_empty() {
            let status = self
                .status()
                .parse::<JobStatus>()
                .map_err(Failure::BadRequest)?;
            filter = filter.status(status);
        }
        if !self.name().is_empty() {
            filter = filter.job_name(self.name());
        }
        if !self.key().is_empty() {
            filter = filter.key_prefix(self.key());
        }
        let from = time(self.from(), "from")?;
        let before = time(self.before(), "before")?;
        Ok(filter.created(from, before))
    }

    fn page(&self) -> Result<Page, Failure> {
        let limit = match given(&self.limit) {
            None => 50,
            Some(limit) => limit
                .parse::<u32>()
                .map_err(|_| Failure::BadRequest(format!("limit `{limit}` is not a number")))?,
        };
        let after = match given(&self.after) {
            None => None,
            Some(after) => Some(after.parse::<Cursor>().map_err(|_| {
                Failure::BadRequest(format!("cursor `{after}` is not one this dashboard made"))
            })?),
        };
        let order = if self.oldest_first() {
            Order::OldestFirst
        } else {
            Order::NewestFirst
        };
        Ok(Page::first(limit).order(order).after(after))
    }
}

/// A time of the filter: RFC 3339, or `YYYY-MM-DD[THH:MM[:SS]]` in UTC (what
/// a `datetime-local` field sends).
fn time(value: &str, field: &str) -> Result<Option<DateTime<Utc>>, Failure> {
    if value.is_empty() {
        return Ok(None);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        return Ok(Some(at.with_timezone(&Utc)));
    }
    let value_t = value.replacen(' ', "T", 1);
    for pattern in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(&value_t, pattern) {
            return Ok(Some(at.and_utc()));
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(day.and_hms_opt(0, 0, 0).map(|at| at.and_utc()));
    }
    Err(Failure::BadRequest(format!(
        "`{field}` must be a time such as 2026-12-01T20:00 (UTC) or RFC 3339, not `{value}`"
    )))
}

pub(crate) async fn overview(State(shared): AppState, req: Req) -> Result<Response, Failure> {
    let stats = shared.jobq.stats().await?;
    Ok(respond(&req, pages::overview(&shared.ctx(&req), &stats)))
}

pub(crate) async fn list(
    State(shared): AppState,
    req: Req,
    Query(params): Query<Params>,
) -> Result<Response, Failure> {
    let filter = params.filter()?;
    let page = params.page()?;
    let jobs = shared.jobq.list(&filter, page).await?;
    let now = Utc::now();
    Ok(respond(
        &req,
        pages::list(&shared.ctx(&req), &params, &jobs, now),
    ))
}

/// What a bulk action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Retry,
    Cancel,
}

impl Action {
    fn parse(params: &Params) -> Result<Self, Failure> {
        match given(&params.action) {
            Some("retry") => Ok(Self::Retry),
            Some("cancel") => Ok(Self::Cancel),
            _ => Err(Failure::BadRequest(
                "the action must be `retry` or `cancel`".into(),
            )),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Cancel => "cancel",
        }
    }

    /// The statuses the action changes.
    pub(crate) fn statuses(self) -> [JobStatus; 2] {
        match self {
            Self::Retry => [JobStatus::Failed, JobStatus::Cancelled],
            Self::Cancel => [JobStatus::Pending, JobStatus::Processing],
        }
    }
}

/// How many jobs `action` would change now.
async fn affected(jobq: &Jobq, filter: &JobFilter, action: Action) -> Result<u64, Failure> {
    let statuses = action.statuses();
    match filter.status {
        Some(status) if statuses.contains(&status) => Ok(jobq.count_where(filter).await?),
        Some(_) => Ok(0),
        None => {
            let mut total = 0;
            for status in statuses {
                total += jobq.count_where(&filter.clone().status(status)).await?;
            }
            Ok(total)
        }
    }
}

pub(crate) async fn confirm(
    State(shared): AppState,
    req: Req,
    Query(params): Query<Params>,
) -> Result<Response, Failure> {
    let action = Action::parse(&params)?;
    let filter = params.filter()?;
    let count = affected(&shared.jobq, &filter, action).await?;
    Ok(respond(
        &req,
        pages::confirm(&shared.ctx(&req), &params, action, count),
    ))
}

pub(crate) async fn bulk(
    State(shared): AppState,
    req: Req,
    headers: HeaderMap,
    Extension(host): Extension<auth::ServedHost>,
    form: Result<Form<Params>, FormRejection>,
) -> Result<Response, Failure> {
    let params = form.map(|Form(p)| p).unwrap_or_default();
    shared.guard(&headers, &host, params.csrf.as_deref())?;
    let action = Action::parse(&params)?;
    let filter = params.filter()?;
    let (changed, notice) = match action {
        Action::Retry => (shared.jobq.retry_where(&filter).await?, "retried"),
        Action::Cancel => (shared.jobq.cancel_where(&filter).await?, "cancelled"),
    };
    let query = params.filter_query();
    let sep = if query.is_empty() { "" } else { "&" };
    Ok(Redirect::to(&format!(
        "{}/list?{query}{sep}notice={notice}&n={changed}",
        req.base
    ))
    .into_response())
}

pub(crate) async fn job(
    State(shared): AppState,
    req: Req,
    Path(id): Path<i64>,
    Query(params): Query<Params>,
) -> Result<Response, Failure> {
    let Some(job) = shared.jobq.job(id).await? else {
        return Err(Failure::NotFound(format!("no job {id}")));
    };
    Ok(respond(
        &req,
        pages::job(&shared.ctx(&req), &job, given(&params.notice), Utc::now()),
    ))
}

/// The body of a one-button form.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TokenForm {
    csrf: Option<String>,
    queue: Option<String>,
}

/// What a job page's button asks for (the last part of its path).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobAction {
    Retry,
    Cancel,
}

/// `POST /job/{id}/retry` and `/job/{id}/cancel`: the single-job actions,
/// back to the job's page with what happened.
pub(crate) async fn act_on_job(
    State(shared): AppState,
    req: Req,
    Path((id, action)): Path<(i64, JobAction)>,
    headers: HeaderMap,
    Extension(host): Extension<auth::ServedHost>,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Result<Response, Failure> {
    let form = form.map(|Form(f)| f).unwrap_or_default();
    shared.guard(&headers, &host, form.csrf.as_deref())?;
    let (changed, notice) = match action {
        JobAction::Retry => (shared.jobq.retry(id).await?, "retried"),
        JobAction::Cancel => (shared.jobq.cancel(id).await?, "cancelled"),
    };
    let notice = if changed { notice } else { "unchanged" };
    Ok(Redirect::to(&format!("{}/job/{id}?notice={notice}", req.base)).into_response())
}

pub(crate) async fn queues(State(shared): AppState, req: Req) -> Result<Response, Failure> {
    let stats = shared.jobq.stats().await?;
    Ok(respond(&req, pages::queues(&shared.ctx(&req), &stats)))
}

/// `GET /workers`: the live workers and the jobs they publish.
pub(crate) async fn workers(State(shared): AppState, req: Req) -> Result<Response, Failure> {
    let workers = shared.jobq.workers().await?;
    let jobs = shared.jobq.job_kinds().await?;
    Ok(respond(
        &req,
        pages::workers(&shared.ctx(&req), &workers, &jobs),
    ))
}

/// What a queue's button asks for (the last part of its path).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QueueAction {
    Pause,
    Resume,
}

/// `POST /queues/pause` and `/queues/resume`, the queue named by the form:
/// back to the queues page.
pub(crate) async fn act_on_queue(
    State(shared): AppState,
    req: Req,
    Path(action): Path<QueueAction>,
    headers: HeaderMap,
    Extension(host): Extension<auth::ServedHost>,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Result<Response, Failure> {
    let form = form.map(|Form(f)| f).unwrap_or_default();
    shared.guard(&headers, &host, form.csrf.as_deref())?;
    let queue = given(&form.queue)
        .ok_or_else(|| Failure::BadRequest("which queue? the form names none".into()))?;
    match action {
        QueueAction::Pause => shared.jobq.pause(queue).await?,
        QueueAction::Resume => shared.jobq.resume(queue).await?,
    };
    Ok(Redirect::to(&format!("{}/queues", req.base)).into_response())
}
