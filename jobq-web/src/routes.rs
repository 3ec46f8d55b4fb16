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
use chrono::Utc;
use jobq_runtime::{JobFilter, Jobq};
use maud::Markup;
use serde::Deserialize;

use crate::auth;
use crate::pages::{self, Ctx};
use crate::params::{Action, Failure, Params, given};

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

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Self::Jobq(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                jobq_runtime::error_chain(&error),
            ),
            Self::BadRequest(message) => (StatusCode::BAD_REQUEST, message),
            Self::NotFound(message) => (StatusCode::NOT_FOUND, message),
            Self::Forbidden(message) => (StatusCode::FORBIDDEN, message),
        };
        (status, pages::failure(status, &message)).into_response()
    }
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
    // A job of a workflow: its workflow, and what it still waits on.
    let workflow_id = job
        .metadata
        .as_ref()
        .and_then(|m| m.get("jobq.workflow"))
        .and_then(|w| w.as_str());
    let flow = match workflow_id {
        Some(workflow_id) => shared.jobq.workflow(workflow_id).await?.and_then(|flow| {
            let waiting = flow.jobs.iter().find(|j| j.id == id)?.waiting_on.clone();
            Some((flow.id, waiting))
        }),
        None => None,
    };
    Ok(respond(
        &req,
        pages::job(
            &shared.ctx(&req),
            &job,
            flow.as_ref(),
            given(&params.notice),
            Utc::now(),
        ),
    ))
}

/// The query of `GET /workflow`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WorkflowQuery {
    id: Option<String>,
}

/// `GET /workflow?id=…`: one workflow, each job with what it waits on.
pub(crate) async fn workflow(
    State(shared): AppState,
    req: Req,
    Query(query): Query<WorkflowQuery>,
) -> Result<Response, Failure> {
    let id = query.id.unwrap_or_default();
    let Some(flow) = shared.jobq.workflow(&id).await? else {
        return Err(Failure::NotFound(format!("no workflow {id}")));
    };
    Ok(respond(&req, pages::workflow(&shared.ctx(&req), &flow)))
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

/// The query of `GET /schedules`: the schedule whose values fill the form.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SchedulesQuery {
    edit: Option<String>,
}

/// `GET /schedules[?edit=NAME]`: the cron schedules kept in the database,
/// and the form that stores one (filled with `NAME`'s values).
pub(crate) async fn schedules(
    State(shared): AppState,
    req: Req,
    Query(query): Query<SchedulesQuery>,
) -> Result<Response, Failure> {
    let schedules = shared.jobq.schedules().await?;
    let editing = given(&query.edit)
        .and_then(|name| schedules.iter().find(|s| s.schedule.name == name))
        .map(|s| s.schedule.clone());
    Ok(respond(
        &req,
        pages::schedules(&shared.ctx(&req), &schedules, editing.as_ref()),
    ))
}

/// What a schedule's form asks for (the last part of its path).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScheduleAction {
    Pause,
    Resume,
    Remove,
    /// Adds or changes the schedule the form describes.
    Put,
}

/// The body of a schedule's form: its name, and for `put` its values.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ScheduleForm {
    csrf: Option<String>,
    schedule: Option<String>,
    job: Option<String>,
    cron: Option<String>,
    time_zone: Option<String>,
    queue: Option<String>,
    priority: Option<String>,
    payload: Option<String>,
}

/// `POST /schedules/{pause,resume,remove,put}`, the schedule named by the
/// form (`put`: added or changed with the form's values, refused with
/// what is wrong): back to the schedules page.
pub(crate) async fn act_on_schedule(
    State(shared): AppState,
    req: Req,
    Path(action): Path<ScheduleAction>,
    headers: HeaderMap,
    Extension(host): Extension<auth::ServedHost>,
    form: Result<Form<ScheduleForm>, FormRejection>,
) -> Result<Response, Failure> {
    let form = form.map(|Form(f)| f).unwrap_or_default();
    shared.guard(&headers, &host, form.csrf.as_deref())?;
    let name = given(&form.schedule)
        .ok_or_else(|| Failure::BadRequest("which schedule? the form names none".into()))?;
    match action {
        ScheduleAction::Pause => {
            shared.jobq.pause_schedule(name).await?;
        }
        ScheduleAction::Resume => {
            shared.jobq.resume_schedule(name).await?;
        }
        ScheduleAction::Remove => {
            shared.jobq.remove_schedule(name).await?;
        }
        ScheduleAction::Put => {
            let missing = |what: &str| Failure::BadRequest(format!("the schedule needs a {what}"));
            let job = given(&form.job).ok_or_else(|| missing("job"))?;
            let cron = given(&form.cron).ok_or_else(|| missing("cron expression"))?;
            let mut schedule = jobq_runtime::Schedule::new(name, job, cron)
                .payload(given(&form.payload).unwrap_or("{}"));
            if let Some(zone) = given(&form.time_zone) {
                schedule = schedule.time_zone(zone);
            }
            if let Some(queue) = given(&form.queue) {
                schedule = schedule.queue(queue);
            }
            if let Some(priority) = given(&form.priority) {
                let priority = priority.parse().map_err(|_| {
                    Failure::BadRequest(format!(
                        "the priority {priority:?} is not a number from -32768 to 32767"
                    ))
                })?;
                schedule = schedule.priority(priority);
            }
            shared.jobq.put_schedule(schedule).await?;
        }
    }
    Ok(Redirect::to(&format!("{}/schedules", req.base)).into_response())
}

/// The query of `GET /batch`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct BatchQuery {
    id: Option<String>,
}

/// `GET /batch?id=…`: one batch, its counts and its callbacks.
pub(crate) async fn batch(
    State(shared): AppState,
    req: Req,
    Query(query): Query<BatchQuery>,
) -> Result<Response, Failure> {
    let id = query.id.unwrap_or_default();
    let Some(batch) = shared.jobq.batch(&id).await? else {
        return Err(Failure::NotFound(format!("no batch {id}")));
    };
    Ok(respond(&req, pages::batch(&shared.ctx(&req), &batch)))
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
