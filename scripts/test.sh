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
if [ $# -gt 0 ]; then
  cargo test $scope --no-fail-fast "$@"
  exit
fi

# The whole suite builds first, then starts one Galera cluster for the
# whole run (about 11 s): the test binaries that only connect to a cluster
# (`TestDb::galera`, nine of them) use it instead of each starting its own;
# those that kill, restart or cut off nodes still start theirs. The
# cluster's process stops when its stdin closes: at this script's exit.
cargo test --workspace --no-run
galera_urls=() galera_said=()
coproc GALERA { exec "${CARGO_TARGET_DIR:-target}/debug/jobq-galera" 2>&1; }
galera_pid=$GALERA_PID
galera_in=${GALERA[1]} galera_out=${GALERA[0]}
while IFS= read -r line <&"$galera_out"; do
  case "$line" in
    "node "*": mysql://"*) galera_urls+=("${line#*: }") ;;
    holding*) break ;;
    *) galera_said+=("$line") ;;
  esac
done
stop_galera() {
  exec {galera_in}>&- 2>/dev/null || true
  wait "$galera_pid" 2>/dev/null || true
}
trap 'stop_galera; drop_run_databases' EXIT
if [ ${#galera_urls[@]} -gt 0 ]; then
  JOBQ_GALERA_URLS=$(IFS=,; echo "${galera_urls[*]}")
  export JOBQ_GALERA_URLS
  echo "Galera:        ${#galera_urls[@]} nodes for the run ($JOBQ_GALERA_URLS)"
else
  echo "Galera:        no cluster for the run (${galera_said[*]:-}): each Galera test binary starts its own"
fi
# (The tests hold neither end of the cluster's pipes: a process a test
# leaves behind must not keep the cluster up after the run.)
cargo test --workspace --no-fail-fast {galera_in}>&- {galera_out}>&-
