//! Two `#[job]`s that claim one stored name make the registry, and a
//! worker, fail to build (with the real runtime; the macro's own tests
//! compile against jobq-core).

use jobq_runtime::{Registry, RegistryError, job};
use jobq_tests::assert_contains;

mod billing {
    use super::job;

    #[job(name = "charge")]
    pub(crate) async fn charge_card(cents: u64) {
        let _ = cents;
    }
}

mod legacy {
    use super::job;

    #[job(name = "charge")]
    pub(crate) async fn charge_invoice(invoice: String) {
        let _ = invoice;
    }
}

#[test]
fn a_duplicate_name_is_an_error_naming_both_definitions() {
    let error = Registry::from_inventory().unwrap_err();
    let RegistryError::DuplicateName {
        name,
        first,
        second,
    } = &error
    else {
        panic!("expected DuplicateName, got {error:?}");
    };
    assert_eq!(*name, "charge");
    let mut functions = [first.function, second.function];
    functions.sort_unstable();
    assert_eq!(functions, ["charge_card", "charge_invoice"]);

    let message = error.to_string();
    assert_contains(
        &message,
        &[
            "`duplicate_names::billing::charge_card`",
            "`duplicate_names::legacy::charge_invoice`",
            "tests/duplicate_names.rs:",
        ],
    );
}

#[tokio::test]
async fn a_worker_does_not_build_when_two_jobs_share_a_name() {
    let jobq = jobq_runtime::Jobq::connect("sqlite::memory:")
        .await
        .unwrap();
    let error = jobq_runtime::Worker::builder(jobq)
        .queue("default", 1)
        .build()
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("job name `charge` is registered twice"),
        "{message}"
    );
}
