//! The connection [`Jobq::enqueue_in`](crate::Jobq::enqueue_in) writes to:
//! one type per compiled-in backend, implemented by each backend's
//! `glue.rs` and sealed.

use crate::backends;
use crate::types::Backend;

/// Seals [`EnqueueConnection`]: each backend's `glue.rs` implements it for
/// its connection type, and nothing outside jobq can.
pub(crate) mod sealed {
    #[allow(unreachable_pub)]
    pub trait Sealed {}
}

/// A connection [`Jobq::enqueue_in`](crate::Jobq::enqueue_in) can write to: `&mut MySqlConnection`,
/// `&mut SqliteConnection` or `&mut PgConnection` (for a transaction `tx`, pass `&mut *tx`),
/// each with its backend's feature.
///
/// These are the types of the sqlx jobq is built on, re-exported as
/// [`jobq_runtime::sqlx`](crate::sqlx) (sqlx 0.8). The same types of another
/// sqlx version (`cargo add sqlx` may pick a newer one) are other types:
/// depend on `sqlx = "0.8"`, or use the re-export. A type that is not one of
/// these fails to compile with a message that says so.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a connection jobq can enqueue through",
    label = "not a `&mut` connection of sqlx 0.8, the sqlx jobq is built on",
    note = "pass `&mut MySqlConnection`, `&mut PgConnection` or `&mut SqliteConnection` of sqlx 0.8 (for a transaction `tx`: `&mut *tx`; for a pooled connection `conn`: `&mut *conn`)",
    note = "if it is one of those, it comes from another version of sqlx than jobq's: depend on `sqlx = \"0.8\"` or use the re-export `jobq_runtime::sqlx`"
)]
pub trait EnqueueConnection<'c>: sealed::Sealed + Send {
    #[doc(hidden)]
    fn into_connection(self) -> AnyConnection<'c>;
}

/// Makes [`AnyConnection`] from the list of backends.
macro_rules! any_connection {
    (() $(
        $variant:ident($feature:literal) $module:ident::$store:ident {
            $(#[$doc:meta])*
            name: $name:literal,
            schemes: $schemes:tt,
            sqlx: ($pool:ident, $connection:ident),
            $($rest:tt)*
        }
    )*) => {
        /// The connection of one compiled-in backend.
        #[doc(hidden)]
        #[derive(Debug)]
        pub enum AnyConnection<'c> {
            $(
                #[cfg(feature = $feature)]
                $variant(&'c mut sqlx::$connection),
            )*
        }

        impl AnyConnection<'_> {
            pub(crate) fn backend(&self) -> Backend {
                match self {
                    $(
                        #[cfg(feature = $feature)]
                        Self::$variant(_) => Backend::$variant,
                    )*
                }
            }
        }
    };
}

backends::list!(any_connection);
