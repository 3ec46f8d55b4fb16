//! Runnable examples of jobq: see `examples/` (`cargo run -p jobq-examples --example service`;
//! the quickstart is its own package, `cargo run -p quickstart`). The service example's application lives here so
//! its test can drive the same router.

// Output goes through `tracing`, which a closed pipe cannot panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod service;

/// The README's and the guides' code, compiled (and, where it needs no
/// server, run) as doctests: `cargo test -p jobq-examples --doc`.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../docs/backends.md")]
    struct Backends;
    #[doc = include_str!("../../docs/cli.md")]
    struct Cli;
    #[doc = include_str!("../../docs/dashboard.md")]
    struct Dashboard;
    #[doc = include_str!("../../docs/guarantees.md")]
    struct Guarantees;
    #[doc = include_str!("../../docs/operating.md")]
    struct Operating;
    #[doc = include_str!("../../docs/performance.md")]
    struct Performance;
    #[doc = include_str!("../../docs/scaling.md")]
    struct Scaling;
    #[doc = include_str!("../../docs/scaling-galera.md")]
    struct ScalingGalera;
    #[doc = include_str!("../../docs/scaling-galera-throughput.md")]
    struct ScalingGaleraThroughput;
    #[doc = include_str!("../../docs/scaling-many-hosts.md")]
    struct ScalingManyHosts;
    #[doc = include_str!("../../docs/testing.md")]
    struct Testing;
    #[doc = include_str!("../../docs/workflows.md")]
    struct Workflows;
}
