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
