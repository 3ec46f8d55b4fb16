use jobq_runtime::{Job, MAX_TAG_LEN, MAX_TAGS, job};

/// Tagged: every job of this type carries them.
#[job(tags = ["billing", "nightly"])]
async fn invoice(account: u64) {
    let _ = account;
}

/// Untagged: the trait's default.
#[job]
async fn plain(n: u8) {
    let _ = n;
}

fn main() {
    assert_eq!(Invoice::TAGS, ["billing", "nightly"]);
    assert!(Plain::TAGS.is_empty());
    // The macro's bounds are the runtime's.
    assert_eq!((MAX_TAGS, MAX_TAG_LEN), (16, 100));
}
