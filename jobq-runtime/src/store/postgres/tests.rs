//! The PostgreSQL store's own tests of what needs no server: how values are
//! bound. The rest runs against PostgreSQL in the contract suite
//! (`tests/tests/contract/`), the conformance suite and
//! `jobq-runtime/tests/postgres_store.rs`.

use super::*;

#[test]
fn fences_travel_as_two_parallel_arrays() {
    let fences = [Fence { id: 1, token: 10 }, Fence { id: 2, token: 20 }];
    assert_eq!(fence_arrays(&fences), (vec![1, 2], vec![10, 20]));
}

#[test]
fn a_run_at_is_bound_as_an_instant_or_a_delay_in_microseconds() {
    assert_eq!(run_at_binds(RunAt::Now), (None, 0));
    assert_eq!(
        run_at_binds(RunAt::After(Duration::from_millis(3))),
        (None, 3000)
    );
    let at = Utc::now();
    assert_eq!(run_at_binds(RunAt::At(at)), (Some(at), 0));
}

#[test]
fn max_attempts_saturates_at_the_integer_column() {
    assert_eq!(attempts_bind(7), 7);
    assert_eq!(attempts_bind(u32::MAX), i32::MAX);
}

#[test]
fn the_bounded_begin_names_the_idle_timeout_it_documents() {
    assert!(BEGIN_BOUNDED.starts_with("BEGIN;"));
    assert!(BEGIN_BOUNDED.contains(&format!(
        "SET LOCAL idle_in_transaction_session_timeout = '{IDLE_TRANSACTION_SECONDS}s'"
    )));
}
