use jobq_runtime::job;

/// A limit without a key to limit by.
#[job(concurrency = 3)]
async fn no_key(customer_id: u64) {
    let _ = customer_id;
}

/// A zero limit, and one above `MAX_KEY_CONCURRENCY`.
#[job(concurrency_key = "sync:{customer_id}", concurrency = 0)]
async fn zero(customer_id: u64) {
    let _ = customer_id;
}

#[job(concurrency_key = "sync:{customer_id}", concurrency = 10001)]
async fn too_many(customer_id: u64) {
    let _ = customer_id;
}

/// Not an integer literal.
#[job(concurrency_key = "sync:{customer_id}", concurrency = "3")]
async fn quoted(customer_id: u64) {
    let _ = customer_id;
}

/// The template's rules are `key`'s: every `{field}` names a payload field.
#[job(concurrency_key = "sync:{customer}")]
async fn missing_field(customer_id: u64) {
    let _ = customer_id;
}

#[job(concurrency_key = "sync:{customer_id")]
async fn unclosed(customer_id: u64) {
    let _ = customer_id;
}

#[job(concurrency_key = "")]
async fn empty(customer_id: u64) {
    let _ = customer_id;
}

/// A field that is not `Display`.
#[job(concurrency_key = "sync:{ids}")]
async fn not_display(ids: Vec<u64>) {
    let _ = ids;
}

fn main() {}
