//! PostgreSQL is down for three leases mid-drain while worker processes keep
//! running with many jobs in hand: every lease held during the outage
//! expires, and when the server is back the workers claim again jobs they
//! still hold stale attempts of. Every chaos invariant holds; in particular
//! no stale settle finishes a job its own worker re-claimed (each `done` row
//! was finished by its last execution, after that execution ended).
//!
//! This binary holds only this test: it stops the shared server, so nothing
//! else of the suite may run meanwhile (cargo runs test binaries one at a
//! time). The server is started again even if the test fails.

use jobq_tests::chaos::{self, Config};
use jobq_tests::services::Server;

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-chaos-worker");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_longer_than_the_lease_mid_drain_lets_no_stale_settle_finish_a_reclaimed_job()
{
    let config = Config::outage_longer_than_lease("outage-longer-than-lease", Server::Postgres);
    chaos::run_outage(WORKER, config).await;
}
