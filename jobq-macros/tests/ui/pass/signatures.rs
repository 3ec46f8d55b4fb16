//! Every kind of parameter and return type a `#[job]` fn may have.
#![deny(warnings)]

use std::fmt;

use jobq_runtime::{Job, JobContext, JobError, State, job};

struct Mailer;

#[derive(Debug)]
struct MailError;

impl fmt::Display for MailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refused")
    }
}

/// Sends the welcome mail.
#[job(queue = "mail", max_attempts = 8, timeout = "30s", key = "welcome:{user_id}")]
async fn send_welcome(
    ctx: JobContext,
    mailer: State<Mailer>,
    user_id: u64,
    locale: String,
) -> Result<(), MailError> {
    let _ = (ctx.id(), &*mailer, user_id, locale);
    Ok(())
}

#[job]
async fn no_parameters() {}

#[job(priority = -32768)]
async fn borrowed_context(ctx: &JobContext, mut retries: u32) -> Result<(), JobError> {
    retries += ctx.attempt();
    if retries > 3 {
        return Err(JobError::permanent("too many"));
    }
    Ok(())
}

#[job(backoff = linear("10s", "10m"))]
async fn returns_unit(_ctx: JobContext, items: Vec<(String, Option<u32>)>) -> () {
    let _ = items;
}

#[job(retry = ["1s", "30s", "5m"])]
async fn r#type(r#struct: String) {
    let _ = r#struct;
}

#[job(priority = 32767)]
async fn many(a: u8, b: u16, c: u32, d: u64, e: i8, f: i16, g: i32, h: i64) {
    let _ = (a, b, c, d, e, f, g, h);
}

fn main() {
    let job = SendWelcome::new(1, "en".to_owned());
    assert_eq!(job.idempotency_key().as_deref(), Some("welcome:1"));
    let _ = NoParameters::new();
    let _ = NoParameters::default();
    let _ = BorrowedContext::new(0);
    let _ = ReturnsUnit { items: Vec::new() }.clone();
    let _ = Type::new(String::new()).r#struct;
    let _ = Many::new(1, 2, 3, 4, 5, 6, 7, 8);
    let _ = format!("{:?}", NoParameters {});
}
