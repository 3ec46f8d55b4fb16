#!/usr/bin/env bash
# The whole test suite against real MariaDB, PostgreSQL and SQLite.
# Starts the databases if they are down. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
echo "MySQL/MariaDB: $JOBQ_MYSQL_URL"
echo "PostgreSQL:    $JOBQ_POSTGRES_URL"
# One invocation for unit, integration and doc tests (examples and binaries
# are built too): a separate `--doc` run resolved dev-dependencies
# differently and rebuilt half the tree.
cargo test --workspace "$@"
