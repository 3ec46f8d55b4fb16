//! What a request asks for, parsed from its query or form: the filter as
//! typed, paging, the bulk action — and why a request did not go through.
//! Below the pages and the routes: both read these, neither is read here.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use jobq_runtime::{Cursor, JobFilter, JobStatus, Order, Page};
use serde::Deserialize;

use crate::format;

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

/// The query of the list and confirm pages and the form of a bulk action:
/// the filter as typed, paging, and what to do.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Params {
    pub(crate) queue: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) tag: Option<String>,
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

pub(crate) fn given(value: &Option<String>) -> Option<&str> {
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
    pub(crate) fn tag(&self) -> &str {
        given(&self.tag).unwrap_or_default()
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
    pub(crate) fn filter_pairs(&self) -> [(&'static str, &str); 7] {
        [
            ("queue", self.queue()),
            ("status", self.status()),
            ("name", self.name()),
            ("key", self.key()),
            ("tag", self.tag()),
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
        if !self.tag().is_empty() {
            filter = filter.tag(self.tag());
        }
        let from = time(self.from(), "from")?;
        let before = time(self.before(), "before")?;
        Ok(filter.created(from, before))
    }

    pub(crate) fn page(&self) -> Result<Page, Failure> {
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

/// What a bulk action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Retry,
    Cancel,
}

impl Action {
    pub(crate) fn parse(params: &Params) -> Result<Self, Failure> {
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
