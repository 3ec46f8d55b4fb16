//! Runnable examples of jobq: see `examples/` (`cargo run -p jobq-examples --example service`;
//! the quickstart is its own package, `cargo run -p quickstart`). The service example's application lives here so
//! its test can drive the same router.

// Output goes through `tracing`, which a closed pipe cannot panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod service;
