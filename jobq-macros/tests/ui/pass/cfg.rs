//! A `#[cfg]` on the fn applies to everything generated for it.
#![deny(warnings)]

use jobq_runtime::job;

#[job]
#[cfg(any())]
async fn compiled_out(user_id: NoSuchType) {
    let _ = user_id;
}

#[job]
#[cfg(all())]
async fn compiled_in(user_id: u64) {
    let _ = user_id;
}

fn main() {
    let _ = CompiledIn::new(1);
}
