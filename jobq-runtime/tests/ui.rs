//! What the compiler says when `enqueue_in` is given something that is not
//! a connection of the sqlx jobq is built on: the message names the sqlx
//! version and the re-export `jobq_runtime::sqlx`.
//!
//! Regenerate the `.stderr` snapshots with `TRYBUILD=overwrite cargo test -p jobq-runtime --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
