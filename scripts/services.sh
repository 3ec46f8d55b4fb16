#!/usr/bin/env bash
# Makes sure MariaDB and PostgreSQL run on 127.0.0.1 and that jobq can log in,
# then prints the environment the tests read:
#   eval "$(scripts/services.sh)"
# Safe to run again: it starts nothing that already runs.
set -euo pipefail

log() { echo "services: $*" >&2; }

wait_for() { # what, command…
  local what=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$what did not come up"; return 1
}

# --- MariaDB / MySQL -------------------------------------------------------
if ! command -v mariadb >/dev/null 2>&1 && ! command -v mysql >/dev/null 2>&1; then
  log "installing mariadb (client and server)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client >&2
fi
MYSQL_CLI=$(command -v mariadb || command -v mysql)
if ! "$MYSQL_CLI" -h127.0.0.1 -P3306 -uroot -e 'SELECT 1' >/dev/null 2>&1 \
   && ! "$MYSQL_CLI" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
  log "starting MariaDB"
  # By its pid file: a Galera test cluster's nodes are mariadbd processes too.
  start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid \
    --exec /usr/sbin/mariadbd >&2 || true
  wait_for "MariaDB" "$MYSQL_CLI" -uroot -e 'SELECT 1'
fi
if "$MYSQL_CLI" -h127.0.0.1 -P3306 -uroot -e 'SELECT 1' >/dev/null 2>&1; then
  "$MYSQL_CLI" -h127.0.0.1 -P3306 -uroot -e 'CREATE DATABASE IF NOT EXISTS test' >&2
  MYSQL_URL="mysql://root@127.0.0.1:3306/test"
else
  # root may only log in over the socket: make a dedicated user and database.
  log "root cannot log in over TCP; creating user jobq"
  "$MYSQL_CLI" -uroot <<'SQL' >&2
CREATE DATABASE IF NOT EXISTS jobq_test;
CREATE USER IF NOT EXISTS 'jobq'@'127.0.0.1' IDENTIFIED BY 'jobq';
CREATE USER IF NOT EXISTS 'jobq'@'localhost' IDENTIFIED BY 'jobq';
GRANT ALL ON jobq_test.* TO 'jobq'@'127.0.0.1';
GRANT ALL ON jobq_test.* TO 'jobq'@'localhost';
-- The databases test.sh makes per run (jobq_run_*) and tests make their
-- own; test.sh also makes a user per run with privileges on its databases
-- only (CREATE USER, and GRANT OPTION to hand those on), and a few tests
-- read other sessions' lock waits (PROCESS).
GRANT ALL ON `jobq\_%`.* TO 'jobq'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL ON `jobq\_%`.* TO 'jobq'@'localhost' WITH GRANT OPTION;
GRANT CREATE USER, PROCESS ON *.* TO 'jobq'@'127.0.0.1';
GRANT CREATE USER, PROCESS ON *.* TO 'jobq'@'localhost';
FLUSH PRIVILEGES;
SQL
  MYSQL_URL="mysql://jobq:jobq@127.0.0.1:3306/jobq_test"
fi

# --- PostgreSQL ------------------------------------------------------------
if ! command -v pg_isready >/dev/null 2>&1; then
  log "installing postgresql"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
  log "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start >&2 || true
  wait_for "PostgreSQL" pg_isready -h 127.0.0.1 -p 5432
fi
if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'SELECT 1' >/dev/null 2>&1; then
  psql -h 127.0.0.1 -U postgres -d postgres -Atc 'CREATE DATABASE test' >&2 || \
    su postgres -c "psql -Atc 'CREATE DATABASE test'" >&2
fi
PG_URL="postgres://postgres@127.0.0.1:5432/test"

echo "export JOBQ_MYSQL_URL=${JOBQ_MYSQL_URL:-$MYSQL_URL}"
echo "export JOBQ_POSTGRES_URL=${JOBQ_POSTGRES_URL:-$PG_URL}"
