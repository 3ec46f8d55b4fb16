//! What the rest of the crate sees of PostgreSQL besides the list of backends
//! (`backends.rs`): the connection `enqueue_in` takes and, for `testing`, a
//! database of a test's own on its server.

use sqlx::PgConnection;

use crate::connection::{AnyConnection, EnqueueConnection, sealed};

impl sealed::Sealed for &mut PgConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut PgConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::Postgres(self)
    }
}

/// Creates (`create`) or drops database `name` on the server of `url`, for
/// `jobq_runtime::testing`.
#[cfg(feature = "testing")]
pub(crate) async fn server_database(url: &str, name: &str, create: bool) -> crate::Result<()> {
    use sqlx::{Connection, Executor};
    let mut conn = PgConnection::connect(url).await?;
    let sql = if create {
        super::sql::create_database(name)
    } else {
        super::sql::drop_database(name)
    };
    conn.execute(sql.as_str()).await?;
    conn.close().await?;
    Ok(())
}
