//! Each backend's constructor and pool accessor on [`Jobq`]
//! (`Jobq::from_mysql_pool`, `Jobq::mysql_pool`, …), made from the list of
//! backends (`backends.rs`), which gives their names and docs; and the
//! accessors only MySQL/MariaDB has. Above the client: the backends below
//! never import it.

use crate::backends;
use crate::error::Result;
use crate::handle::Jobq;
use crate::store::{BackendStore, Store};

/// Makes each backend's `Jobq::from_…_pool` and `Jobq::…_pool` from the
/// list of backends, with the docs the list gives them.
macro_rules! pool_methods {
    (() $(
        $variant:ident($feature:literal) $module:ident::$store:ident {
            $(#[$doc:meta])*
            name: $name:literal,
            schemes: $schemes:tt,
            sqlx: ($pool:ident, $connection:ident),
            $(#[$from_doc:meta])*
            from_pool: $from_pool:ident,
            $(#[$pool_doc:meta])*
            pool: $pool_fn:ident = $store_pool:ident,
        }
    )*) => {$(
        #[cfg(feature = $feature)]
        impl Jobq {
            $(#[$from_doc])*
            pub async fn $from_pool(pool: sqlx::$pool) -> Result<Self> {
                let store = crate::store::$module::$store::from_pool(pool).await?;
                Ok(Self::new(Store::$variant(store)))
            }

            $(#[$pool_doc])*
            pub fn $pool_fn(&self) -> Option<&sqlx::$pool> {
                #[allow(unreachable_patterns)]
                match self.store() {
                    Store::$variant(s) => Some(s.$store_pool()),
                    _ => None,
                }
            }
        }
    )*};
}

backends::list!(pool_methods);

#[cfg(feature = "mysql")]
impl Jobq {
    /// The pool jobq's own statements run on, with jobq's session settings
    /// (for jobq's tests; an application uses [`mysql_pool`](Self::mysql_pool)).
    #[doc(hidden)]
    pub fn jobq_mysql_pool(&self) -> Option<&sqlx::MySqlPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => Some(s.pool()),
            _ => None,
        }
    }

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

#[cfg(feature = "postgres")]
impl Jobq {
    /// The pool jobq's own statements run on, with jobq's session settings
    /// (for jobq's tests; an application uses [`pg_pool`](Self::pg_pool)).
    #[doc(hidden)]
    pub fn jobq_pg_pool(&self) -> Option<&sqlx::PgPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::Postgres(s) => Some(s.pool()),
            _ => None,
        }
    }
}
