//! Worker processes are `kill -9`ed at random every 0.5–1 s while they drain
//! a queue, and replaced; at the end no job is lost, each is settled once by
//! its last claim, each side effect happened once, and every re-execution
//! follows a kill (see `jobq_tests::chaos`). `JOBQ_CHAOS_LONG=1` runs the long
//! form (more jobs, more workers, more kills: minutes).

use jobq_tests::TestDb;
use jobq_tests::chaos::{self, Config};

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-chaos-worker");

async fn killed_workers_lose_no_job_and_repeat_no_effect(db: TestDb) {
    chaos::run(&db, WORKER, Config::kills("kill")).await;
}

jobq_tests::on_every_backend!(killed_workers_lose_no_job_and_repeat_no_effect);

/// The same on a 3-node Galera cluster, the workers spread over the nodes
/// (round-robin): claims of one queue's head meet at certification, and
/// killed workers' jobs are reaped and re-run through other nodes.
async fn killed_workers_on_every_galera_node_lose_no_job_and_repeat_no_effect(db: TestDb) {
    let mut config = Config::kills("galera-kill");
    config.urls = db.nodes().to_vec();
    chaos::run(&db, WORKER, config).await;
}

jobq_tests::on_galera!(killed_workers_on_every_galera_node_lose_no_job_and_repeat_no_effect);
