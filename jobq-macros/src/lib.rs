//! The `#[job]` attribute macro of jobq: an `async fn` becomes a typed,
//! registered background job.
//!
//! Use it through `jobq_runtime::job`; the generated code refers to
//! `jobq_runtime` (or the crate named by `crate = …`), never to this crate.
//! The full reference is on [`macro@job`].
//!
//! The crate is three steps, like tokio-macros and thiserror: `parse`
//! reads the arguments and checks the signature into a model, collecting
//! every problem before it reports them together; `expand` turns the model
//! into the payload struct, its `Job` impl and its `inventory` registration.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// Turns an `async fn` into a jobq job: a payload struct to enqueue, and a
/// handler the worker finds by the job's name.
///
/// ```
/// use std::fmt;
/// use jobq_runtime::{Job, JobContext, Registry, State, job};
///
/// struct Mailer;
///
/// #[derive(Debug)]
/// struct MailError;
///
/// impl fmt::Display for MailError {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("the mail server refused")
///     }
/// }
///
/// /// Sends the welcome mail.
/// #[job(queue = "mail", max_attempts = 8, timeout = "30s", key = "welcome:{user_id}")]
/// async fn send_welcome(
///     ctx: JobContext,
///     mailer: State<Mailer>,
///     user_id: u64,
///     locale: String,
/// ) -> Result<(), MailError> {
///     let _ = (ctx.attempt(), &*mailer, user_id, locale);
///     Ok(())
/// }
///
/// fn main() {
///     // The payload struct: the fn's payload parameters, in order.
///     let job = SendWelcome::new(42, "en".into());
///     assert_eq!(serde_json::to_string(&job).unwrap(), r#"{"user_id":42,"locale":"en"}"#);
///     assert_eq!(job.idempotency_key().as_deref(), Some("welcome:42"));
///     assert_eq!((SendWelcome::NAME, SendWelcome::QUEUE), ("send_welcome", "mail"));
///
///     // The registration a worker runs it by.
///     let registry = Registry::from_inventory().unwrap();
///     assert_eq!(registry.get("send_welcome").unwrap().max_attempts, 8);
/// }
/// ```
///
/// # Parameters
///
/// Each parameter of the fn is one of:
///
/// - **`JobContext` or `&JobContext`** (matched by the type's last path
///   segment): the running attempt — job id, attempt number, idempotency key,
///   cancellation, lease extension. At most one.
/// - **`State<T>`** (last segment `State`): a value the worker was given with
///   `.state(value)`. The worker refuses to build if a registered job needs a
///   `T` it was not given; a registration run without it fails with
///   `DispatchError::MissingState`.
/// - **Anything else is a payload field**, written `name: Type` (plain
///   `mut name` is fine, other patterns are not). Its type is stored as JSON,
///   so it must be `Serialize + DeserializeOwned + Send + Sync + 'static`, own
///   its data (`String`, not `&str`), and be `Debug + Clone` (the payload
///   struct derives both).
///
/// The fn must be `async`, must not be generic and must not take `self`.
/// It returns `()` or `Result<(), E>` with `E: Display + 'static` (anything
/// implementing `IntoJobResult`): an `Err` fails the attempt, and returning a
/// `JobError` chooses what happens next (`permanent`, `retry_in`, `snooze`).
/// The future it returns must be `Send`; if it is not, the error points at
/// the fn's name and at the value held across an `.await`.
///
/// # Keys
///
/// | key | value | default |
/// |---|---|---|
/// | `name` | `"…"`: the name stored in each row | the fn's name |
/// | `queue` | `"…"` | `DEFAULT_QUEUE` (`"default"`) |
/// | `priority` | integer literal, `i16`, may be negative; smaller runs first | `0` |
/// | `max_attempts` | integer literal ≥ 1, counting the first attempt | `DEFAULT_MAX_ATTEMPTS` (20) |
/// | `timeout` | duration string, e.g. `"30s"`, `"5m"`, `"1h 30m"` | none |
/// | `backoff` | `exponential("1s", "1h")` (base, cap), `fixed("5s")`, or `linear("10s", "10m")` (step, cap) | `RetryPolicy::DEFAULT` |
/// | `retry` | `["1s", "30s", "5m"]`: the delay after attempt 1, 2, …; the last repeats | — |
/// | `key` | idempotency-key template, e.g. `"welcome:{user_id}"` | none |
/// | `unique` | `"pending"`, `"active"` (pending or processing) or `"active_or_failed"`: the key is taken only while its job is in those states (`Unique::while_pending`, …) | taken while the row exists |
/// | `unique_for` | duration string: the key is taken at most that long after its job's enqueue (`Unique::for_period`, or `.within` with `unique`) | — |
/// | `concurrency_key` | concurrency-key template, e.g. `"sync:{customer_id}"`: jobs of one key start in enqueue order, at most `concurrency` at a time; the others wait `blocked` | none |
/// | `concurrency` | integer literal, 1 to `MAX_KEY_CONCURRENCY` (10000): how many jobs of one concurrency key run at once | `1` (with `concurrency_key`) |
/// | `tags` | `["billing", "nightly"]`: tags every job of this type is stored with, beside its enqueue's (at most 16, each 1 to 100 bytes) | none |
/// | `crate` | path to jobq-runtime, `crate = jobq` or `crate = "jobq"` | `::jobq_runtime` |
///
/// Durations are read with `humantime` when the macro runs, so a typo is a
/// compile error on the literal. `backoff` and `retry` exclude each other.
/// In `key` and `concurrency_key`, each `{field}` names a payload field and
/// is formatted with `Display` (a format spec is allowed: `{id:08}`); `{{`
/// and `}}` are literal braces. Enqueueing a job whose key exists returns the
/// existing job. `unique` and `unique_for` need a `key`, and `concurrency` a
/// `concurrency_key` (a compile error without one).
///
/// The stored `name` is part of the storage contract: queued rows find their
/// handler by it. Pin it with `name = "…"` before renaming a fn that has
/// rows in flight. Two jobs with one name make `Registry::from_inventory`
/// (and so building a worker) fail with an error naming both definitions.
///
/// # What is generated
///
/// For `async fn send_welcome(…)`, next to the fn, which stays as written:
///
/// - `struct SendWelcome { user_id: u64, locale: String }` — the fn's name in
///   PascalCase, with the fn's visibility (on the struct, its fields and
///   `new`) and doc comments, deriving `Serialize`, `Deserialize`, `Debug`
///   and `Clone`. A fn with no payload parameters gets `struct X {}`, stored
///   as `{}`, which also implements `Default`.
/// - `SendWelcome::new(user_id, locale)`, taking the payload fields in order.
/// - `impl Job for SendWelcome`: `NAME`, plus `QUEUE`, `PRIORITY`,
///   `MAX_ATTEMPTS`, `TIMEOUT`, `UNIQUE`, `CONCURRENCY`, `TAGS`, `retry_policy`,
///   `idempotency_key` (with `KEY_TEMPLATE`) and `concurrency_key` (with
///   `CONCURRENCY_KEY_TEMPLATE`) for the keys given; the others keep the
///   trait's defaults.
/// - In `const _: () = { … };`: the handler that decodes the JSON payload,
///   takes the `State`s, calls the fn and boxes its future, submitted to
///   `inventory` as a `JobRegistration` with where the fn was defined.
///
/// A `#[cfg]` on the fn applies to all of it. If the attribute or the
/// signature is wrong, the fn is emitted unchanged together with every
/// problem found, each spanned on the token at fault.
#[proc_macro_attribute]
pub fn job(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    expand::expand(args.into(), item.clone())
        .unwrap_or_else(|error| expand::token_stream_with_error(item, error))
        .into()
}
