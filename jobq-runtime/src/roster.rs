//! The live workers and the jobs they publish, as
//! [`Jobq::workers`](crate::Jobq::workers) and
//! [`Jobq::job_kinds`](crate::Jobq::job_kinds) report them, and what a tool
//! enqueueing by name does with a published job: its defaults, the check of
//! a JSON payload against its fields, its idempotency key from its template.
//!
//! Each running [`Worker`](crate::Worker) keeps one row in `jobq_workers`
//! (see `worker/presence.rs`); its served queues and job kinds are JSON in
//! that row, in the wire forms below, so that a reader never needs the
//! application's Rust types.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobq_core::{JobRegistration, Registry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A worker running now, as it registered itself and last refreshed its
/// row (see [`Jobq::workers`](crate::Jobq::workers)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// Its id, as written to the `claimed_by` of the jobs it claims.
    pub worker_id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: i64,
    /// The version of jobq it runs.
    pub version: String,
    /// The queues it serves, with their concurrency.
    pub queues: Vec<ServedQueue>,
    /// Jobs it was running at its last refresh.
    pub running: u64,
    /// When it started (the database's clock; the application's on SQLite).
    pub started_at: DateTime<Utc>,
    /// When it last refreshed its row.
    pub last_seen: DateTime<Utc>,
    /// When its row expires unless refreshed again: past that it counts as
    /// gone (killed, frozen or cut off) and any worker deletes the row.
    pub expires_at: DateTime<Utc>,
    /// When this was read, by the same clock.
    pub taken_at: DateTime<Utc>,
    /// The jobs it can run, with their defaults, sorted by name.
    pub jobs: Vec<JobKind>,
}

impl WorkerInfo {
    /// How long ago it last refreshed its row, when this was read.
    pub fn last_seen_age(&self) -> Duration {
        (self.taken_at - self.last_seen)
            .to_std()
            .unwrap_or_default()
    }

    /// How long it has been running, when this was read.
    pub fn uptime(&self) -> Duration {
        (self.taken_at - self.started_at)
            .to_std()
            .unwrap_or_default()
    }

    /// Whether it serves `queue`.
    pub fn serves(&self, queue: &str) -> bool {
        self.queues.iter().any(|q| q.name == queue)
    }
}

/// A queue a worker serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ServedQueue {
    /// The queue.
    pub name: String,
    /// Most of its jobs the worker runs at once.
    pub concurrency: u64,
}

/// A job a worker can run, with the defaults of its `#[job]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobKind {
    /// The stored job name.
    pub name: String,
    /// Its default queue.
    pub queue: String,
    /// Its default priority.
    pub priority: i16,
    /// Its default attempt limit.
    pub max_attempts: u32,
    /// Its per-attempt timeout.
    pub timeout: Option<Duration>,
    /// Its idempotency key template, as written (`"welcome:{user_id}"`).
    pub key_template: Option<String>,
    /// How long its key keeps other jobs of that key out, if unique by
    /// state or period (`#[job(unique = …)]`).
    pub unique: Option<jobq_core::Unique>,
    /// Its concurrency key template, as written (`"sync:{customer_id}"`),
    /// and how many jobs of one key may run at once
    /// (`#[job(concurrency_key = …, concurrency = …)]`).
    pub concurrency_key: Option<(String, u32)>,
    /// The tags its jobs are stored with (`#[job(tags = [...])]`).
    pub tags: Vec<String>,
    /// Its payload's fields, in parameter order; `None` when the job did
    /// not say (a `Job` implemented by hand).
    pub fields: Option<Vec<KindField>>,
}

/// One field of a job's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindField {
    /// Its name in the JSON.
    pub name: String,
    /// Its Rust type, as written.
    pub type_name: String,
    /// Whether a payload must have it (an `Option` may be left out).
    pub required: bool,
}

/// A job known from the live workers (see
/// [`Jobq::job_kinds`](crate::Jobq::job_kinds)): its defaults as the
/// newest worker publishing it has them, and which workers disagree.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PublishedJob {
    /// The job and its defaults, as published by the worker that started
    /// last (the newest deploy wins during a rolling one).
    pub kind: JobKind,
    /// The worker whose definition that is.
    pub published_by: String,
    /// How many live workers publish a job of this name.
    pub workers: usize,
    /// The live workers whose definition differs (queue, priority,
    /// attempts, timeout, key template or fields), by worker id: their
    /// defaults lost to the newest.
    pub disagreeing: Vec<String>,
}

impl JobKind {
    /// The kind of a job registered in this process.
    pub(crate) fn of(registration: &JobRegistration) -> Self {
        Self {
            name: registration.name.to_owned(),
            queue: registration.queue.to_owned(),
            priority: registration.priority,
            max_attempts: registration.max_attempts,
            timeout: registration.timeout,
            key_template: registration.key_template.map(str::to_owned),
            unique: registration.unique,
            concurrency_key: registration
                .concurrency_key_template
                .map(|template| (template.to_owned(), registration.concurrency)),
            tags: registration.tags.iter().map(|t| (*t).to_owned()).collect(),
            fields: (registration.payload_fields)().map(|fields| {
                fields
                    .into_iter()
                    .map(|f| KindField {
                        name: f.name.to_owned(),
                        type_name: f.type_name.to_owned(),
                        required: f.required,
                    })
                    .collect()
            }),
        }
    }

    /// Its fields as `name: type`, an optional one's name followed by `?`.
    pub fn fields_text(&self) -> String {
        match &self.fields {
            None => "fields not published".to_owned(),
            Some(fields) if fields.is_empty() => "no fields".to_owned(),
            Some(fields) => fields
                .iter()
                .map(|f| {
                    let optional = if f.required { "" } else { "?" };
                    format!("{}{optional}: {}", f.name, f.type_name)
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Checks a payload against the published fields: an object, with no
    /// field the job does not have and every required one. Types are not
    /// checked (a worker that cannot decode a field fails the job, saying
    /// so). Nothing is checked when the fields were not published.
    pub(crate) fn check(&self, payload: &Value) -> Result<(), String> {
        let Some(fields) = &self.fields else {
            return Ok(());
        };
        let Some(object) = payload.as_object() else {
            return Err(format!(
                "the payload is {}, not a JSON object",
                json_kind(payload)
            ));
        };
        let unknown: Vec<&str> = object
            .keys()
            .filter(|key| !fields.iter().any(|f| &f.name == *key))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!("unknown field {}", quoted(&unknown)));
        }
        let missing: Vec<&str> = fields
            .iter()
            .filter(|f| f.required && !object.contains_key(&f.name))
            .map(|f| f.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing field {}", quoted(&missing)));
        }
        Ok(())
    }

    /// Whether `other` defines the job alike (everything but the name).
    fn same_definition(&self, other: &Self) -> bool {
        self == other
    }
}

/// `` `a`, `b` ``.
fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The idempotency key a `#[job(key = "…")]` template gives for `payload`,
/// as the job's own `format!` of its fields would: `{field}` is the
/// field's text for a string, an integer or a boolean (what `Display`
/// prints for them); `{{` and `}}` are braces. Refused, rather than
/// guessed, when the job's `Display` could print something else: a format
/// spec (`{n:>5}`), a float, `null`, an array or an object, or a field the
/// payload lacks.
pub(crate) fn render_key(template: &str, payload: &Value) -> Result<String, String> {
    let mut key = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                key.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                key.push('}');
            }
            '{' => {
                let mut placeholder = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    placeholder.push(c);
                }
                if !closed {
                    return Err("the template has an unclosed `{`".to_owned());
                }
                if placeholder.contains(':') {
                    return Err(format!(
                        "`{{{placeholder}}}` has a format spec, which only the job's Rust code applies"
                    ));
                }
                let name = placeholder.trim();
                let text = match payload.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Bool(b)) => b.to_string(),
                    Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
                    Some(other) => {
                        return Err(format!(
                            "field `{name}` is {}, whose text in the key only the job's Rust code knows",
                            json_kind(other)
                        ));
                    }
                    None => return Err(format!("the payload has no field `{name}`")),
                };
                key.push_str(&text);
            }
            '}' => return Err("the template has an unmatched `}`".to_owned()),
            c => key.push(c),
        }
    }
    Ok(key)
}

/// The JSON a worker publishes of its served queues.
pub(crate) fn queues_json(queues: &[ServedQueue]) -> String {
    serde_json::to_string(queues).unwrap_or_else(|_| "[]".to_owned())
}

/// The names of the queues in a worker's published `queues` JSON (none if
/// it cannot be read).
pub(crate) fn served_queue_names(queues_json: &str) -> Vec<String> {
    serde_json::from_str::<Vec<ServedQueue>>(queues_json)
        .unwrap_or_default()
        .into_iter()
        .map(|q| q.name)
        .collect()
}

/// The JSON a worker publishes of the jobs it can run: every job of its
/// registry.
pub(crate) fn jobs_json(registry: &Registry) -> String {
    let kinds: Vec<WireKind> = registry
        .iter()
        .map(|r| WireKind::from(JobKind::of(r)))
        .collect();
    serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".to_owned())
}

/// A live worker's row as [`WorkerInfo`]; JSON it cannot read (another
/// version's, damaged) counts as nothing published rather than failing
/// the whole list.
pub(crate) fn worker_info(record: WorkerRecord, taken_at: DateTime<Utc>) -> WorkerInfo {
    let queues: Vec<ServedQueue> = serde_json::from_str(&record.queues).unwrap_or_default();
    let kinds: Vec<WireKind> = serde_json::from_str(&record.jobs).unwrap_or_default();
    let mut jobs: Vec<JobKind> = kinds.into_iter().map(JobKind::from).collect();
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    WorkerInfo {
        worker_id: record.worker_id,
        host: record.host,
        pid: record.pid,
        version: record.version,
        queues,
        running: u64::try_from(record.running).unwrap_or(0),
        started_at: record.started_at,
        last_seen: record.last_seen,
        expires_at: record.expires_at,
        taken_at,
        jobs,
    }
}

/// The union of the jobs `workers` publish, by name: where two define a
/// job differently, the one that started last wins (during a rolling
/// deploy, the new code's defaults), and the others are named.
pub(crate) fn published_jobs(workers: &[WorkerInfo]) -> Vec<PublishedJob> {
    // Newest first, so the first definition of a name is the winner; ties
    // broken by worker id, so the answer does not depend on row order.
    let mut newest_first: Vec<&WorkerInfo> = workers.iter().collect();
    newest_first.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| b.worker_id.cmp(&a.worker_id))
    });
    let mut known: BTreeMap<&str, PublishedJob> = BTreeMap::new();
    for worker in newest_first {
        for kind in &worker.jobs {
            match known.get_mut(kind.name.as_str()) {
                None => {
                    known.insert(
                        &kind.name,
                        PublishedJob {
                            kind: kind.clone(),
                            published_by: worker.worker_id.clone(),
                            workers: 1,
                            disagreeing: Vec::new(),
                        },
                    );
                }
                Some(job) => {
                    job.workers += 1;
                    if !job.kind.same_definition(kind)
                        && !job.disagreeing.contains(&worker.worker_id)
                    {
                        job.disagreeing.push(worker.worker_id.clone());
                    }
                }
            }
        }
    }
    known.into_values().collect()
}

/// The wire form of a [`JobKind`] in `jobq_workers.jobs`.
#[derive(Debug, Serialize, Deserialize)]
struct WireKind {
    name: String,
    queue: String,
    #[serde(default)]
    priority: i16,
    max_attempts: u32,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    key: Option<String>,
    /// [`Unique::state_bits`](jobq_core::Unique::state_bits), if unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unique_states: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unique_period_ms: Option<u64>,
    /// The concurrency key template, if any, and its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(default)]
    fields: Option<Vec<WireField>>,
}

/// The wire form of a [`KindField`].
#[derive(Debug, Serialize, Deserialize)]
struct WireField {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    required: bool,
}

impl From<JobKind> for WireKind {
    fn from(kind: JobKind) -> Self {
        Self {
            name: kind.name,
            queue: kind.queue,
            priority: kind.priority,
            max_attempts: kind.max_attempts,
            timeout_ms: kind
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            key: kind.key_template,
            unique_states: kind.unique.map(|u| u.state_bits()),
            unique_period_ms: kind
                .unique
                .and_then(|u| u.period())
                .map(|p| u64::try_from(p.as_millis()).unwrap_or(u64::MAX)),
            concurrency: kind.concurrency_key.as_ref().map(|&(_, limit)| limit),
            concurrency_key: kind.concurrency_key.map(|(template, _)| template),
            tags: kind.tags,
            fields: kind.fields.map(|fields| {
                fields
                    .into_iter()
                    .map(|f| WireField {
                        name: f.name,
                        type_name: f.type_name,
                        required: f.required,
                    })
                    .collect()
            }),
        }
    }
}

impl From<WireKind> for JobKind {
    fn from(wire: WireKind) -> Self {
        Self {
            name: wire.name,
            queue: wire.queue,
            priority: wire.priority,
            max_attempts: wire.max_attempts,
            timeout: wire.timeout_ms.map(Duration::from_millis),
            key_template: wire.key,
            unique: wire.unique_states.map(|states| {
                jobq_core::Unique::from_parts(
                    states,
                    wire.unique_period_ms.map(Duration::from_millis),
                )
            }),
            concurrency_key: wire
                .concurrency_key
                .map(|template| (template, wire.concurrency.unwrap_or(1))),
            tags: wire.tags,
            fields: wire.fields.map(|fields| {
                fields
                    .into_iter()
                    .map(|f| KindField {
                        name: f.name,
                        type_name: f.type_name,
                        required: f.required,
                    })
                    .collect()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(name: &str, queue: &str) -> JobKind {
        JobKind {
            name: name.to_owned(),
            queue: queue.to_owned(),
            priority: 0,
            max_attempts: 5,
            timeout: None,
            key_template: Some("welcome:{user_id}".to_owned()),
            unique: None,
            concurrency_key: None,
            tags: Vec::new(),
            fields: Some(vec![
                KindField {
                    name: "user_id".to_owned(),
                    type_name: "u64".to_owned(),
                    required: true,
                },
                KindField {
                    name: "locale".to_owned(),
                    type_name: "Option<String>".to_owned(),
                    required: false,
                },
            ]),
        }
    }

    fn worker(id: &str, started: i64, jobs: Vec<JobKind>) -> WorkerInfo {
        let at = DateTime::from_timestamp(started, 0).unwrap();
        WorkerInfo {
            worker_id: id.to_owned(),
            host: "h".to_owned(),
            pid: 1,
            version: "0".to_owned(),
            queues: Vec::new(),
            running: 0,
            started_at: at,
            last_seen: at,
            expires_at: at,
            taken_at: at,
            jobs,
        }
    }

    #[test]
    fn a_payload_is_checked_for_unknown_and_missing_fields() {
        let k = kind("send_welcome", "mail");
        assert_eq!(k.check(&json!({"user_id": 42})), Ok(()));
        assert_eq!(k.check(&json!({"user_id": 42, "locale": "en"})), Ok(()));
        let unknown = k.check(&json!({"user_id": 42, "usr": 1})).unwrap_err();
        assert!(unknown.contains("unknown field `usr`"), "{unknown}");
        let missing = k.check(&json!({"locale": "en"})).unwrap_err();
        assert!(missing.contains("missing field `user_id`"), "{missing}");
        let not_object = k.check(&json!([42])).unwrap_err();
        assert!(not_object.contains("an array"), "{not_object}");
        let unpublished = JobKind {
            fields: None,
            ..k.clone()
        };
        assert_eq!(unpublished.check(&json!([1])), Ok(()));
    }

    #[test]
    fn a_key_is_rendered_as_display_would_or_refused() {
        let payload = json!({"user_id": 42, "name": "ann", "ok": true, "f": 1.5, "n": null});
        assert_eq!(
            render_key("welcome:{user_id}", &payload).as_deref(),
            Ok("welcome:42")
        );
        assert_eq!(
            render_key("{name}-{ok}-{{x}}", &payload).as_deref(),
            Ok("ann-true-{x}")
        );
        assert_eq!(render_key("{ user_id }", &payload).as_deref(), Ok("42"));
        for refused in ["{f}", "{n}", "{user_id:>5}", "{absent}", "{open", "close}"] {
            assert!(render_key(refused, &payload).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_newest_worker_wins_a_disagreement_and_the_others_are_named() {
        let old = worker("old", 100, vec![kind("send_welcome", "default")]);
        let new = worker("new", 200, vec![kind("send_welcome", "mail")]);
        let same = worker("same", 150, vec![kind("send_welcome", "mail")]);
        let jobs = published_jobs(&[old, same, new]);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].kind.queue, "mail");
        assert_eq!(jobs[0].published_by, "new");
        assert_eq!(jobs[0].workers, 3);
        assert_eq!(jobs[0].disagreeing, ["old"]);
    }

    #[test]
    fn a_kind_round_trips_through_its_wire_form() {
        let k = JobKind {
            timeout: Some(Duration::from_secs(30)),
            ..kind("send_welcome", "mail")
        };
        let json = serde_json::to_string(&[WireKind::from(k.clone())]).unwrap();
        let back: Vec<WireKind> = serde_json::from_str(&json).unwrap();
        let back: Vec<JobKind> = back.into_iter().map(JobKind::from).collect();
        assert_eq!(back, [k]);
    }
}

/// A live worker's row as read (see [`BackendStore::live_workers`]).
#[derive(Debug, Clone)]
pub(crate) struct WorkerRecord {
    pub(crate) worker_id: String,
    pub(crate) host: String,
    pub(crate) pid: i64,
    pub(crate) version: String,
    pub(crate) queues: String,
    pub(crate) jobs: String,
    pub(crate) running: i64,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) last_seen: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
}
