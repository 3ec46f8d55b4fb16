//! Starts a Galera cluster by hand (see `scripts/galera.sh`): N nodes
//! (`JOBQ_GALERA_NODES`, default 3), prints each node's URL and the
//! cluster's state once every node is Synced, then holds it until its stdin
//! closes (Ctrl-D, Ctrl-C, or `scripts/galera.sh stop`), and tears it down.

use std::io::Read;
use std::process::ExitCode;

use jobq_tests::galera::{self, Cluster};

fn main() -> ExitCode {
    if let Err(why) = galera::available() {
        eprintln!("a Galera cluster cannot run here: {why}");
        return ExitCode::FAILURE;
    }
    let nodes = std::env::var("JOBQ_GALERA_NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let started = std::time::Instant::now();
    let cluster = match Cluster::start("byhand", nodes) {
        Ok(cluster) => cluster,
        Err(why) => {
            eprintln!("the cluster did not start: {why}");
            return ExitCode::FAILURE;
        }
    };
    println!("{nodes} nodes Synced in {:.1?}", started.elapsed());
    for node in 0..cluster.len() {
        println!("node {node}: {}", cluster.url(node));
    }
    println!("holding the cluster until stdin closes");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    cluster.stop();
    println!("stopped");
    ExitCode::SUCCESS
}
