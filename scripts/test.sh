#!/usr/bin/env bash
# The whole test suite against real MariaDB, PostgreSQL and SQLite.
# Starts the databases if they are down. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
echo "MySQL/MariaDB: $JOBQ_MYSQL_URL"
echo "PostgreSQL:    $JOBQ_POSTGRES_URL"
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc "$@"
