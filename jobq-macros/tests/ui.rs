//! Compile-time behaviour of `#[job]`: what compiles, and how what does not is reported.
//!
//! Regenerate the `.stderr` snapshots with `TRYBUILD=overwrite cargo test -p jobq-macros --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
