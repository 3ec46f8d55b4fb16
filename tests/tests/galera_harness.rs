//! The Galera harness itself (`tests/src/galera.rs`): a node killed with
//! SIGKILL comes back with `restart`, by IST (incremental state transfer
//! from the others' gcache, not a full copy), with what it missed.

use jobq_tests::galera;

#[test]
fn a_killed_node_rejoins_by_ist_with_what_it_missed() {
    if !galera::should_run("galera harness restart") {
        return;
    }
    let cluster = galera::shared();
    let db = cluster.database("harness").unwrap();
    let table = format!("{}.t", db.name());
    cluster
        .sql(0, &format!("CREATE TABLE {table} (id INT PRIMARY KEY)"))
        .unwrap();
    cluster.kill(2);
    assert!(
        cluster.status(2, "wsrep_cluster_size").is_err(),
        "node 2 is down"
    );
    for id in 0..100 {
        cluster
            .sql(id % 2, &format!("INSERT INTO {table} VALUES ({id})"))
            .unwrap();
    }
    let started = std::time::Instant::now();
    // Each failure below says what node 2 logged (CI shows only the
    // failing test's output).
    if let Err(error) = cluster.restart(2) {
        panic!("restart: {error}\n{}", cluster.log_tail(2));
    }
    let took = started.elapsed();
    assert_eq!(
        cluster.status(2, "wsrep_local_state_comment").unwrap(),
        "Synced",
        "{}",
        cluster.log_tail(2)
    );
    assert_eq!(
        cluster.status(0, "wsrep_cluster_size").unwrap(),
        cluster.len().to_string(),
        "node 0:\n{}\nnode 2:\n{}",
        cluster.log_tail(0),
        cluster.log_tail(2)
    );
    let rows = cluster
        .sql(
            2,
            &format!("SET SESSION wsrep_sync_wait = 1; SELECT COUNT(*) FROM {table}"),
        )
        .unwrap();
    assert_eq!(rows.trim(), "100", "{}", cluster.log_tail(2));
    let log = cluster.log(2);
    // What the second start logged (each start begins with this line).
    assert!(
        log.matches("Starting MariaDB").count() >= 2,
        "one start logged"
    );
    let restart = &log[log.rfind("Starting MariaDB").unwrap_or(0)..];
    assert!(
        restart.contains("IST received") || restart.contains("Receiving IST"),
        "node 2 rejoined without IST:\n{}",
        cluster.log_tail(2)
    );
    eprintln!(
        "galera harness: node 2 killed, 100 rows written, restarted and Synced by IST in {took:.2?}"
    );
}
