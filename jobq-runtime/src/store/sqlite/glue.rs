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

impl sealed::Sealed for &mut SqliteConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut SqliteConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::Sqlite(self)
    }
}
