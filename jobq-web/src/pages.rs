//! The templates (maud: every `(value)` is HTML-escaped).

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use jobq_runtime::{
    BatchInfo, JobInfo, JobPage, JobStatus, PublishedJob, QueueState, QueueStats, Schedule,
    ScheduleInfo, Stats, WorkerInfo, WorkflowInfo,
};
use maud::{DOCTYPE, Markup, html};

use crate::format;
use crate::params::{Action, Params};

/// What every page knows of the request and the dashboard.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// Where the dashboard is mounted (`""` at the root, `/jobs` nested).
    pub(crate) base: &'a str,
    pub(crate) csrf: &'a str,
    pub(crate) read_only: bool,
    pub(crate) refresh_ms: u128,
}

/// The pages of the top bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Overview,
    Jobs,
    Queues,
    Workers,
    Schedules,
}

/// A page: its title, what comes above the live part (the list's filter
/// form), and the live part that the auto-refresh swaps.
pub(crate) struct Page<'a> {
    ctx: Ctx<'a>,
    title: String,
    nav: Nav,
    before: Option<Markup>,
    pub(crate) live: Markup,
    refresh: bool,
}

const STATUSES: [JobStatus; 6] = [
    JobStatus::Pending,
    JobStatus::Blocked,
    JobStatus::Processing,
    JobStatus::Done,
    JobStatus::Failed,
    JobStatus::Cancelled,
];

pub(crate) fn layout(page: Page<'_>) -> Markup {
    let base = page.ctx.base;
    // Nested, the overview is the mount point itself: axum's `nest` does
    // not route its path with a trailing slash.
    let overview = if base.is_empty() { "/" } else { "" };
    let link = |nav: Nav, path: &str, label: &str| {
        html! {
            a.current[page.nav == nav] href={ (base) (path) } { (label) }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head_meta())
                meta name="color-scheme" content="light dark";
                title { (page.title) " · jobq" }
                link rel="stylesheet" href={ (base) "/assets/style.css" };
                script src={ (base) "/assets/app.js" } defer {}
            }
            body {
                header.top {
                    a.brand href={ (base) (overview) } { "jobq" }
                    nav {
                        (link(Nav::Overview, overview, "Overview"))
                        (link(Nav::Jobs, "/list", "Jobs"))
                        (link(Nav::Queues, "/queues", "Queues"))
                        (link(Nav::Workers, "/workers", "Workers"))
                        (link(Nav::Schedules, "/schedules", "Schedules"))
                    }
                    div.tools {
                        @if page.ctx.read_only { span.badge.ro { "read-only" } }
                        @if page.refresh {
                            span #refresh-status {}
                            button #refresh-toggle type="button" hidden { "Pause refresh" }
                        }
                    }
                }
                div.page {
                    h1 { (page.title) }
                    @if let Some(before) = page.before { (before) }
                    main #live data-refresh=[page.refresh.then_some(page.ctx.refresh_ms)] {
                        (page.live)
                    }
                }
            }
        }
    }
}

/// The `<meta>` lines every page's head starts with.
fn head_meta() -> Markup {
    html! {
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
    }
}

/// The page of a refused or failed request.
pub(crate) fn failure(status: StatusCode, message: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head_meta())
                title { (status.as_u16()) " · jobq" }
                style { "body{font:16px/1.5 system-ui,sans-serif;margin:2rem;max-width:60rem}" }
            }
            body {
                h1 { (status) }
                p.failure { (message) }
                p { a href="javascript:history.back()" { "Back" } }
            }
        }
    }
}

fn csrf(ctx: &Ctx<'_>) -> Markup {
    html! { input type="hidden" name="csrf" value=(ctx.csrf); }
}

fn status_badge(status: JobStatus) -> Markup {
    html! { span class={ "status " (status.as_str()) } { (status.as_str()) } }
}

fn list_link(ctx: &Ctx<'_>, pairs: &[(&str, &str)]) -> String {
    let query = format::query(pairs.iter().copied());
    if query.is_empty() {
        format!("{}/list", ctx.base)
    } else {
        format!("{}/list?{query}", ctx.base)
    }
}

/// A bar chart of the last hour: succeeded (green) and failed (red) per
/// minute, stacked, oldest on the left.
fn chart(succeeded: &[u64], failed: &[u64], width: u32, height: u32, class: &str) -> Markup {
    let minutes = succeeded.len().max(failed.len()).max(1);
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let top = (0..minutes)
        .map(|i| at(succeeded, i) + at(failed, i))
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = f64::from(width) / minutes as f64;
    let bar = (slot * 0.8).max(1.0);
    let scale = f64::from(height - 2) / top as f64;
    let label = format!(
        "last hour: {} succeeded, {} failed",
        succeeded.iter().sum::<u64>(),
        failed.iter().sum::<u64>()
    );
    html! {
        svg class=(class) viewBox={ "0 0 " (width) " " (height) } preserveAspectRatio="none"
            role="img" aria-label=(label) xmlns="http://www.w3.org/2000/svg" {
            line.axis x1="0" y1=(height) x2=(width) y2=(height) {}
            @for i in 0..minutes {
                @let (s, f) = (at(succeeded, i), at(failed, i));
                @let x = format!("{:.2}", i as f64 * slot);
                @let hs = s as f64 * scale;
                @let hf = f as f64 * scale;
                g {
                    title { (minutes - 1 - i) " min ago: " (s) " succeeded, " (f) " failed" }
                    rect.hit x=(x) y="0" width=(format!("{slot:.2}")) height=(height) {}
                    @if s > 0 {
                        rect.ok x=(x) y=(format!("{:.2}", f64::from(height) - hs))
                            width=(format!("{bar:.2}")) height=(format!("{hs:.2}")) {}
                    }
                    @if f > 0 {
                        rect.fail x=(x) y=(format!("{:.2}", f64::from(height) - hs - hf))
                            width=(format!("{bar:.2}")) height=(format!("{hf:.2}")) {}
                    }
                }
            }
        }
    }
}

/// A queue's state: `paused`, `served by N workers` or `no worker`.
fn state_badge(q: &QueueStats) -> Markup {
    let state = q.state();
    let class = match state {
        QueueState::Paused => "paused",
        QueueState::NoWorker => "noworker",
        _ => "served",
    };
    html! {
        span class={ "badge " (class) } data-workers=(q.workers) { (state) }
    }
}

/// Whether a lag stands out: not when none is due, nor under a second
/// (shown as `0s`): only a figure that is not zero does.
fn lagging(lag: Option<std::time::Duration>) -> bool {
    lag.is_some_and(|lag| lag.as_secs() > 0)
}

fn card(figure: &str, label: &str, value: &str, hot: bool, hint: &str) -> Markup {
    html! {
        div.card.hot[hot] data-figure=(figure) {
            div.label { (label) }
            div.value { (value) }
            div.hint { (hint) }
        }
    }
}

pub(crate) fn overview<'a>(ctx: &Ctx<'a>, stats: &Stats) -> Page<'a> {
    let queues = &stats.queues;
    let sum = |f: fn(&QueueStats) -> u64| queues.iter().map(f).sum::<u64>();
    let lag = queues.iter().filter_map(|q| q.oldest_available_age).max();
    let expired = sum(|q| q.expired_leases);
    let processing = sum(|q| q.processing);
    let mut succeeded = vec![0; jobq_runtime::STATS_MINUTES];
    let mut failed = vec![0; jobq_runtime::STATS_MINUTES];
    for q in queues {
        for (total, n) in succeeded.iter_mut().zip(&q.succeeded_per_minute) {
            *total += n;
        }
        for (total, n) in failed.iter_mut().zip(&q.failed_per_minute) {
            *total += n;
        }
    }
    let finished: u64 = succeeded.iter().chain(&failed).sum();
    let live = html! {
        section.cards {
            (card("available", "Available", &sum(|q| q.available).to_string(), false, "due now"))
            (card("scheduled", "Scheduled", &sum(|q| q.scheduled).to_string(), false, "due later"))
            (card("processing", "Processing", &processing.to_string(), processing > 0, "claimed, not finished"))
            (card("lag", "Oldest pending", &lag.map_or("–".into(), format::duration), lagging(lag), "queue lag"))
            (card("expired", "Expired leases", &expired.to_string(), expired > 0, "dead or stuck workers"))
            (card("failed", "Failed", &sum(|q| q.failed).to_string(), false, "for good, kept"))
        }
        section.panel {
            div.panel-head {
                h2 { "Throughput, last hour" }
                span.legend {
                    span.key.ok {} (succeeded.iter().sum::<u64>()) " succeeded "
                    span.key.fail {} (failed.iter().sum::<u64>()) " failed"
                }
            }
            @if finished == 0 {
                p.empty { "Nothing finished in the last hour." }
            } @else {
                (chart(&succeeded, &failed, 600, 120, "chart"))
                div.axis-labels { span { "60 min ago" } span { "now" } }
            }
        }
        section.panel {
            h2 { "Queues" }
            @if queues.is_empty() {
                p.empty { "No queues yet: nothing has been enqueued." }
            } @else {
                div.scroll {
                    table.queues {
                        thead { tr {
                            th { "Queue" } th { "State" }
                            th.num { "Available" } th.num { "Scheduled" } th.num { "Processing" }
                            th.num { "Expired leases" } th.num { "Lag" } th.num { "Failed" }
                            th.num { "Done" } th { "Last hour" }
                        } }
                        tbody {
                            @for q in queues {
                                tr data-queue=(q.queue) {
                                    td { a href=(list_link(ctx, &[("queue", &q.queue)])) { (q.queue) } }
                                    td { (state_badge(q)) }
                                    td.num data-figure="available" { (q.available) }
                                    td.num data-figure="scheduled" { (q.scheduled) }
                                    td.num.hot[q.processing > 0] data-figure="processing" { (q.processing) }
                                    td.num.hot[q.expired_leases > 0] data-figure="expired" { (q.expired_leases) }
                                    td.num.hot[lagging(q.oldest_available_age)] data-figure="lag" {
                                        (q.oldest_available_age.map_or("–".into(), format::duration))
                                    }
                                    td.num data-figure="failed" {
                                        @if q.failed > 0 {
                                            a href=(list_link(ctx, &[("queue", &q.queue), ("status", "failed")])) { (q.failed) }
                                        } @else { "0" }
                                    }
                                    td.num data-figure="done" { (q.done) }
                                    td.spark {
                                        (chart(&q.succeeded_per_minute, &q.failed_per_minute, 120, 24, "spark"))
                                        span.small { (q.succeeded_last_hour()) " ok · " (q.failed_last_hour()) " failed" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p.footnote { "Read " (format::time(stats.taken_at)) ". Finished counts stop at "
                (jobq_runtime::STATS_FINISHED_CAP) " per queue." }
        }
    };
    Page {
        ctx: *ctx,
        title: "Overview".into(),
        nav: Nav::Overview,
        before: None,
        live,
        refresh: true,
    }
}

fn notice_text(notice: &str, n: Option<&str>) -> Option<String> {
    let n = n.and_then(|n| n.parse::<u64>().ok());
    let jobs = |n: u64| {
        if n == 1 {
            "1 job".to_owned()
        } else {
            format!("{n} jobs")
        }
    };
    Some(match (notice, n) {
        ("retried", Some(n)) => format!("{} sent back to pending.", jobs(n)),
        ("cancelled", Some(n)) => format!("{} cancelled.", jobs(n)),
        ("retried", None) => "Sent back to pending.".into(),
        ("cancelled", None) => "Cancelled.".into(),
        ("unchanged", _) => "Nothing to do: the job was not in a state that allows it.".into(),
        _ => return None,
    })
}

pub(crate) fn list<'a>(
    ctx: &Ctx<'a>,
    params: &Params,
    jobs: &JobPage,
    now: DateTime<Utc>,
) -> Page<'a> {
    let status = params.status();
    let before = html! {
        form.filters method="get" action={ (ctx.base) "/list" } {
            label { "Queue" input type="text" name="queue" value=(params.queue()); }
            label { "Status"
                select name="status" {
                    option value="" { "any" }
                    @for s in STATUSES {
                        option value=(s.as_str()) selected[status == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            label { "Job name" input type="text" name="name" value=(params.name()); }
            label { "Key prefix" input type="text" name="key" value=(params.key()); }
            label { "Tag" input type="text" name="tag" value=(params.tag()); }
            label { "Enqueued from (UTC)" input type="datetime-local" step="1" name="from" value=(params.from()); }
            label { "before (UTC)" input type="datetime-local" step="1" name="before" value=(params.before()); }
            label { "Order"
                select name="order" {
                    option value="" { "newest first" }
                    option value="oldest" selected[params.oldest_first()] { "oldest first" }
                }
            }
            div.buttons {
                button type="submit" { "Filter" }
                a.button.quiet href={ (ctx.base) "/list" } { "Clear" }
            }
        }
    };
    let filter_query = params.filter_query();
    let sep = if filter_query.is_empty() { "" } else { "&" };
    let confirm = |action: &str| format!("{}/confirm?{filter_query}{sep}action={action}", ctx.base);
    let empty = match (status, params.filtered()) {
        ("", false) => "No jobs yet: nothing has been enqueued.".to_owned(),
        ("", true) => "No jobs match these filters.".to_owned(),
        (s, _)
            if params
                .filter_pairs()
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .count()
                == 1 =>
        {
            format!("No {s} jobs.")
        }
        (s, _) => format!("No {s} jobs match these filters."),
    };
    let live = html! {
        @if let Some(text) = params.notice.as_deref().and_then(|n| notice_text(n, params.n.as_deref())) {
            p.notice { (text) }
        }
        @if !ctx.read_only {
            div.bulk {
                span { "Every job these filters match:" }
                a.button #retry-all href=(confirm("retry")) { "Retry all…" }
                a.button.danger #cancel-all href=(confirm("cancel")) { "Cancel all…" }
            }
        }
        @if jobs.jobs.is_empty() {
            p.empty { (empty) }
        } @else {
            div.scroll {
                table.jobs {
                    thead { tr {
                        th.num { "ID" } th { "Queue" } th { "Job" } th { "Status" }
                        th.num { "Attempts" } th { "Run at / finished" } th { "Enqueued" }
                        th { "Key" } th { "Last error" }
                    } }
                    tbody {
                        @for job in &jobs.jobs {
                            tr data-id=(job.id) data-status=(job.status.as_str()) {
                                td.num { a href={ (ctx.base) "/job/" (job.id) } { (job.id) } }
                                td { (job.queue) }
                                td.mono { (job.job_name) }
                                td {
                                    (status_badge(job.status))
                                    @if let (Some(progress), JobStatus::Processing) = (&job.progress, job.status) {
                                        " " span.small.progress { (progress.to_string()) }
                                    }
                                }
                                td.num { (job.attempts) "/" (job.max_attempts) }
                                td title=(format::time(job.run_at)) { (format::relative(job.run_at, now)) }
                                td title=(format::time(job.created_at)) { (format::relative(job.created_at, now)) }
                                td.mono.clip { (job.idempotency_key.as_deref().unwrap_or("")) }
                                td.err.clip { (job.last_error.as_deref().map(first_line).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
            nav.paging {
                @if params.after.as_deref().is_some_and(|a| !a.is_empty()) {
                    a.button.quiet href=(list_link(ctx, &page_pairs(params, ""))) { "First page" }
                }
                @if let Some(next) = jobs.next {
                    a.button #next-page href=(list_link(ctx, &page_pairs(params, &next.to_string()))) { "Next page" }
                }
            }
        }
    };
    Page {
        ctx: *ctx,
        title: "Jobs".into(),
        nav: Nav::Jobs,
        before: Some(before),
        live,
        refresh: true,
    }
}

/// The filter, the order and `after` as query pairs.
fn page_pairs<'p>(params: &'p Params, after: &'p str) -> Vec<(&'static str, &'p str)> {
    let mut pairs = params.filter_pairs().to_vec();
    if params.oldest_first() {
        pairs.push(("order", "oldest"));
    }
    pairs.push(("after", after));
    pairs
}

/// The first line of an error, at most 160 characters.
fn first_line(error: &str) -> String {
    let line = error.lines().next().unwrap_or_default();
    if line.chars().count() > 160 {
        format!("{}…", line.chars().take(160).collect::<String>())
    } else {
        line.to_owned()
    }
}

pub(crate) fn confirm<'a>(ctx: &Ctx<'a>, params: &Params, action: Action, count: u64) -> Page<'a> {
    let [a, b] = action.statuses();
    let (verb, outcome) = match action {
        Action::Retry => ("Retry", "sent back to pending, runnable now"),
        Action::Cancel => ("Cancel", "cancelled (running ones are stopped)"),
    };
    let jobs = if count == 1 {
        "1 job".to_owned()
    } else {
        format!("{count} jobs")
    };
    let filters: Vec<_> = params
        .filter_pairs()
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let back = {
        let query = params.filter_query();
        if query.is_empty() {
            format!("{}/list", ctx.base)
        } else {
            format!("{}/list?{query}", ctx.base)
        }
    };
    let live = html! {
        section.panel.confirm {
            p {
                @if count == 0 {
                    "No " (a.as_str()) " or " (b.as_str()) " job matches: there is nothing to " (action.as_str()) "."
                } @else {
                    strong #affected { (jobs) } " (" (a.as_str()) " or " (b.as_str()) ") will be " (outcome) "."
                }
            }
            @if filters.is_empty() {
                p { "Filters: none: every job." }
            } @else {
                ul.filters-used {
                    @for (k, v) in &filters { li { span.k { (k) } " " code { (v) } } }
                }
            }
            p.small { "Jobs that match when you confirm are the ones acted on; the count may have moved since." }
            @if ctx.read_only {
                p.notice { "This dashboard is read-only." }
            } @else if count > 0 {
                form method="post" action={ (ctx.base) "/bulk" } {
                    (csrf(ctx))
                    input type="hidden" name="action" value=(action.as_str());
                    @for (k, v) in params.filter_pairs() {
                        @if !v.is_empty() { input type="hidden" name=(k) value=(v); }
                    }
                    @if params.oldest_first() { input type="hidden" name="order" value="oldest"; }
                    button.danger[action == Action::Cancel] #confirm type="submit" { (verb) " " (jobs) }
                    " "
                    a.button.quiet href=(back) { "Back" }
                }
            } @else {
                a.button.quiet href=(back) { "Back" }
            }
        }
    };
    Page {
        ctx: *ctx,
        title: format!("{verb} jobs"),
        nav: Nav::Jobs,
        before: None,
        live,
        refresh: false,
    }
}

fn when(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Markup {
    html! {
        @match at {
            Some(at) => { time datetime=(at.to_rfc3339()) { (format::time(at)) } span.small { " (" (format::relative(at, now)) ")" } },
            None => { span.none { "–" } },
        }
    }
}

/// A job's attempts, oldest first ([`JobInfo::timeline`]): one row each
/// with how it ended, the worker, when it started, how long it took and
/// what it said.
fn attempts(job: &JobInfo, now: DateTime<Utc>) -> Markup {
    let timeline = job.timeline();
    html! {
        @if timeline.is_empty() {
            p.empty { "No attempt yet." }
        } @else {
            @if job.history.len() >= jobq_runtime::HISTORY_CAP {
                p.small { "The latest " (jobq_runtime::HISTORY_CAP) " ended attempts are kept; older ones were dropped." }
            }
            div.scroll {
                table.attempts {
                    thead { tr { th.num { "#" } th { "Outcome" } th { "Worker" } th { "Started" } th.num { "Took" } th { "Error" } } }
                    tbody {
                        @for a in &timeline {
                            tr data-attempt=(a.attempt) data-outcome=(a.outcome) {
                                td.num { (a.attempt) }
                                td { span class={ "status " (attempt_class(&a.outcome)) } { (a.outcome) } }
                                td.mono { @if let Some(w) = &a.worker { (w) } @else { span.none { "–" } } }
                                td { (when(a.started_at, now)) }
                                td.num { @if let Some(took) = a.duration() { (format::took(took)) } @else { span.none { "–" } } }
                                td { @if let Some(error) = &a.error { pre.error { (error) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The badge colour of an attempt's outcome.
fn attempt_class(outcome: &str) -> &'static str {
    match outcome {
        "succeeded" => "done",
        "running" => "processing",
        "snooze" | "cancelled" => "cancelled",
        _ => "failed",
    }
}

pub(crate) fn job<'a>(
    ctx: &Ctx<'a>,
    job: &JobInfo,
    flow: Option<&(String, Vec<String>)>,
    notice: Option<&str>,
    now: DateTime<Utc>,
) -> Page<'a> {
    let run_at_label = match job.status {
        JobStatus::Pending => "Runs at",
        JobStatus::Processing => "Lease until",
        _ => "Run at",
    };
    let retryable = matches!(job.status, JobStatus::Failed | JobStatus::Cancelled);
    let cancellable = matches!(
        job.status,
        JobStatus::Pending | JobStatus::Processing | JobStatus::Blocked
    );
    let live = html! {
        @if let Some(text) = notice.and_then(|n| notice_text(n, None)) { p.notice { (text) } }
        section.panel {
            div.panel-head {
                h2 { span.mono { (job.job_name) } " " (status_badge(job.status)) }
                @if !ctx.read_only && (retryable || cancellable) {
                    div.actions {
                        @if retryable {
                            form method="post" action={ (ctx.base) "/job/" (job.id) "/retry" } {
                                (csrf(ctx)) button #retry type="submit" { "Retry" }
                            }
                        }
                        @if cancellable {
                            form method="post" action={ (ctx.base) "/job/" (job.id) "/cancel" } {
                                (csrf(ctx)) button.danger #cancel type="submit" { "Cancel" }
                            }
                        }
                    }
                }
            }
            dl.fields {
                dt { "ID" } dd { (job.id) }
                dt { "Queue" } dd { a href=(list_link(ctx, &[("queue", &job.queue)])) { (job.queue) } }
                dt { "Job name" } dd.mono { (job.job_name) }
                dt { "Status" } dd { (job.status.as_str()) }
                @if let Some((workflow, waiting)) = flow {
                    dt { "Workflow" } dd #workflow { a href=(workflow_link(ctx, workflow)) { (workflow) } }
                    dt { "Waiting on" } dd #waiting-on {
                        @if waiting.is_empty() { span.none { "–" } } @else { (waiting.join(", ")) }
                    }
                }
                @if let Some((batch, role)) = batch_of(job) {
                    dt { "Batch" } dd #batch { a href=(batch_link(ctx, batch)) { (batch) } " " span.small { (role) } }
                }
                dt { "Priority" } dd { (job.priority) }
                dt { "Attempts" } dd { (job.attempts) " of " (job.max_attempts) }
                dt { "Progress" } dd #progress { @if let Some(progress) = &job.progress { (progress.to_string()) } @else { span.none { "–" } } }
                dt { "Idempotency key" } dd.mono { @if let Some(key) = &job.idempotency_key { (key) } @else { span.none { "–" } } }
                dt { "Tags" } dd #tags {
                    @if job.tags.is_empty() { span.none { "–" } }
                    @for tag in &job.tags {
                        a.tag href=(list_link(ctx, &[("tag", tag)])) { (tag) } " "
                    }
                }
                dt { "Enqueued" } dd { (when(Some(job.created_at), now)) }
                dt { (run_at_label) } dd { (when(Some(job.run_at), now)) }
                dt { "Claimed" } dd { (when(job.claimed_at, now)) }
                dt { "Claimed by" } dd.mono { @if let Some(by) = &job.claimed_by { (by) } @else { span.none { "–" } } }
                dt { "Finished" } dd { (when(job.finished_at, now)) }
            }
        }
        section.panel {
            h2 { "Last error" }
            @if let Some(error) = &job.last_error {
                pre.error #last-error { (error) }
            } @else {
                p.empty { "No error: no attempt has failed." }
            }
        }
        @if let Some(metadata) = job.metadata_pretty() {
            section.panel {
                h2 { "Metadata" }
                pre.payload #metadata { (metadata) }
            }
        }
        @if let Some(output) = job.output_pretty() {
            section.panel {
                h2 { "Output" }
                pre.payload #output { (output) }
            }
        }
        section.panel #attempts {
            h2 { "Attempts" }
            (attempts(job, now))
        }
        section.panel {
            h2 { "Payload" }
            pre.payload #payload { (job.payload_pretty()) }
        }
    };
    Page {
        ctx: *ctx,
        title: format!("Job {}", job.id),
        nav: Nav::Jobs,
        before: None,
        live,
        refresh: true,
    }
}

pub(crate) fn queues<'a>(ctx: &Ctx<'a>, stats: &Stats) -> Page<'a> {
    let live = html! {
        section.panel {
            p.small { "A paused queue is claimed from by no worker, in any process, within one poll interval; running jobs finish. The pause is stored in the database. A queue's limit (set with jobq limit or Jobq::set_queue_limit) is the most of its jobs running at once across every worker; held back: due jobs waiting for a free slot. Blocked: jobs waiting behind the running jobs of their concurrency key (Enqueue::concurrency_key, #[job(concurrency_key = …)]). A queue's rate (set with jobq rate or Jobq::set_queue_rate) is the most of its jobs started per period across every worker, spread evenly; rate held: due jobs waiting for the rate's next start." }
            @if stats.queues.is_empty() {
                p.empty { "No queues yet: nothing has been enqueued or paused." }
            } @else {
                div.scroll {
                    table.queues {
                        thead { tr { th { "Queue" } th { "State" } th.num { "Pending" } th.num { "Processing" } th.num { "Limit" } th.num { "Held back" } th.num { "Blocked" } th.num { "Rate" } th.num { "Rate held" } th {} } }
                        tbody {
                            @for q in &stats.queues {
                                tr data-queue=(q.queue) {
                                    td { a href=(list_link(ctx, &[("queue", &q.queue)])) { (q.queue) } }
                                    td { (state_badge(q)) }
                                    td.num data-figure="pending" { (q.pending()) }
                                    td.num data-figure="processing" { (q.processing) }
                                    td.num data-figure="limit" { (q.limit.map_or("–".into(), |n| n.to_string())) }
                                    td.num.hot[q.held_back > 0] data-figure="held-back" { (q.held_back) }
                                    td.num data-figure="blocked" { (q.blocked) }
                                    td.num data-figure="rate" { (q.rate.map_or("–".into(), |r| r.to_string())) }
                                    td.num.hot[q.rate_held_back > 0] data-figure="rate-held-back" { (q.rate_held_back) }
                                    td.actions {
                                        @if !ctx.read_only {
                                            @let (path, label) = if q.paused { ("resume", "Resume") } else { ("pause", "Pause") };
                                            form method="post" action={ (ctx.base) "/queues/" (path) } {
                                                (csrf(ctx))
                                                input type="hidden" name="queue" value=(q.queue);
                                                button.danger[!q.paused] type="submit" data-action=(path) { (label) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !stats.key_rates.is_empty() {
            section.panel {
                h2 { "Concurrency-key rates" }
                p.small { "The most starts of a concurrency key's jobs per period, whatever their queue, across every worker (set with jobq rate --key or Jobq::set_key_rate); a job over it waits, pending, for the start the rate gives it." }
                div.scroll {
                    table.key-rates {
                        thead { tr { th { "Concurrency key" } th.num { "Rate" } } }
                        tbody {
                            @for (key, rate) in &stats.key_rates {
                                tr data-key=(key) {
                                    td.mono { (key) }
                                    td.num data-figure="key-rate" { (rate.to_string()) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let before = (!ctx.read_only).then(|| {
        html! {
            form.inline method="post" action={ (ctx.base) "/queues/pause" } {
                (csrf(ctx))
                label { "Pause a queue by name" input type="text" name="queue" required; }
                button type="submit" { "Pause" }
            }
        }
    });
    Page {
        ctx: *ctx,
        title: "Queues".into(),
        nav: Nav::Queues,
        before,
        live,
        refresh: true,
    }
}

/// The batch job `job` belongs to, from its metadata: its id, and
/// whether it is one of the batch's jobs or which callback.
fn batch_of(job: &JobInfo) -> Option<(&str, String)> {
    let metadata = job.metadata.as_ref()?;
    if let Some(batch) = metadata.get("jobq.batch").and_then(|b| b.as_str()) {
        return Some((batch, "(one of its jobs)".to_owned()));
    }
    let batch = metadata.get("jobq.callback_of").and_then(|b| b.as_str())?;
    let when = metadata
        .get("jobq.callback")
        .and_then(|w| w.as_str())
        .unwrap_or("?");
    Some((batch, format!("(its {when} callback)")))
}

/// The link to batch `id`'s page.
fn batch_link(ctx: &Ctx<'_>, id: &str) -> String {
    format!(
        "{}/batch?{}",
        ctx.base,
        format::query([("id", id)].iter().copied())
    )
}

/// A batch: open or closed, its jobs' counts, its callbacks.
pub(crate) fn batch<'a>(ctx: &Ctx<'a>, batch: &BatchInfo) -> Page<'a> {
    let live = html! {
        section.panel {
            p.small #batch-state { "Batch " span.mono { (batch.id) } ": " (batch.state()) ". Its finish and success callbacks run once it is closed and every job has ended (success only if every job succeeded); its failure callback at the first job that fails for good, is cancelled or is deleted." @if !batch.closed { " It is open: it finishes only once closed." } }
            dl.fields {
                dt { "Jobs" } dd #batch-jobs { (batch.jobs) }
                dt { "Unfinished" } dd { (batch.unfinished) }
                dt { "Succeeded" } dd { (batch.succeeded) }
                dt { "Failed" } dd { (batch.failed) }
                dt { "Cancelled" } dd { (batch.cancelled) }
                dt { "Deleted" } dd { (batch.deleted) }
            }
            div.scroll {
                table.batch {
                    thead { tr { th { "Callback" } th { "Job" } th { "Status" } } }
                    tbody {
                        @for callback in &batch.callbacks {
                            tr data-callback=(callback.when.as_str()) {
                                td { (callback.when.as_str()) }
                                td { a href={ (ctx.base) "/job/" (callback.id) } { (callback.id) } }
                                td { @if let Some(status) = callback.status { (status_badge(status)) } @else { span.none { "pruned" } } }
                            }
                        }
                    }
                }
            }
        }
    };
    Page {
        ctx: *ctx,
        title: format!("Batch {}", batch.id),
        nav: Nav::Jobs,
        before: None,
        live,
        refresh: true,
    }
}

/// The link to workflow `id`'s page.
fn workflow_link(ctx: &Ctx<'_>, id: &str) -> String {
    format!(
        "{}/workflow?{}",
        ctx.base,
        format::query([("id", id)].iter().copied())
    )
}

/// A workflow: each job with its status, what it runs after and what it
/// still waits on.
pub(crate) fn workflow<'a>(ctx: &Ctx<'a>, flow: &WorkflowInfo) -> Page<'a> {
    let state = flow.state();
    let list = |tasks: &[String]| {
        if tasks.is_empty() {
            "–".to_owned()
        } else {
            tasks.join(", ")
        }
    };
    let live = html! {
        section.panel {
            p.small #workflow-state { "Workflow " span.mono { (flow.id) } ": " (state) ". A job runs once every job it runs after has ended (succeeded, unless it runs anyway); one after a job that did not succeed is cancelled." }
            div.scroll {
                table.workflow {
                    thead { tr { th { "Task" } th { "Job" } th { "Status" } th { "After" } th { "Waiting on" } } }
                    tbody {
                        @for job in &flow.jobs {
                            tr data-task=(job.task) {
                                td { (job.task) }
                                td { a href={ (ctx.base) "/job/" (job.id) } { (job.id) } }
                                td { @if let Some(status) = job.status { (status_badge(status)) } @else { span.none { "pruned" } } }
                                td { (list(&job.depends_on)) }
                                td.waiting { (list(&job.waiting_on)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Page {
        ctx: *ctx,
        title: format!("Workflow {}", flow.id),
        nav: Nav::Jobs,
        before: None,
        live,
        refresh: true,
    }
}

/// `/schedules`: the cron schedules kept in the database, each with a
/// pause or resume button, an edit link and a remove button, and the form
/// that adds or changes one (filled with `editing`'s values).
pub(crate) fn schedules<'a>(
    ctx: &Ctx<'a>,
    schedules: &[ScheduleInfo],
    editing: Option<&Schedule>,
) -> Page<'a> {
    let live = html! {
        section.panel {
            p.small { "Cron schedules kept in the database (Jobq::put_schedule, jobq schedule put): every worker, in every process, enqueues each one's job at its ticks, one row per tick, from the next tick after a change. A paused schedule enqueues nothing until resumed. Schedules declared in code (WorkerBuilder::cron) live in their workers and are not listed." }
            @if schedules.is_empty() {
                p.empty { "No schedule is stored." }
            } @else {
                div.scroll {
                    table.schedules {
                        thead { tr { th { "Schedule" } th { "Job" } th { "Cron" } th { "Zone" } th { "Queue" } th { "State" } th { "Last tick" } th {} } }
                        tbody {
                            @for s in schedules {
                                tr data-schedule=(s.schedule.name) {
                                    td { (s.schedule.name) }
                                    td { (s.schedule.job_name) }
                                    td { code { (s.schedule.cron) } }
                                    td { (s.schedule.time_zone.as_deref().unwrap_or("UTC")) }
                                    td { (s.schedule.queue.as_deref().unwrap_or("–")) }
                                    td { @if s.paused { span.badge { "paused" } } @else { "running" } }
                                    td { (s.last_tick.map_or("–".into(), format::time)) }
                                    td.actions {
                                        @if !ctx.read_only {
                                            @let (path, label) = if s.paused { ("resume", "Resume") } else { ("pause", "Pause") };
                                            form method="post" action={ (ctx.base) "/schedules/" (path) } {
                                                (csrf(ctx))
                                                input type="hidden" name="schedule" value=(s.schedule.name);
                                                button.danger[!s.paused] type="submit" data-action=(path) { (label) }
                                            }
                                            a.button data-action="edit" href={ (ctx.base) "/schedules?" (format::query([("edit", s.schedule.name.as_str())].iter().copied())) "#put" } { "Edit" }
                                            form method="post" action={ (ctx.base) "/schedules/remove" } {
                                                (csrf(ctx))
                                                input type="hidden" name="schedule" value=(s.schedule.name);
                                                button.danger type="submit" data-action="remove" { "Remove" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    // Outside the live part: a refresh does not wipe what is being typed.
    let form = (!ctx.read_only).then(|| {
        html! {
            @let value = |f: fn(&Schedule) -> Option<String>| editing.and_then(f).unwrap_or_default();
            section.panel #put {
                h2 { @if let Some(s) = editing { "Change " span.mono { (s.name) } } @else { "Add a schedule" } }
                p.small { "Stored for every worker at once (a name already stored is changed, from its next tick). The job by name, with its payload as JSON; the cron expression has five fields, six with seconds first, or a nickname such as @daily; the time zone is an IANA name (UTC if empty)." }
                form.schedule-form method="post" action={ (ctx.base) "/schedules/put" } {
                    (csrf(ctx))
                    label { "Name " input name="schedule" required value=(value(|s| Some(s.name.clone()))); }
                    label { "Job " input name="job" required value=(value(|s| Some(s.job_name.clone()))); }
                    label { "Cron " input name="cron" required value=(value(|s| Some(s.cron.clone()))); }
                    label { "Time zone " input name="time_zone" placeholder="UTC" value=(value(|s| s.time_zone.clone())); }
                    label { "Queue " input name="queue" placeholder="the job's" value=(value(|s| s.queue.clone())); }
                    label { "Priority " input name="priority" placeholder="the job's" value=(value(|s| s.priority.map(|p| p.to_string()))); }
                    label { "Payload " input.mono name="payload" placeholder="{}" value=(value(|s| Some(s.payload.clone()))); }
                    button type="submit" data-action="put" { "Store" }
                }
            }
        }
    });
    Page {
        ctx: *ctx,
        title: "Schedules".into(),
        nav: Nav::Schedules,
        before: form,
        live,
        refresh: true,
    }
}

pub(crate) fn workers<'a>(
    ctx: &Ctx<'a>,
    workers: &[WorkerInfo],
    jobs: &[PublishedJob],
) -> Page<'a> {
    let now = workers.first().map(|w| w.taken_at);
    let live = html! {
        section.panel {
            h2 { "Live workers" }
            p.small { "Each worker registers itself when it starts, refreshes its row every presence interval (10 s by default) and removes it when it shuts down; a worker that stopped refreshing (killed, frozen, cut off) drops out three intervals after its last refresh." }
            @if workers.is_empty() {
                p.empty { "No live worker: jobs enqueued now wait until one starts." }
            } @else {
                div.scroll {
                    table.workers {
                        thead { tr {
                            th { "Worker" } th { "Host" } th.num { "Pid" } th { "Version" }
                            th { "Queues" } th.num { "Running" } th { "Started" } th { "Last seen" }
                        } }
                        tbody {
                            @for w in workers {
                                tr data-worker=(w.worker_id) {
                                    td.mono { (w.worker_id) }
                                    td { (w.host) }
                                    td.num { (w.pid) }
                                    td { (w.version) }
                                    td {
                                        @for (i, q) in w.queues.iter().enumerate() {
                                            @if i > 0 { ", " }
                                            a href=(list_link(ctx, &[("queue", &q.name)])) data-queue=(q.name) { (q.name) }
                                            " ×" (q.concurrency)
                                        }
                                    }
                                    td.num data-figure="running" { (w.running) }
                                    td title=(format::time(w.started_at)) { (format::relative(w.started_at, w.taken_at)) }
                                    td title=(format::time(w.last_seen)) data-figure="seen" { (format::relative(w.last_seen, w.taken_at)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        section.panel {
            h2 { "Jobs the workers run" }
            p.small { "As the live workers publish them: what " code { "jobq enqueue" } " takes as a job's defaults, and the fields it checks a payload against. Where workers define a job differently (a rolling deploy), the one that started last wins." }
            @if jobs.is_empty() {
                p.empty { "No job published." }
            } @else {
                div.scroll {
                    table.kinds {
                        thead { tr {
                            th { "Job" } th { "Queue" } th.num { "Priority" } th.num { "Attempts" }
                            th { "Timeout" } th { "Key" } th { "Fields" } th.num { "Workers" }
                        } }
                        tbody {
                            @for j in jobs {
                                @let k = &j.kind;
                                tr data-job=(k.name) {
                                    td.mono { (k.name) }
                                    td { (k.queue) }
                                    td.num { (k.priority) }
                                    td.num { (k.max_attempts) }
                                    td { (k.timeout.map_or("–".into(), format::duration)) }
                                    td.mono { (k.key_template.as_deref().unwrap_or("–")) }
                                    td.mono { (k.fields_text()) }
                                    td.num { (j.workers) }
                                }
                                @if !j.disagreeing.is_empty() {
                                    tr.disagree data-job=(k.name) {
                                        td colspan="8" {
                                            span.badge.paused { "differs" } " "
                                            "Defaults of " span.mono { (j.published_by) } " (started last) are used; "
                                            span.mono { (j.disagreeing.join(", ")) } " define it differently."
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(now) = now {
                p.footnote { "Read " (format::time(now)) "." }
            }
        }
    };
    Page {
        ctx: *ctx,
        title: "Workers".into(),
        nav: Nav::Workers,
        before: None,
        live,
        refresh: true,
    }
}
