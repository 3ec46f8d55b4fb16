#!/usr/bin/env bash
# The whole test suite against real MariaDB, PostgreSQL and SQLite.
# Starts the databases if they are down. Extra arguments go to `cargo test`.
# The outage tests, which stop and restart the machine's MariaDB and
# PostgreSQL, run only with JOBQ_OUTAGE_TESTS=1 (.ci/run sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
echo "MySQL/MariaDB: $JOBQ_MYSQL_URL"
echo "PostgreSQL:    $JOBQ_POSTGRES_URL"
if [ "${JOBQ_OUTAGE_TESTS:-}" = 1 ]; then
  echo "Outage tests:  on (they stop and restart the local MariaDB and PostgreSQL)"
else
  echo "Outage tests:  off (JOBQ_OUTAGE_TESTS=1 runs them: they stop and restart the local servers)"
fi
# One invocation for unit, integration and doc tests (examples and binaries
# are built too): a separate `--doc` run resolved dev-dependencies
# differently and rebuilt half the tree.
cargo test --workspace "$@"
