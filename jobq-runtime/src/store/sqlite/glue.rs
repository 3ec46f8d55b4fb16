//! What the rest of the crate sees of SQLite besides the list of backends
//! (`backends.rs`): the connection `enqueue_in` takes.

use sqlx::SqliteConnection;

use crate::connection::{AnyConnection, EnqueueConnection, sealed};

impl sealed::Sealed for &mut SqliteConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut SqliteConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::Sqlite(self)
    }
}
