//! MariaDB is stopped and started again while worker processes drain a queue
//! (in the long form they are also killed at random): the workers keep
//! running, reconnect and finish the drain with every chaos invariant intact.
//!
//! This binary holds only this test: it stops the shared server, so nothing
//! else of the suite may run meanwhile (cargo runs test binaries one at a
//! time). The server is started again even if the test fails.

use jobq_tests::chaos::{self, Config};
use jobq_tests::services::Server;

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-chaos-worker");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_restarted_mid_drain_loses_no_job_and_repeats_no_effect() {
    chaos::run_outage(WORKER, Config::outage("outage", Server::MariaDb)).await;
}
