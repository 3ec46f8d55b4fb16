//! Runnable examples of jobq: see `examples/` (`cargo run -p jobq-examples --example quickstart`).
