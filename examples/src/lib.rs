//! Runnable examples of jobq: see `examples/` (`cargo run -p jobq-examples --example service`;
//! the quickstart is its own package, `cargo run -p quickstart`). The service example's application lives here so
//! its test can drive the same router.

pub mod service;
