use jobq_runtime::{Job, MAX_KEY_CONCURRENCY, job};

/// At most three syncs of one customer at a time.
#[job(concurrency_key = "sync:{customer_id}", concurrency = 3)]
async fn sync_customer(customer_id: u64, full: bool) {
    let _ = (customer_id, full);
}

/// One export per account at a time (the default limit), with a format spec.
#[job(concurrency_key = "export:{account:>6}:{{{kind}}}")]
async fn export(account: String, kind: String) {
    let _ = (account, kind);
}

/// The largest limit, on a key that names no field: one key for all its jobs.
#[job(concurrency_key = "reindex", concurrency = 10000)]
async fn reindex() {}

/// An idempotency key and a concurrency key side by side.
#[job(key = "charge:{order_id}", concurrency_key = "charge:{customer_id}")]
async fn charge(order_id: u64, customer_id: u64) {
    let _ = (order_id, customer_id);
}

/// Neither.
#[job]
async fn plain(n: u8) {
    let _ = n;
}

fn main() {
    assert_eq!(SyncCustomer::CONCURRENCY_KEY_TEMPLATE, Some("sync:{customer_id}"));
    assert_eq!(SyncCustomer::CONCURRENCY, 3);
    assert_eq!(
        SyncCustomer::new(42, true).concurrency_key().as_deref(),
        Some("sync:42")
    );
    assert_eq!(SyncCustomer::new(42, true).idempotency_key(), None);

    assert_eq!(
        Export::CONCURRENCY_KEY_TEMPLATE,
        Some("export:{account:>6}:{{{kind}}}")
    );
    assert_eq!(Export::CONCURRENCY, 1);
    assert_eq!(
        Export::new("acme".into(), "csv".into()).concurrency_key().as_deref(),
        Some("export:  acme:{csv}")
    );

    assert_eq!(Reindex::CONCURRENCY, MAX_KEY_CONCURRENCY);
    assert_eq!(Reindex::new().concurrency_key().as_deref(), Some("reindex"));

    let charge = Charge::new(7, 42);
    assert_eq!(charge.idempotency_key().as_deref(), Some("charge:7"));
    assert_eq!(charge.concurrency_key().as_deref(), Some("charge:42"));
    assert_eq!(Charge::KEY_TEMPLATE, Some("charge:{order_id}"));
    assert_eq!(Charge::CONCURRENCY_KEY_TEMPLATE, Some("charge:{customer_id}"));

    assert_eq!(Plain::CONCURRENCY_KEY_TEMPLATE, None);
    assert_eq!(Plain::CONCURRENCY, 1);
    assert_eq!(Plain::new(1).concurrency_key(), None);
}
