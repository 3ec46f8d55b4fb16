//! `crate = …` points the generated code at a re-export of jobq-runtime.
#![deny(warnings)]

mod reexport {
    pub use jobq_runtime as jobq;
}

use jobq_runtime::job;

#[job(crate = reexport::jobq)]
async fn as_path(user_id: u64) {
    let _ = user_id;
}

#[job(crate = "crate::reexport::jobq")]
async fn as_string(user_id: u64) {
    let _ = user_id;
}

#[job(crate = ::jobq_runtime)]
async fn absolute(user_id: u64) {
    let _ = user_id;
}

fn main() {
    let _ = (AsPath::new(1), AsString::new(2), Absolute::new(3));
}
