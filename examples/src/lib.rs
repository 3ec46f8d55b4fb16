//! Runnable examples of jobq: see `examples/` (`cargo run -p jobq-examples --example quickstart`,
//! `--example service`). The service example's application lives here so
//! its test can drive the same router.

pub mod service;
