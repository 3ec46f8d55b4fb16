//! What the rest of the crate sees of SQLite: the `Jobq` constructor and
//! accessor, and the connection `enqueue_in` takes.

use sqlx::{SqliteConnection, SqlitePool};

use super::SqliteStore;
use crate::handle::{AnyConnection, EnqueueConnection, sealed};
use crate::store::{BackendStore, Store};
use crate::{Jobq, Result};

impl Jobq {
    /// Uses an existing SQLite pool (it should have WAL and a busy timeout).
    pub async fn from_sqlite_pool(pool: SqlitePool) -> Result<Self> {
        Ok(Self::new(Store::Sqlite(
            SqliteStore::from_pool(pool).await?,
        )))
    }

    /// The SQLite pool, if this handle is on SQLite.
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::Sqlite(s) => Some(s.pool()),
            _ => None,
        }
    }
}

/// Makes every pending job of `queue` due now, for `jobq_runtime::testing`;
/// how many were scheduled. `None` if `jobq` is not on SQLite.
#[cfg(feature = "testing")]
pub(crate) async fn make_due(jobq: &Jobq, queue: &str) -> Option<Result<u64>> {
    let pool = jobq.sqlite_pool()?;
    let now = chrono::Utc::now().timestamp_micros();
    let done = sqlx::query(super::sql::MAKE_DUE)
        .bind(now)
        .bind(queue)
        .execute(pool)
        .await;
    Some(done.map(|d| d.rows_affected()).map_err(Into::into))
}

impl sealed::Sealed for &mut SqliteConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut SqliteConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::Sqlite(self)
    }
}
