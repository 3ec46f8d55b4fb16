//! What the rest of the crate sees of MySQL/MariaDB besides the list of
//! backends (`backends.rs`): the connection `enqueue_in` takes and, for
//! `testing`, a database of a test's own on its server. And how a
//! `mariadb://` URL reaches the driver.

use sqlx::MySqlConnection;

use crate::connection::{AnyConnection, EnqueueConnection, sealed};

/// `mariadb://` is `mysql://` to the driver.
pub(super) fn mysql_url(url: &str) -> std::borrow::Cow<'_, str> {
    match url.strip_prefix("mariadb") {
        Some(rest) => format!("mysql{rest}").into(),
        None => url.into(),
    }
}

impl sealed::Sealed for &mut MySqlConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut MySqlConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::MySql(self)
    }
}

/// Creates (`create`) or drops database `name` on the server of `url`, for
/// `jobq_runtime::testing`.
#[cfg(feature = "testing")]
pub(crate) async fn server_database(url: &str, name: &str, create: bool) -> crate::Result<()> {
    use sqlx::{Connection, Executor};
    let mut conn = MySqlConnection::connect(&mysql_url(url)).await?;
    let sql = if create {
        super::sql::create_database(name)
    } else {
        conn.execute(super::sql::SHORT_LOCK_WAIT).await?;
        super::sql::drop_database(name)
    };
    conn.execute(sql.as_str()).await?;
    conn.close().await?;
    Ok(())
}
