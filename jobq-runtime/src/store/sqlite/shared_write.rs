//! Shared writes: concurrent single-row enqueues of one store written
//! together, by whichever of them gets the write turn first.

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, PoisonError};

use tokio::sync::oneshot;

use super::{Queued, SqliteStore, insert_chunks, insert_keyless, insert_row, now_micros};
use crate::error::{Error, Result};
use crate::metrics::statement;
use crate::store::contract::NewJob;
use crate::store::policy::{retried, within};
use crate::types::Enqueued;

/// The answer of an enqueue whose shared write's task ended without sending
/// one (it panicked, or the runtime shut down under it): the row may or may
/// not be stored.
fn lost_shared_write() -> Error {
    Error::Database(sqlx::Error::WorkerCrashed)
}

/// Most rows one shared write takes (the rest wait for the next turn).
const SHARED_WRITE_MAX: usize = 256;

impl SqliteStore {
    /// Concurrent enqueues share a write: each queues its row, and the one
    /// whose turn at the write lock comes first writes every row queued by
    /// then in one transaction and answers the others, which find their
    /// answer when their own turn comes. With SQLite's single writer the
    /// statements would run one after another anyway; together they pay one
    /// commit and one turn. An enqueue dropped before its row was taken is
    /// not written.
    ///
    /// One try, as every write of the contract: an enqueue whose own write
    /// failed transiently is tried again by the policy, and queues its row
    /// again. A shared write is retried where it runs, on behalf of the
    /// enqueues it answers ([`write_shared`](Self::write_shared)).
    pub(super) async fn enqueue_shared(&self, job: &NewJob) -> Result<Enqueued> {
        if let Ok(turn) = Arc::clone(&self.writes).try_lock_owned() {
            let nobody_waits = self.queued().is_empty();
            if nobody_waits {
                // The turn is free and no row waits for it: this row
                // alone, as the loop below writes a lone row, without
                // queueing a copy of it.
                return self.write_alone(job, turn).await;
            }
        }
        let (reply, mut answer) = oneshot::channel();
        let seq = self.queued_seq.fetch_add(1, AtomicOrdering::Relaxed);
        self.queued().push(Queued {
            seq,
            job: job.clone(),
            reply,
        });
        loop {
            let turn = Arc::clone(&self.writes).lock_owned().await;
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Closed) => return Err(lost_shared_write()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let mut batch = {
                let mut queued = self.queued();
                let take = queued.len().min(SHARED_WRITE_MAX);
                queued.drain(..take).collect::<Vec<_>>()
            };
            batch.retain(|q| !q.reply.is_closed());
            if batch.is_empty() {
                // Every row taken was given up by its caller; this one's
                // is further back in the queue.
                continue;
            }
            let mine = batch.iter().any(|q| q.seq == seq);
            if mine && batch.len() == 1 {
                // Only this enqueue's own row: written here, with nobody
                // else's answer riding on this future.
                return self.write_alone(job, turn).await;
            }
            // Others wait on this write: it runs in a task of its own, so
            // that dropping this enqueue cannot abandon their rows.
            let store = self.clone();
            tokio::spawn(async move {
                store.write_shared(batch).await;
                drop(turn);
            });
            if mine {
                return answer.await.unwrap_or_else(|_| Err(lost_shared_write()));
            }
        }
    }

    /// `job`'s row on its own, holding the write `turn`.
    async fn write_alone(
        &self,
        job: &NewJob,
        turn: tokio::sync::OwnedMutexGuard<()>,
    ) -> Result<Enqueued> {
        let result = self
            .conns
            .run(async |conn| insert_row(conn, job, now_micros()).await)
            .await;
        drop(turn);
        Ok(result?)
    }

    fn queued(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `batch` in one statement (rows without keys) or one
    /// transaction, [`retried`] as the policy retries every write (its
    /// enqueues wait on its answer, in a task none of them runs), and
    /// answers each enqueue; if that fails, writes each row on its own
    /// (once: an enqueue given a transient error tries again itself), so
    /// that a bad row fails only its own enqueue. Called holding the write
    /// turn.
    async fn write_shared(&self, batch: Vec<Queued>) {
        let keyless = batch.iter().all(|queued| queued.job.plain());
        let together = retried(self, statement::ENQUEUE, || async {
            let inserted = self
                .conns
                .run(async |conn| {
                    if keyless {
                        insert_keyless(conn, &batch).await
                    } else {
                        insert_chunks(conn, &batch).await
                    }
                })
                .await?;
            Ok(inserted)
        })
        .await;
        match together {
            Ok(results) => {
                for (queued, result) in batch.into_iter().zip(results) {
                    let _ = queued.reply.send(Ok(result));
                }
            }
            // No answer in time: row by row would wait as long for each.
            Err(Error::StatementTimeout { statement, timeout }) => {
                for queued in batch {
                    let _ = queued
                        .reply
                        .send(Err(Error::StatementTimeout { statement, timeout }));
                }
            }
            Err(_) => {
                for queued in batch {
                    let insert = self
                        .conns
                        .run(async |conn| insert_row(conn, &queued.job, now_micros()).await);
                    let result = within(self.deadline, statement::ENQUEUE, insert).await;
                    let _ = queued.reply.send(result);
                }
            }
        }
    }
}
