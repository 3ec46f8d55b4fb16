//! Fencing: a settle, a heartbeat or a release applies only through the
//! exact claim — row *and* token — that holds the row now.
//!
//! Two kinds of test, on every backend and Galera, driving the store step
//! by step through `jobq_runtime::__store` (one call per store operation):
//!
//! - the scenarios of issue 13, finding 1: one worker holds a stale attempt
//!   of job A and has re-claimed A together with B; a batch of its stale
//!   claim of A and its claim of B must not touch A;
//! - a model-based test: a seeded random schedule of claims, successes
//!   (batched), failures, snoozes, heartbeats, lease expiries, reaps,
//!   cancels, retries, prunes and shutdowns by two claimers sharing rows,
//!   checked after every step against a model of what each row must be. A
//!   settle counts only when it comes from the row's latest claim; after
//!   both claimers shut down nothing is `processing`.
//!
//! A third model runs the same schedule over jobs of two concurrency keys
//! (limits 1 and 2) and jobs without a key, releasing keys as a worker
//! does: after every step no key has more holders than its limit, a
//! release leaves no job of a key with room blocked, and it unblocks the
//! oldest first.
//!
//! The model-based test runs `JOBQ_FENCING_SEEDS` seeds (default 8) of
//! `JOBQ_FENCING_STEPS` steps (default 150) per backend; a failure names
//! its seed and step and prints the steps before it. (`settle.rs` goes
//! through every order of one stale and one current attempt's calls; this
//! model, through long random schedules of every operation.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jobq_runtime::__store::{self, Claim};
use jobq_runtime::{Enqueue, JobStatus, Jobq, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, unique_queue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Never runs: these tests claim and settle its rows themselves.
#[job(name = "fencing_model", max_attempts = 2)]
async fn model_job(n: u64) {
    let _ = n;
}

/// Long enough that no lease runs out unless a test expires it on purpose.
const LEASE: Duration = Duration::from_secs(60);

async fn enqueue(jobq: &Jobq, queue: &str, n: u64, key: Option<(&str, u32)>) -> i64 {
    let options = Enqueue::new().queue(queue);
    let options = match key {
        Some((key, limit)) => options.concurrency_key(key, limit),
        None => options,
    };
    jobq.enqueue_with(ModelJob::new(n), options)
        .await
        .expect("enqueue")
        .id
}

async fn claim(jobq: &Jobq, queue: &str, limit: u32, worker: &str) -> Vec<Claim> {
    __store::claim(jobq, queue, limit, LEASE, worker)
        .await
        .expect("claim")
}

async fn status(jobq: &Jobq, id: i64) -> (JobStatus, u32) {
    let info = jobq.job(id).await.expect("job").expect("row exists");
    (info.status, info.attempts)
}

fn fence(claim: &Claim) -> (i64, i64) {
    (claim.id, claim.token)
}

/// Job A claimed by worker `w` (attempt 1, token T1), cancelled and retried
/// while that attempt runs, then claimed again by `w` together with job B in
/// one claim (A's attempt 2 and B). Returns (A's attempt 1, A's attempt 2, B).
async fn stale_and_reclaimed(jobq: &Jobq, queue: &str) -> (Claim, Claim, Claim) {
    let a = enqueue(jobq, queue, 1, None).await;
    let first = claim(jobq, queue, 1, "w").await;
    assert_eq!(first.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a]);
    assert!(jobq.cancel(a).await.expect("cancel"));
    assert!(jobq.retry(a).await.expect("retry"));
    let b = enqueue(jobq, queue, 2, None).await;
    let second = claim(jobq, queue, 2, "w").await;
    let find = |id| *second.iter().find(|c| c.id == id).expect("claimed");
    assert_eq!(second.len(), 2, "{second:?}");
    (first[0], find(a), find(b))
}

/// A worker's stale success of job A, batched with its success of job B
/// from the claim that also took A again, settles B only: A's second attempt
/// still holds the row, and its own outcome (here a failure) is applied.
async fn a_stale_success_cannot_settle_a_job_its_worker_reclaimed(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("fence-stale-success");
    let (stale, current, b) = stale_and_reclaimed(&jobq, &queue).await;

    let settled = __store::complete(&jobq, &[fence(&stale), fence(&b)])
        .await
        .expect("complete");
    assert_eq!(settled, 1, "only B's success holds its row");
    assert_eq!(status(&jobq, stale.id).await, (JobStatus::Processing, 2));
    assert_eq!(status(&jobq, b.id).await, (JobStatus::Done, 1));

    let failed = __store::transition(
        &jobq,
        fence(&current),
        false,
        Duration::ZERO,
        false,
        Some("attempt 2 failed".into()),
    )
    .await
    .expect("transition");
    assert!(failed, "the second attempt still holds A");
    let info = jobq.job(stale.id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Pending);
    assert_eq!(info.last_error.as_deref(), Some("attempt 2 failed"));
}

/// A heartbeat of the same worker's stale claim of A (batched with its claim
/// of B) reports that claim lost instead of renewing A's lease through the
/// other claim.
async fn a_stale_heartbeat_is_reported_lost_although_its_worker_reclaimed_the_job(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("fence-stale-heartbeat");
    let (stale, current, b) = stale_and_reclaimed(&jobq, &queue).await;

    let lost = __store::heartbeat(&jobq, &[fence(&stale), fence(&b)], LEASE)
        .await
        .expect("heartbeat");
    assert_eq!(lost, vec![fence(&stale)]);
    let lost = __store::heartbeat(&jobq, &[fence(&current), fence(&b)], LEASE)
        .await
        .expect("heartbeat");
    assert!(lost.is_empty(), "{lost:?}");
}

/// Every claim token is the claim's own: no two rows of one claim share one.
async fn each_claimed_row_gets_a_token_of_its_own(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("fence-row-tokens");
    for n in 0..4 {
        enqueue(&jobq, &queue, n, None).await;
    }
    let claimed = claim(&jobq, &queue, 4, "w").await;
    assert_eq!(claimed.len(), 4);
    let mut tokens: Vec<i64> = claimed.iter().map(|c| c.token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 4, "{claimed:?}");
}

// ---------------------------------------------------------------------------
// The model.

/// What a row must be.
#[derive(Debug, Clone)]
struct Row {
    status: JobStatus,
    /// The token of the claim that holds it, while `processing`.
    token: Option<i64>,
    attempts: u32,
    max_attempts: u32,
    /// Whether a claim may take it now (`pending` rows only).
    due: bool,
    /// Whether its lease was made to pass (`processing` rows only).
    expired: bool,
    /// Its concurrency key, an index into [`Model::keys`].
    key: Option<usize>,
    /// The checkpoint its latest holder saved.
    checkpoint: Option<String>,
    /// The output it was completed with.
    output: Option<String>,
    /// How many entries its attempt history holds.
    history: usize,
}

impl Row {
    /// One more entry in its history (the oldest goes past the cap).
    fn recorded(&mut self) {
        self.history = (self.history + 1).min(jobq_runtime::HISTORY_CAP);
    }
}

impl Row {
    /// Whether `claim` is the claim that holds this row now.
    fn held_by(&self, token: i64) -> bool {
        self.status == JobStatus::Processing && self.token == Some(token)
    }

    fn leave_processing(&mut self, status: JobStatus, due: bool) {
        self.status = status;
        self.token = None;
        self.due = due;
        self.expired = false;
    }
}

struct Model {
    jobq: Jobq,
    db: Db,
    queue: String,
    rows: BTreeMap<i64, Row>,
    /// What each claimer believes it holds.
    held: [Vec<Claim>; 2],
    /// The claimer whose turn it is.
    turn: usize,
    enqueued: u64,
    /// The queue's global concurrency limit, if the model runs under one:
    /// claims are limited claims, and the limit changes now and then.
    limit: Option<u32>,
    /// The concurrency keys of the keyed model, with their limits (empty:
    /// no job has a key).
    keys: Vec<(String, u32)>,
    /// The steps so far, for the failure message.
    log: Vec<String>,
}

const WORKERS: [&str; 2] = ["model-w0", "model-w1"];

/// A row's attempt writes as stored: id, checkpoint, output, history (JSON).
type StoredWrites = (i64, Option<String>, Option<String>, Option<String>);
/// A row's attempt writes as compared: id, checkpoint, output, history entries.
type Writes = (i64, Option<String>, Option<String>, usize);

impl Model {
    fn check(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            let start = self.log.len().saturating_sub(40);
            panic!(
                "{}: {}\nsteps (last {} of {}):\n  {}",
                self.log[0],
                what(),
                self.log.len() - start,
                self.log.len(),
                self.log[start..].join("\n  ")
            );
        }
    }

    fn row(&mut self, id: i64) -> &mut Row {
        self.rows.get_mut(&id).expect("a modelled row")
    }

    async fn step(&mut self, rng: &mut StdRng) {
        // The claimers take turns in runs of steps, so one of them often
        // claims again rows it still holds stale attempts of.
        if rng.random_bool(0.25) {
            self.turn = 1 - self.turn;
        }
        if self.limit.is_some() && rng.random_bool(0.04) {
            self.set_limit(rng.random_range(1..=4)).await;
            self.compare().await;
            return;
        }
        let w = self.turn;
        if rng.random_bool(0.12) {
            self.attempt_write(w, rng).await;
            self.compare().await;
            return;
        }
        let worker = WORKERS[w];
        let active = self
            .rows
            .values()
            .filter(|r| {
                matches!(
                    r.status,
                    JobStatus::Pending | JobStatus::Processing | JobStatus::Blocked
                )
            })
            .count();
        match rng.random_range(0..100) {
            0..10 if active < 6 => {
                let key = (!self.keys.is_empty() && rng.random_bool(0.8))
                    .then(|| rng.random_range(0..self.keys.len()));
                self.enqueue(key).await;
            }
            0..28 => {
                let limit = rng.random_range(1..=4);
                self.claim(w, worker, limit).await;
            }
            28..44 => {
                let batch: Vec<Claim> = self.held[w]
                    .iter()
                    .filter(|_| rng.random_bool(0.5))
                    .copied()
                    .collect();
                self.complete(w, batch).await;
            }
            44..49 => {
                if let Some(c) = self.pick_held(w, rng) {
                    let failed = c.attempt >= c.max_attempts;
                    let delay = if rng.random_bool(0.8) {
                        Duration::ZERO
                    } else {
                        Duration::from_secs(3600)
                    };
                    self.transition(w, c, failed, delay, false, "fail").await;
                }
            }
            49..53 => {
                if let Some(c) = self.pick_held(w, rng) {
                    self.transition(w, c, false, Duration::ZERO, true, "snooze")
                        .await;
                }
            }
            53..58 => self.heartbeat(w).await,
            58..64 => {
                if let Some(id) = self.pick_row(rng, |r| r.status == JobStatus::Processing) {
                    self.expire(id).await;
                }
            }
            64..70 => self.reap().await,
            70..78 => {
                // An operator cancels a running job and retries it at once.
                if let Some(id) = self.pick_row(rng, |r| r.status == JobStatus::Processing) {
                    self.cancel(id).await;
                    self.retry(id).await;
                }
            }
            78..81 => {
                if let Some(id) = self.pick_row(rng, |_| true) {
                    self.cancel(id).await;
                }
            }
            81..89 => {
                if let Some(id) = self.pick_row(rng, |_| true) {
                    self.retry(id).await;
                }
            }
            89..93 => self.prune().await,
            93..95 if !self.keys.is_empty() => {
                // The reaper's sweep: every key released.
                let all: Vec<usize> = (0..self.keys.len()).collect();
                self.release(&all, "sweep").await;
            }
            _ => self.shutdown(w).await,
        }
        self.compare().await;
    }

    /// A write a running attempt makes of its own row, through one of its
    /// claims (the latest of its row, or a stale one): a checkpoint, a
    /// completion with an output, or a completion in a transaction of the
    /// application's that commits or rolls back. Each lands exactly when
    /// the claim is its row's latest (and, in a transaction, when it
    /// commits).
    async fn attempt_write(&mut self, w: usize, rng: &mut StdRng) {
        let Some(c) = self.pick_held(w, rng) else {
            return;
        };
        let value = format!("{}", rng.random_range(0..1_000_000u32));
        let latest = self.rows.get(&c.id).is_some_and(|r| r.held_by(c.token));
        match rng.random_range(0..3) {
            0 => {
                let saved = __store::save_checkpoint(&self.jobq, fence(&c), &value)
                    .await
                    .expect("checkpoint");
                self.log.push(format!(
                    "{} checkpoints {:?} = {value} -> {saved}",
                    WORKERS[w],
                    fence(&c)
                ));
                self.check(saved == latest, || {
                    format!("a checkpoint of {c:?} saved: {saved}, the latest claim: {latest}")
                });
                if latest {
                    self.row(c.id).checkpoint = Some(value);
                }
            }
            1 => {
                let done = __store::complete_with_output(&self.jobq, fence(&c), &value)
                    .await
                    .expect("complete with output");
                self.log.push(format!(
                    "{} completes {:?} with {value} -> {done}",
                    WORKERS[w],
                    fence(&c)
                ));
                self.check(done == latest, || {
                    format!("a completion of {c:?} with an output applied: {done}, the latest claim: {latest}")
                });
                self.completed(w, c, latest, value).await;
            }
            _ => {
                let commit = rng.random_bool(0.7);
                macro_rules! in_transaction {
                    ($pool:expr) => {{
                        let mut tx = $pool.begin().await.expect("begin");
                        let done = __store::complete_in(&mut *tx, fence(&c), Some(&value))
                            .await
                            .expect("complete in a transaction");
                        if commit {
                            tx.commit().await.expect("commit");
                        } else {
                            tx.rollback().await.expect("rollback");
                        }
                        done
                    }};
                }
                let done = match self.jobq.backend() {
                    jobq_runtime::Backend::MySql => {
                        in_transaction!(self.jobq.mysql_pool().expect("pool"))
                    }
                    jobq_runtime::Backend::Postgres => {
                        in_transaction!(self.jobq.pg_pool().expect("pool"))
                    }
                    _ => in_transaction!(self.jobq.sqlite_pool().expect("pool")),
                };
                self.log.push(format!(
                    "{} completes {:?} with {value} in a transaction that {} -> {done}",
                    WORKERS[w],
                    fence(&c),
                    if commit { "commits" } else { "rolls back" }
                ));
                self.check(done == latest, || {
                    format!("a completion of {c:?} in a transaction matched: {done}, the latest claim: {latest}")
                });
                if commit {
                    self.completed(w, c, latest, value).await;
                }
            }
        }
    }

    /// After claim `c` completed its row (`applied`) with `output`.
    async fn completed(&mut self, w: usize, c: Claim, applied: bool, output: String) {
        if applied {
            let row = self.row(c.id);
            row.leave_processing(JobStatus::Done, false);
            row.output = Some(output);
        }
        self.held[w].retain(|h| *h != c);
        if let Some(k) = self.rows.get(&c.id).and_then(|r| r.key) {
            self.release(&[k], "completed with an output").await;
        }
    }

    fn pick_held(&mut self, w: usize, rng: &mut StdRng) -> Option<Claim> {
        if self.held[w].is_empty() {
            return None;
        }
        let i = rng.random_range(0..self.held[w].len());
        Some(self.held[w][i])
    }

    fn pick_row(&self, rng: &mut StdRng, filter: impl Fn(&Row) -> bool) -> Option<i64> {
        let ids: Vec<i64> = self
            .rows
            .iter()
            .filter(|(_, r)| filter(r))
            .map(|(id, _)| *id)
            .collect();
        (!ids.is_empty()).then(|| ids[rng.random_range(0..ids.len())])
    }

    async fn enqueue(&mut self, key: Option<usize>) {
        self.enqueued += 1;
        let keyed = key.map(|k| (self.keys[k].0.as_str(), self.keys[k].1));
        let id = enqueue(&self.jobq, &self.queue, self.enqueued, keyed).await;
        self.log.push(format!("enqueue with key {key:?} -> {id}"));
        self.rows.insert(
            id,
            Row {
                status: JobStatus::Pending,
                token: None,
                attempts: 0,
                max_attempts: 2,
                due: true,
                expired: false,
                key,
                checkpoint: None,
                output: None,
                history: 0,
            },
        );
        if key.is_some() {
            // Pending if its key had room and nothing waited, else blocked:
            // what it is comes from the database; the limit is checked.
            self.sync_keyed().await;
            self.check_limits();
        }
    }

    /// The holders of key `k` in the model (`pending` or `processing`).
    fn holders(&self, k: usize) -> usize {
        self.rows
            .values()
            .filter(|r| {
                r.key == Some(k) && matches!(r.status, JobStatus::Pending | JobStatus::Processing)
            })
            .count()
    }

    /// The blocked jobs of key `k`, oldest first.
    fn blocked(&self, k: usize) -> Vec<i64> {
        self.rows
            .iter()
            .filter(|(_, r)| r.key == Some(k) && r.status == JobStatus::Blocked)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Takes from the database which keyed rows are `pending` and which
    /// `blocked` (the rest of every row is modelled exactly).
    async fn sync_keyed(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let sql = self.db.pick(
            "SELECT id, CAST(status AS CHAR) FROM jobq_jobs WHERE queue = ? AND status IN ('pending', 'blocked')",
            "SELECT id, status FROM jobq_jobs WHERE queue = ? AND status IN ('pending', 'blocked')",
            "SELECT id, status FROM jobq_jobs WHERE queue = ? AND status IN ('pending', 'blocked')",
        );
        let stored: Vec<(i64, String)> = self
            .db
            .fetch_all(sql, &[Arg::Text(self.queue.clone())])
            .await
            .expect("read waiting rows");
        for (id, status) in stored {
            if let Some(row) = self.rows.get_mut(&id)
                && row.key.is_some()
                && matches!(row.status, JobStatus::Pending | JobStatus::Blocked)
            {
                let status: JobStatus = status.parse().expect("a status");
                if row.status == JobStatus::Blocked && status == JobStatus::Pending {
                    // Unblocked: due since its enqueue or its retry.
                    row.due = true;
                }
                row.status = status;
            }
        }
    }

    /// No key has more holders than its limit.
    fn check_limits(&self) {
        for (k, (key, limit)) in self.keys.iter().enumerate() {
            let holders = self.holders(k);
            self.check(holders <= *limit as usize, || {
                format!("key {key} (limit {limit}) has {holders} holders")
            });
        }
    }

    /// After a release of keys `keys` (or an operation that releases its
    /// row's key): each key with room has no blocked job left, and the
    /// jobs it unblocked are older than those still blocked.
    async fn after_release(&mut self, keys: &[usize], before: Vec<Vec<i64>>) {
        self.sync_keyed().await;
        self.check_limits();
        for (&k, before) in keys.iter().zip(before) {
            let (key, limit) = self.keys[k].clone();
            let blocked = self.blocked(k);
            let holders = self.holders(k);
            self.check(holders >= limit as usize || blocked.is_empty(), || {
                format!("key {key} (limit {limit}) has room ({holders} holders) and blocked jobs {blocked:?} after a release")
            });
            // What it unblocked: blocked before, pending now (a job
            // cancelled meanwhile was not unblocked).
            let unblocked: Vec<i64> = before
                .into_iter()
                .filter(|id| {
                    self.rows
                        .get(id)
                        .is_some_and(|r| r.status == JobStatus::Pending)
                })
                .collect();
            self.check(
                unblocked.iter().max() < blocked.iter().min()
                    || unblocked.is_empty()
                    || blocked.is_empty(),
                || {
                    format!(
                        "key {key}: the release unblocked {unblocked:?} before older {blocked:?}"
                    )
                },
            );
        }
    }

    /// Releases keys `keys` as a worker does after their jobs settled.
    async fn release(&mut self, keys: &[usize], what: &str) {
        if keys.is_empty() {
            return;
        }
        let before: Vec<Vec<i64>> = keys.iter().map(|&k| self.blocked(k)).collect();
        let names: Vec<&str> = keys.iter().map(|&k| self.keys[k].0.as_str()).collect();
        let unblocked = __store::release_keys(&self.jobq, &names)
            .await
            .expect("release keys");
        self.log.push(format!(
            "{what}: release keys {keys:?} -> {unblocked} unblocked"
        ));
        self.after_release(keys, before).await;
    }

    /// The rows `processing` (an expired lease included: its worker may
    /// yet renew it, until the reaper moves the row): what holds a slot.
    fn live(&self) -> Vec<(i64, i64)> {
        self.rows
            .iter()
            .filter(|(_, r)| r.status == JobStatus::Processing)
            .map(|(id, r)| (*id, r.token.expect("a processing row has a token")))
            .collect()
    }

    async fn set_limit(&mut self, limit: u32) {
        self.jobq
            .set_queue_limit(&self.queue, Some(limit))
            .await
            .expect("set limit");
        self.log.push(format!("limit -> {limit}"));
        self.limit = Some(limit);
    }

    async fn claim(&mut self, w: usize, worker: &str, limit: u32) {
        let due = self
            .rows
            .values()
            .filter(|r| r.status == JobStatus::Pending && r.due)
            .count();
        let (claimed, expected) = match self.limit {
            None => (
                claim(&self.jobq, &self.queue, limit, worker).await,
                due.min(limit as usize),
            ),
            Some(max) => {
                let live = self.live().len();
                let room = (max as usize).saturating_sub(live);
                let take = room.min(limit as usize);
                let (claimed, held_back) =
                    __store::claim_limited(&self.jobq, &self.queue, limit, LEASE, worker)
                        .await
                        .expect("limited claim");
                let expected_held = if take == 0 {
                    due > 0
                } else {
                    due >= take && take < limit as usize
                };
                self.check(held_back == expected_held, || {
                    format!(
                        "a limited claim of up to {limit} (limit {max}, {live} running, {due} due) said held back: {held_back}"
                    )
                });
                (claimed, due.min(take))
            }
        };
        self.log.push(format!(
            "{worker} claims up to {limit} -> {:?}",
            claimed.iter().map(fence).collect::<Vec<_>>()
        ));
        self.check(claimed.len() == expected, || {
            format!(
                "claim of up to {limit} got {}, with {due} due (limit {:?}): expected {expected}",
                claimed.len(),
                self.limit
            )
        });
        for c in &claimed {
            let row = self.rows.get(&c.id).cloned();
            self.check(
                row.as_ref()
                    .is_some_and(|r| r.status == JobStatus::Pending && r.due),
                || format!("claimed {} which is not due: {row:?}", c.id),
            );
            let row = self.row(c.id);
            row.status = JobStatus::Processing;
            row.token = Some(c.token);
            row.attempts += 1;
            row.expired = false;
            let (attempts, max_attempts) = (row.attempts, row.max_attempts);
            self.check(
                c.attempt == attempts && c.max_attempts == max_attempts,
                || format!("claim {c:?}: expected attempt {attempts} of {max_attempts}"),
            );
        }
        self.held[w].extend(claimed);
    }

    /// One batch of successes, as the completer writes it; the claimer
    /// forgets the whole batch afterwards, applied or fenced out.
    async fn complete(&mut self, w: usize, batch: Vec<Claim>) {
        if batch.is_empty() {
            return;
        }
        let fences: Vec<(i64, i64)> = batch.iter().map(fence).collect();
        let settled = __store::complete(&self.jobq, &fences)
            .await
            .expect("complete");
        self.log
            .push(format!("{} completes {fences:?} -> {settled}", WORKERS[w]));
        let mut expected = 0;
        for c in &batch {
            if let Some(row) = self.rows.get_mut(&c.id)
                && row.held_by(c.token)
            {
                row.leave_processing(JobStatus::Done, false);
                expected += 1;
            }
        }
        self.check(settled == expected, || {
            format!(
                "a batch of successes settled {settled} rows; only {expected} of its claims were their row's latest"
            )
        });
        self.held[w].retain(|h| !batch.contains(h));
        // The worker releases the keys of its batch, applied or fenced out.
        let mut keys: Vec<usize> = batch
            .iter()
            .filter_map(|c| self.rows.get(&c.id).and_then(|r| r.key))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        self.release(&keys, "completer").await;
    }

    async fn transition(
        &mut self,
        w: usize,
        c: Claim,
        failed: bool,
        delay: Duration,
        refund: bool,
        what: &str,
    ) {
        let error = (!refund).then(|| format!("{what} of attempt {}", c.attempt));
        let applied =
            __store::transition(&self.jobq, fence(&c), failed, delay, refund, error.clone())
                .await
                .expect("transition");
        self.log.push(format!(
            "{} {what}s {:?} (failed {failed}, delay {delay:?}) -> {applied}",
            WORKERS[w],
            fence(&c)
        ));
        let expected = self.rows.get(&c.id).is_some_and(|r| r.held_by(c.token));
        self.check(applied == expected, || {
            format!("{what} of {c:?} applied: {applied}, the latest claim: {expected}")
        });
        if expected {
            let row = self.row(c.id);
            if error.is_some() {
                row.recorded();
            }
            if refund {
                row.attempts -= 1;
            }
            let status = if failed {
                JobStatus::Failed
            } else {
                JobStatus::Pending
            };
            row.leave_processing(status, !failed && delay.is_zero());
        }
        self.held[w].retain(|h| *h != c);
        if failed && let Some(k) = self.rows.get(&c.id).and_then(|r| r.key) {
            self.release(&[k], "failed for good").await;
        }
    }

    async fn heartbeat(&mut self, w: usize) {
        if self.held[w].is_empty() {
            return;
        }
        let fences: Vec<(i64, i64)> = self.held[w].iter().map(fence).collect();
        let mut lost = __store::heartbeat(&self.jobq, &fences, LEASE)
            .await
            .expect("heartbeat");
        lost.sort_unstable();
        self.log.push(format!(
            "{} heartbeats {fences:?} -> lost {lost:?}",
            WORKERS[w]
        ));
        let mut expected: Vec<(i64, i64)> = Vec::new();
        for c in &self.held[w] {
            match self.rows.get_mut(&c.id) {
                Some(row) if row.held_by(c.token) => row.expired = false,
                _ => expected.push(fence(c)),
            }
        }
        expected.sort_unstable();
        self.check(lost == expected, || {
            format!("heartbeat lost {lost:?}; the claims no longer latest: {expected:?}")
        });
        self.held[w].retain(|c| !expected.contains(&fence(c)));
    }

    async fn expire(&mut self, id: i64) {
        let sql = self.db.pick(
            "UPDATE jobq_jobs SET run_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ? AND status = 'processing'",
            "UPDATE jobq_jobs SET run_at = now() - interval '1 hour' WHERE id = ? AND status = 'processing'",
            "UPDATE jobq_jobs SET run_at = run_at - 7200000000 WHERE id = ? AND status = 'processing'",
        );
        let n = self.db.execute(sql, &[Arg::Int(id)]).await.expect("expire");
        self.log.push(format!("lease of {id} runs out"));
        self.check(n == 1, || format!("expiring {id} touched {n} rows"));
        self.row(id).expired = true;
    }

    async fn reap(&mut self) {
        let reaped = __store::reap(&self.jobq, &self.queue, 100)
            .await
            .expect("reap");
        self.log.push(format!("reap -> {reaped}"));
        let mut expected = 0;
        for row in self.rows.values_mut() {
            if row.status == JobStatus::Processing && row.expired {
                expected += 1;
                row.recorded();
                if row.attempts >= row.max_attempts {
                    row.leave_processing(JobStatus::Failed, false);
                } else {
                    row.leave_processing(JobStatus::Pending, true);
                }
            }
        }
        self.check(reaped == expected, || {
            format!("reaped {reaped}, expired {expected}")
        });
    }

    async fn cancel(&mut self, id: i64) {
        let key = self.row(id).key;
        let before: Vec<Vec<i64>> = key.iter().map(|&k| self.blocked(k)).collect();
        let cancelled = self.jobq.cancel(id).await.expect("cancel");
        self.log.push(format!("cancel {id} -> {cancelled}"));
        let row = self.row(id);
        let expected = matches!(
            row.status,
            JobStatus::Pending | JobStatus::Processing | JobStatus::Blocked
        );
        if expected {
            row.leave_processing(JobStatus::Cancelled, false);
        }
        self.check(cancelled == expected, || {
            format!("cancel of {id}: {cancelled}")
        });
        // A cancel releases its job's key.
        if let Some(k) = key {
            self.after_release(&[k], before).await;
        }
    }

    async fn retry(&mut self, id: i64) {
        let key = self.row(id).key;
        let retried = self.jobq.retry(id).await.expect("retry");
        self.log.push(format!("retry {id} -> {retried}"));
        let row = self.row(id);
        let expected = matches!(row.status, JobStatus::Failed | JobStatus::Cancelled);
        if expected {
            // A keyed job comes back blocked, and its key is released.
            let status = if key.is_some() {
                JobStatus::Blocked
            } else {
                JobStatus::Pending
            };
            row.leave_processing(status, true);
            row.max_attempts = row.max_attempts.max(row.attempts + 1);
        }
        self.check(retried == expected, || format!("retry of {id}: {retried}"));
        if let Some(k) = key.filter(|_| expected) {
            let before = vec![self.blocked(k)];
            self.after_release(&[k], before).await;
        }
    }

    /// Deletes the queue's finished rows, as a prune with no retention
    /// would (the real prune works on every queue of the shared database).
    async fn prune(&mut self) {
        let n = self
            .db
            .execute(
                "DELETE FROM jobq_jobs WHERE queue = ? AND status IN ('done', 'cancelled', 'failed')",
                &[Arg::Text(self.queue.clone())],
            )
            .await
            .expect("prune");
        self.log.push(format!("prune -> {n}"));
        let before = self.rows.len();
        self.rows.retain(|_, r| {
            !matches!(
                r.status,
                JobStatus::Done | JobStatus::Cancelled | JobStatus::Failed
            )
        });
        let expected = (before - self.rows.len()) as u64;
        self.check(n == expected, || format!("pruned {n}, finished {expected}"));
    }

    /// A clean shutdown: every claim the claimer holds is released to
    /// `pending`, its attempt refunded.
    async fn shutdown(&mut self, w: usize) {
        self.log.push(format!("{} shuts down", WORKERS[w]));
        for c in self.held[w].clone() {
            self.transition(w, c, false, Duration::ZERO, true, "release")
                .await;
        }
    }

    /// The queue's rows as stored against the model.
    async fn compare(&self) {
        let sql = self.db.pick(
            "SELECT id, CAST(status AS CHAR), CAST(attempts AS SIGNED), lease_token FROM jobq_jobs WHERE queue = ? ORDER BY id",
            "SELECT id, status, CAST(attempts AS BIGINT), lease_token FROM jobq_jobs WHERE queue = ? ORDER BY id",
            "SELECT id, status, attempts, lease_token FROM jobq_jobs WHERE queue = ? ORDER BY id",
        );
        let stored: Vec<(i64, String, i64, Option<i64>)> = self
            .db
            .fetch_all(sql, &[Arg::Text(self.queue.clone())])
            .await
            .expect("read rows");
        let stored: Vec<(i64, String, i64, Option<i64>)> = stored;
        let expected: Vec<(i64, String, i64, Option<i64>)> = self
            .rows
            .iter()
            .map(|(id, r)| (*id, r.status.to_string(), i64::from(r.attempts), r.token))
            .collect();
        self.check(stored == expected, || {
            format!(
                "stored rows (id, status, attempts, token):\n  {stored:?}\nmodel:\n  {expected:?}"
            )
        });
        // What the attempts wrote: only the latest claims' writes landed.
        let sql = self.db.pick(
            "SELECT id, CAST(checkpoint AS CHAR), CAST(output AS CHAR), CAST(history AS CHAR) FROM jobq_jobs WHERE queue = ? ORDER BY id",
            "SELECT id, checkpoint, output, history::text FROM jobq_jobs WHERE queue = ? ORDER BY id",
            "SELECT id, checkpoint, output, history FROM jobq_jobs WHERE queue = ? ORDER BY id",
        );
        let written: Vec<StoredWrites> = self
            .db
            .fetch_all(sql, &[Arg::Text(self.queue.clone())])
            .await
            .expect("read the attempts' writes");
        let written: Vec<Writes> = written
            .into_iter()
            .map(|(id, checkpoint, output, history)| {
                let entries: Vec<serde_json::Value> = history
                    .as_deref()
                    .map(|h| serde_json::from_str(h).expect("the history is a JSON array"))
                    .unwrap_or_default();
                (id, checkpoint, output, entries.len())
            })
            .collect();
        let modelled: Vec<Writes> = self
            .rows
            .iter()
            .map(|(id, r)| (*id, r.checkpoint.clone(), r.output.clone(), r.history))
            .collect();
        self.check(written == modelled, || {
            format!(
                "stored (id, checkpoint, output, history entries):\n  {written:?}\nmodel:\n  {modelled:?}"
            )
        });
        if self.limit.is_some() {
            self.compare_slots().await;
        }
        self.check_limits();
    }

    /// Under a limit: every running row holds exactly one slot row, and
    /// no slot row holds an attempt that is not running (no slot leaked,
    /// none given twice).
    async fn compare_slots(&self) {
        let slots: Vec<(i32, Option<i64>, Option<i64>)> = self
            .db
            .fetch_all(
                "SELECT slot, job_id, lease_token FROM jobq_slots WHERE queue = ? ORDER BY slot",
                &[Arg::Text(self.queue.clone())],
            )
            .await
            .expect("read slots");
        let live = self.live();
        let mut held: Vec<(i64, i64)> = slots
            .iter()
            .filter_map(|&(_, id, token)| id.zip(token))
            .filter(|fence| live.contains(fence))
            .collect();
        held.sort_unstable();
        self.check(held == live, || {
            format!("slot rows {slots:?} hold the running attempts {held:?}; running: {live:?}")
        });
    }
}

fn env_number(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Seeded random schedules of two claimers over shared rows; after every
/// step each row is what the model says, and every settle, heartbeat and
/// release took effect exactly when it came from the row's latest claim.
/// After both claimers shut down, no row is `processing`.
async fn only_the_latest_claim_of_a_row_settles_renews_or_releases_it(db: TestDb) {
    run_models(&db, None).await;
}

/// The model under a global concurrency limit that changes now and then
/// (1 to 4, raised and lowered while jobs run): every claim is a limited
/// claim, takes exactly as many jobs as the limit leaves room for
/// (counting every job still running, also those started under a higher
/// limit) and says whether it held due jobs back; after every step each
/// running attempt holds exactly one slot row and no slot row holds an
/// attempt that is not running — whatever settled, failed, released,
/// expired, was reaped, cancelled or retried it — and the rows are what
/// the model says.
async fn a_limited_model_never_exceeds_its_limit_nor_leaks_a_slot(db: TestDb) {
    run_models(&db, Some(1..=3)).await;
}

/// The model over jobs of two concurrency keys (limits 1 and 2) and jobs
/// without a key, each job leaving its key released as a worker releases
/// it (after a batch of successes, a failure for good, a cancel, a retry;
/// and now and then the sweep of every key): after every step the rows are
/// what the model says (which waiting keyed jobs are `pending` and which
/// `blocked` read from the database), no key has more holders than its
/// limit, and after each release a key with room has no blocked job left
/// and its unblocked jobs are older than those still blocked.
async fn a_keyed_model_never_exceeds_a_keys_limit_and_unblocks_in_order(db: TestDb) {
    run_models_with(&db, None, true).await;
}

/// Runs `JOBQ_FENCING_SEEDS` seeded schedules of `JOBQ_FENCING_STEPS`
/// steps, under a limit drawn from `limits` if given, and checks that
/// after both claimers shut down the rows are what the model says and none
/// is `processing`.
async fn run_models(db: &TestDb, limits: Option<std::ops::RangeInclusive<u32>>) {
    run_models_with(db, limits, false).await;
}

/// [`run_models`], with jobs of two concurrency keys if `keyed`.
async fn run_models_with(db: &TestDb, limits: Option<std::ops::RangeInclusive<u32>>, keyed: bool) {
    let seeds = env_number("JOBQ_FENCING_SEEDS", 8);
    let steps = env_number("JOBQ_FENCING_STEPS", 150);
    let first_seed = env_number("JOBQ_FENCING_SEED", 0);
    let jobq = db.jobq().await;
    let started = Instant::now();
    let kind = match (&limits, keyed) {
        (Some(_), _) => "limited, ",
        (None, true) => "keyed, ",
        (None, false) => "",
    };
    for seed in first_seed..first_seed + seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = Model {
            db: Db::of(&jobq),
            jobq: jobq.clone(),
            queue: unique_queue("fence-model"),
            rows: BTreeMap::new(),
            held: [Vec::new(), Vec::new()],
            turn: 0,
            enqueued: 0,
            limit: None,
            keys: Vec::new(),
            log: vec![format!("{kind}seed {seed} on {:?}", db.backend())],
        };
        if keyed {
            model.keys = vec![
                (format!("k0:{}", model.queue), 1),
                (format!("k1:{}", model.queue), 2),
            ];
        }
        if let Some(limits) = &limits {
            model.set_limit(rng.random_range(limits.clone())).await;
        }
        for step in 0..steps {
            model.log.push(format!("step {step}:"));
            model.step(&mut rng).await;
        }
        model.shutdown(0).await;
        model.shutdown(1).await;
        model.compare().await;
        let processing = model
            .rows
            .values()
            .filter(|r| r.status == JobStatus::Processing)
            .count();
        model.check(processing == 0, || {
            format!("{processing} rows processing after both claimers shut down")
        });
    }
    eprintln!(
        "{:?}: {kind}{seeds} seeds × {steps} steps in {:.1?}",
        db.backend(),
        started.elapsed()
    );
}

contract!(
    a_stale_success_cannot_settle_a_job_its_worker_reclaimed,
    a_stale_heartbeat_is_reported_lost_although_its_worker_reclaimed_the_job,
    each_claimed_row_gets_a_token_of_its_own,
    only_the_latest_claim_of_a_row_settles_renews_or_releases_it,
    a_limited_model_never_exceeds_its_limit_nor_leaks_a_slot,
    a_keyed_model_never_exceeds_a_keys_limit_and_unblocks_in_order,
);
