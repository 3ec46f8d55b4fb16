//! The MySQL/MariaDB store's own tests of what needs no server: how a batch
//! is split into statements, how IN-lists are built, how a URL is read. The
//! rest runs against MariaDB and Galera in the contract suite
//! (`tests/tests/contract/`), the conformance suite and `tests/tests/mysql.rs`.

use super::*;

fn job(payload_bytes: usize) -> NewJob {
    NewJob {
        queue: "q".to_owned(),
        job_name: "j".to_owned(),
        payload: "x".repeat(payload_bytes),
        priority: 0,
        max_attempts: 1,
        run_at: RunAt::Now,
        idempotency_key: None,
        unique: None,
        concurrency: None,
        metadata: None,
        tags: Vec::new(),
    }
}

fn lengths(chunks: &[&[NewJob]]) -> Vec<usize> {
    chunks.iter().map(|chunk| chunk.len()).collect()
}

#[test]
fn a_batch_is_split_into_statements_that_each_fit_the_packet() {
    let jobs: Vec<NewJob> = (0..10).map(|_| job(1000)).collect();
    // Each row counts its payload, queue and name, and 64 bytes more.
    let three_rows = 3 * (1000 + 1 + 1 + 64);
    assert_eq!(lengths(&statement_chunks(&jobs, three_rows)), [3, 3, 3, 1]);
}

#[test]
fn a_batch_of_small_rows_is_split_at_the_row_limit() {
    let jobs: Vec<NewJob> = (0..=INSERT_CHUNK).map(|_| job(10)).collect();
    assert_eq!(
        lengths(&statement_chunks(&jobs, usize::MAX)),
        [INSERT_CHUNK, 1]
    );
}

#[test]
fn a_row_larger_than_the_budget_is_a_statement_of_its_own() {
    let jobs = [job(10), job(5000), job(10)];
    assert_eq!(lengths(&statement_chunks(&jobs, 1000)), [1, 1, 1]);
}

#[test]
fn an_in_list_is_padded_to_a_power_of_two_by_repeating_its_first_item() {
    assert_eq!(padded(&[7, 8, 9]), [7, 8, 9, 7]);
    assert_eq!(padded(&[7, 8]), [7, 8]);
    assert!(padded::<i64>(&[]).is_empty());
    assert_eq!(
        fenced_update(HEARTBEAT_SET, 2, 2),
        format!(
            "{HEARTBEAT_SET} WHERE status = 'processing' AND id IN (?, ?) AND lease_token IN (?, ?)"
        )
    );
}

#[test]
fn a_mariadb_url_is_a_mysql_url_to_the_driver() {
    assert_eq!(
        glue::mysql_url("mariadb://app@db/app"),
        "mysql://app@db/app"
    );
    assert_eq!(glue::mysql_url("mysql://app@db/app"), "mysql://app@db/app");
}

#[test]
fn the_session_setup_names_the_idle_transaction_timeout_it_documents() {
    assert!(SESSION_SETUP.contains(&format!(
        "/*M!100300 , SESSION idle_transaction_timeout = {IDLE_TRANSACTION_SECONDS} */"
    )));
}
