//! What the rest of the crate sees of MySQL/MariaDB: its URL schemes, the
//! `Jobq` constructors and accessor, and the connection `enqueue_in` takes.

use sqlx::{MySqlConnection, MySqlPool};

use super::MySqlStore;
use crate::handle::{AnyConnection, EnqueueConnection, sealed};
use crate::store::{BackendStore, Store};
use crate::{Jobq, Result};

/// `mariadb://` is `mysql://` to the driver.
pub(super) fn mysql_url(url: &str) -> std::borrow::Cow<'_, str> {
    match url.strip_prefix("mariadb") {
        Some(rest) => format!("mysql{rest}").into(),
        None => url.into(),
    }
}

impl Jobq {
    /// Uses an existing MySQL/MariaDB pool. jobq's own transactions still run
    /// at READ COMMITTED (set per transaction).
    pub async fn from_mysql_pool(pool: MySqlPool) -> Result<Self> {
        Ok(Self::new(Store::MySql(MySqlStore::from_pool(pool).await?)))
    }

    /// The MySQL pool, if this handle is on MySQL/MariaDB.
    pub fn mysql_pool(&self) -> Option<&MySqlPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => Some(s.pool()),
            _ => None,
        }
    }
}

impl Jobq {
    /// With a connect list (`mysql://user@node1:3306,node2:3306/app`), the
    /// `host:port` the pool opens its connections to now: the first node
    /// of the list that was ready, until it is lost. `None` for a URL of one
    /// host, a pool given by the caller, or another backend.
    pub fn current_node(&self) -> Option<String> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => s.current_node(),
            _ => None,
        }
    }
}

impl sealed::Sealed for &mut MySqlConnection {}

impl<'c> EnqueueConnection<'c> for &'c mut MySqlConnection {
    fn into_connection(self) -> AnyConnection<'c> {
        AnyConnection::MySql(self)
    }
}
