//! Generated code names nothing through the prelude: shadowing it changes nothing.
#![deny(warnings)]
#![allow(non_camel_case_types, dead_code, unused_macros)]

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct Box;
struct String;
struct Vec;
struct Send;
struct Sync;
struct Clone;
struct Debug;
struct Default;
struct Duration;
struct Serialize;
struct Deserialize;
mod core {}
mod std {}
mod serde {}
mod serde_json {}
mod inventory {}
mod __private {}
fn from_str() {}
fn format() {}
macro_rules! format { () => {} }
macro_rules! vec { () => {} }
macro_rules! line { () => {} }
macro_rules! file { () => {} }
macro_rules! module_path { () => {} }

struct Mailer;

#[::jobq_runtime::job(
    queue = "mail",
    priority = 1,
    max_attempts = 3,
    timeout = "1s",
    retry = ["1s"],
    key = "welcome:{user_id}",
)]
async fn send_welcome(
    ctx: ::jobq_runtime::JobContext,
    mailer: ::jobq_runtime::State<Mailer>,
    user_id: u64,
) -> ::core::result::Result<(), &'static str> {
    let _ = (ctx, mailer, user_id);
    ::core::result::Result::Ok(())
}

#[::jobq_runtime::job(backoff = exponential("1s", "1h"))]
async fn without_parameters() {}

fn main() {}
