//! postgres store (placeholder until implemented).

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use super::{ClaimedJob, Fence, NewJob, Transition};
use crate::types::{Enqueued, JobInfo};
use crate::{Error, Result};

fn missing<T>() -> Result<T> {
    Err(Error::invalid("the postgres store is not implemented yet"))
}

/// The postgres store.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub(crate) async fn connect(_url: &str, _max_connections: u32) -> Result<Self> {
        missing()
    }
    pub(crate) async fn from_pool(pool: PgPool) -> Result<Self> {
        Ok(Self { pool })
    }
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }
    pub(crate) async fn migrate(&self) -> Result<()> {
        missing()
    }
    pub(crate) async fn enqueue(&self, _job: &NewJob) -> Result<Enqueued> {
        missing()
    }
    pub(crate) async fn enqueue_many(&self, _jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        missing()
    }
    pub(crate) async fn claim(
        &self,
        _queue: &str,
        _limit: u32,
        _lease: Duration,
        _worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        missing()
    }
    pub(crate) async fn complete(&self, _fences: &[Fence]) -> Result<u64> {
        missing()
    }
    pub(crate) async fn transition(&self, _t: &Transition) -> Result<bool> {
        missing()
    }
    pub(crate) async fn heartbeat(
        &self,
        _fences: &[Fence],
        _lease: Duration,
    ) -> Result<Vec<Fence>> {
        missing()
    }
    pub(crate) async fn reap(&self, _queue: &str, _limit: u32) -> Result<u64> {
        missing()
    }
    pub(crate) async fn listen(
        &self,
        _queues: &[String],
        _stop: &tokio_util::sync::CancellationToken,
    ) {
    }

    pub(crate) async fn job(&self, _id: i64) -> Result<Option<JobInfo>> {
        missing()
    }
    pub(crate) async fn cancel(&self, _id: i64) -> Result<bool> {
        missing()
    }
    pub(crate) async fn retry(&self, _id: i64) -> Result<bool> {
        missing()
    }
}

/// One idempotent INSERT on the caller's connection.
pub(crate) async fn insert(_conn: &mut PgConnection, _job: &NewJob) -> Result<Enqueued> {
    missing()
}
