#!/usr/bin/env bash
# The whole test suite against real MariaDB, PostgreSQL and SQLite.
# Starts the databases if they are down. Extra arguments go to `cargo test`
# (`-p jobq-tests --test list` runs one target).
#
# It leaves nothing behind: the tests run in a database made for this run
# on each server (jobq_run_<time>_<pid>, in place of the URLs' own), which
# is dropped at the end, also when a test fails or the run is interrupted;
# tests that need a database of their own make it (named after the run's)
# and drop it. SQLite databases are temporary files. `scripts/leftovers.sh`
# shows what the servers hold (run it before and after to check).
#
# On MySQL/MariaDB the tests run as a user made for this run, with every
# privilege on the run's databases and none beyond (as an application's
# own user): whatever needs more fails here first. The few tests that need
# more use JOBQ_MYSQL_ADMIN_URL, the server's own account (see scripts/db.sh).
#
# The outage tests, which stop and restart the machine's MariaDB and
# PostgreSQL, run only with JOBQ_OUTAGE_TESTS=1 (.ci/run sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
. scripts/db.sh

use_run_databases jobq_run

redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#'; }
echo "MySQL/MariaDB: $(echo "$JOBQ_MYSQL_URL" | redact) (dropped at the end)"
echo "PostgreSQL:    $(echo "$JOBQ_POSTGRES_URL" | redact) (dropped at the end)"
if [ "${JOBQ_OUTAGE_TESTS:-}" = 1 ]; then
  echo "Outage tests:  on (they stop and restart the local MariaDB and PostgreSQL)"
else
  echo "Outage tests:  off (JOBQ_OUTAGE_TESTS=1 runs them: they stop and restart the local servers)"
fi
# One invocation for unit, integration and doc tests (examples and binaries
# are built too): a separate `--doc` run resolved dev-dependencies
# differently and rebuilt half the tree. --no-fail-fast: a failing test
# file does not hide the results of the others.
# With `-p CRATE` among the arguments, only the crates named.
scope=--workspace
for arg in "$@"; do
  case "$arg" in -p|--package|-p*|--package=*) scope= ;; esac
done
cargo test $scope --no-fail-fast "$@"
