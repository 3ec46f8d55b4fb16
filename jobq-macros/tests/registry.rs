//! `#[job]` fns register with the right settings and run through their registration.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jobq_runtime::{
    DispatchError, Job, JobContext, JobMeta, Registry, RetryPolicy, State, States, job,
};

/// Records what the handlers saw.
#[derive(Debug, Default)]
struct Mailbox {
    sent: Mutex<Vec<String>>,
}

/// An error a handler can return.
#[derive(Debug)]
struct MailError;

impl fmt::Display for MailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mail server refused")
    }
}

/// Sends the welcome mail.
#[job(
    queue = "mail",
    priority = -5,
    max_attempts = 8,
    timeout = "30s",
    backoff = exponential("2s", "10m"),
    key = "welcome:{user_id}:{{{locale}}}"
)]
async fn send_welcome(
    ctx: JobContext,
    mailbox: State<Mailbox>,
    user_id: u64,
    locale: String,
) -> Result<(), MailError> {
    if locale == "xx" {
        return Err(MailError);
    }
    mailbox
        .sent
        .lock()
        .unwrap()
        .push(format!("{} {user_id} {locale}", ctx.id()));
    Ok(())
}

static NIGHTLY_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Rebuilds the nightly report.
#[job(name = "reports.nightly", retry = ["1s", "30s", "5m"])]
async fn nightly_report() {
    NIGHTLY_RUNS.fetch_add(1, Ordering::SeqCst);
}

static COUNTED: AtomicUsize = AtomicUsize::new(0);

#[job(queue = "counters", backoff = fixed("5s"))]
async fn count_by(ctx: &JobContext, by: usize) -> Result<(), String> {
    assert_eq!(ctx.attempt(), 1);
    COUNTED.fetch_add(by, Ordering::SeqCst);
    Ok(())
}

fn context(name: &str) -> JobContext {
    JobContext::detached(JobMeta::new(7, name, "test"))
}

fn states_with_mailbox() -> States {
    let mut states = States::default();
    states.insert(Mailbox::default());
    states
}

#[test]
fn every_job_is_registered_under_its_name() {
    let registry = Registry::from_inventory().unwrap();
    let names: Vec<_> = registry
        .iter()
        .map(|registration| registration.name)
        .collect();
    assert_eq!(
        names,
        [
            "count_by",
            "fields.publish",
            "reports.nightly",
            "send_welcome",
            "sync_customer"
        ]
    );
}

#[test]
fn the_attribute_keys_become_the_registered_settings() {
    let registry = Registry::from_inventory().unwrap();
    let welcome = registry.get("send_welcome").unwrap();
    assert_eq!(welcome.queue, "mail");
    assert_eq!(welcome.priority, -5);
    assert_eq!(welcome.max_attempts, 8);
    assert_eq!(welcome.timeout, Some(Duration::from_secs(30)));
    assert_eq!(
        (welcome.retry_policy)(),
        RetryPolicy::exponential(Duration::from_secs(2), Duration::from_secs(600))
    );
    assert_eq!(welcome.definition.function, "send_welcome");
    assert_eq!(welcome.definition.module_path, "registry");
    let states: Vec<_> = (welcome.states)().iter().map(|s| s.type_name).collect();
    assert_eq!(states, [std::any::type_name::<Mailbox>()]);
}

/// A payload with an optional field and a raw identifier.
#[job(name = "fields.publish", key = "{type}-{ n }")]
async fn publish(n: u64, r#type: String, note: Option<Vec<u8>>, pair: (u8, bool)) {
    let _ = (n, r#type, note, pair);
}

/// The key template as written and each payload field (its JSON name, its
/// type as written, whether it may be missing) are registered, for tools
/// that enqueue by name and JSON.
#[test]
fn the_key_template_and_the_payload_fields_are_registered() {
    let registry = Registry::from_inventory().unwrap();
    let publish = registry.get("fields.publish").unwrap();
    assert_eq!(publish.key_template, Some("{type}-{ n }"));
    assert_eq!(Publish::KEY_TEMPLATE, publish.key_template);
    let fields: Vec<(&str, &str, bool)> = (publish.payload_fields)()
        .unwrap()
        .iter()
        .map(|f| (f.name, f.type_name, f.required))
        .collect();
    assert_eq!(
        fields,
        [
            ("n", "u64", true),
            ("type", "String", true),
            ("note", "Option<Vec<u8>>", false),
            ("pair", "(u8, bool)", true),
        ]
    );
    // The names are those serde stores.
    let json = serde_json::to_value(Publish::new(1, "t".into(), None, (2, true))).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for (name, ..) in &fields {
        assert!(keys.contains(name), "{name} not in {keys:?}");
    }
    let welcome = registry.get("send_welcome").unwrap();
    assert_eq!(welcome.key_template, Some("welcome:{user_id}:{{{locale}}}"));
    let nightly = registry.get("reports.nightly").unwrap();
    assert_eq!(nightly.key_template, None);
    assert_eq!((nightly.payload_fields)(), Some(Vec::new()));
}

#[test]
fn keys_that_are_not_given_keep_the_trait_defaults() {
    let registry = Registry::from_inventory().unwrap();
    let nightly = registry.get("reports.nightly").unwrap();
    assert_eq!(nightly.queue, jobq_runtime::DEFAULT_QUEUE);
    assert_eq!(nightly.priority, 0);
    assert_eq!(nightly.max_attempts, jobq_runtime::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(nightly.timeout, None);
    assert_eq!(nightly.concurrency_key_template, None);
    assert_eq!(nightly.concurrency, 1);
    assert!((nightly.states)().is_empty());

    let counter = registry.get("count_by").unwrap();
    assert_eq!(counter.queue, "counters");
    assert_eq!(
        (counter.retry_policy)(),
        RetryPolicy::fixed(Duration::from_secs(5))
    );
}

#[test]
fn an_explicit_retry_list_becomes_a_schedule() {
    let nightly = Registry::from_inventory()
        .unwrap()
        .get("reports.nightly")
        .unwrap();
    assert_eq!(
        (nightly.retry_policy)().plan(5),
        [1, 30, 300, 300].map(Duration::from_secs)
    );
}

#[test]
fn name_pins_the_stored_name_and_the_fn_keeps_its_own() {
    assert_eq!(NightlyReport::NAME, "reports.nightly");
    let nightly = Registry::from_inventory()
        .unwrap()
        .get("reports.nightly")
        .unwrap();
    assert_eq!(nightly.definition.function, "nightly_report");
    assert!(
        Registry::from_inventory()
            .unwrap()
            .get("nightly_report")
            .is_none()
    );
}

#[test]
fn the_payload_struct_has_the_payload_parameters_in_order() {
    let job = SendWelcome::new(42, "en".into());
    assert_eq!(job.user_id, 42);
    assert_eq!(job.locale, "en");
    let json = serde_json::to_string(&job).unwrap();
    assert_eq!(json, r#"{"user_id":42,"locale":"en"}"#);
    let back: SendWelcome = serde_json::from_str(&json).unwrap();
    assert_eq!((back.user_id, back.locale), (42, "en".to_owned()));
}

#[test]
fn a_job_without_payload_parameters_is_an_empty_json_object() {
    assert_eq!(serde_json::to_string(&NightlyReport::new()).unwrap(), "{}");
    let _: NightlyReport = serde_json::from_str("{}").unwrap();
}

#[test]
fn the_key_template_renders_from_the_payload_fields() {
    let job = SendWelcome::new(42, "en".into());
    assert_eq!(job.idempotency_key().as_deref(), Some("welcome:42:{en}"));
    assert_eq!(NightlyReport::new().idempotency_key(), None);
}

/// At most four syncs of one customer at a time.
#[job(concurrency_key = "sync:{customer_id}", concurrency = 4)]
async fn sync_customer(customer_id: u64) {
    let _ = customer_id;
}

#[test]
fn the_concurrency_key_and_limit_are_registered_and_the_key_renders() {
    let registry = Registry::from_inventory().unwrap();
    let sync = registry.get("sync_customer").unwrap();
    assert_eq!(sync.concurrency_key_template, Some("sync:{customer_id}"));
    assert_eq!(sync.concurrency, 4);
    assert_eq!(
        SyncCustomer::CONCURRENCY_KEY_TEMPLATE,
        sync.concurrency_key_template
    );
    assert_eq!(sync.key_template, None);
    let job = SyncCustomer::new(42);
    assert_eq!(job.concurrency_key().as_deref(), Some("sync:42"));
    assert_eq!(job.idempotency_key(), None);
    assert_eq!(SendWelcome::new(42, "en".into()).concurrency_key(), None);
}

#[tokio::test]
async fn running_a_registration_decodes_the_payload_and_calls_the_fn() {
    let registry = Registry::from_inventory().unwrap();
    let welcome = registry.get("send_welcome").unwrap();
    let states = states_with_mailbox();
    let json = serde_json::to_string(&SendWelcome::new(42, "en".into())).unwrap();
    let future = (welcome.run)(context("send_welcome"), &json, &states).unwrap();
    future.await.unwrap();
    let mailbox: State<Mailbox> = states.get().unwrap();
    assert_eq!(*mailbox.sent.lock().unwrap(), ["7 42 en"]);
}

#[tokio::test]
async fn a_job_taking_a_context_reference_and_no_state_runs() {
    let counter = Registry::from_inventory().unwrap().get("count_by").unwrap();
    let before = COUNTED.load(Ordering::SeqCst);
    let future = (counter.run)(context("count_by"), r#"{"by":3}"#, &States::default()).unwrap();
    future.await.unwrap();
    assert_eq!(COUNTED.load(Ordering::SeqCst), before + 3);
}

#[tokio::test]
async fn a_job_without_parameters_runs_from_an_empty_object() {
    let nightly = Registry::from_inventory()
        .unwrap()
        .get("reports.nightly")
        .unwrap();
    let before = NIGHTLY_RUNS.load(Ordering::SeqCst);
    (nightly.run)(context("reports.nightly"), "{}", &States::default())
        .unwrap()
        .await
        .unwrap();
    assert_eq!(NIGHTLY_RUNS.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn an_error_returned_by_the_fn_becomes_the_attempt_error() {
    let welcome = Registry::from_inventory()
        .unwrap()
        .get("send_welcome")
        .unwrap();
    let json = r#"{"user_id":1,"locale":"xx"}"#;
    let error = (welcome.run)(context("send_welcome"), json, &states_with_mailbox())
        .unwrap()
        .await
        .unwrap_err();
    assert_eq!(error.message(), "mail server refused");
}

#[test]
fn a_missing_state_is_a_dispatch_error_naming_the_type() {
    let welcome = Registry::from_inventory()
        .unwrap()
        .get("send_welcome")
        .unwrap();
    let json = r#"{"user_id":1,"locale":"en"}"#;
    let Err(error) = (welcome.run)(context("send_welcome"), json, &States::default()) else {
        panic!("a job whose state is missing must not start");
    };
    match error {
        DispatchError::MissingState { job, type_name } => {
            assert_eq!(job, "send_welcome");
            assert_eq!(type_name, std::any::type_name::<Mailbox>());
        }
        other => panic!("expected MissingState, got {other:?}"),
    }
}

#[test]
fn a_bad_payload_is_a_dispatch_error_naming_the_job() {
    let nightly = Registry::from_inventory()
        .unwrap()
        .get("reports.nightly")
        .unwrap();
    let Err(error) = (nightly.run)(context("reports.nightly"), "[1, 2]", &States::default()) else {
        panic!("a bad payload must not start the job");
    };
    assert!(
        matches!(
            error,
            DispatchError::Payload {
                job: "reports.nightly",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("`reports.nightly`"), "{error}");
}

#[tokio::test]
async fn the_fn_stays_callable_as_written() {
    let before = COUNTED.load(Ordering::SeqCst);
    count_by(&context("count_by"), 2).await.unwrap();
    assert_eq!(COUNTED.load(Ordering::SeqCst), before + 2);
}
