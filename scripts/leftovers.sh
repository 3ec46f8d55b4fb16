#!/usr/bin/env bash
# What the databases the tests are pointed at hold: every database on the
# MariaDB and PostgreSQL servers (but the servers' own) and the row count of
# each of their tables, one line each:
#   mysql     user      jobq_run_1733300000_4242@%
#   mysql     database  test
#   mysql     rows      test.jobq_jobs  1234
#   postgres  database  test
#   postgres  rows      test.public.jobq_jobs  1234
# Run it before and after `scripts/test.sh` and diff the two: a run leaves
# nothing behind when they are the same (other processes using the same
# servers change them too).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh 2>/dev/null)"
. scripts/db.sh

# The users test.sh makes per run (jobq_run_*) and tests make (jobq_doctor_*).
sql_mysql "$JOBQ_MYSQL_URL" "SELECT CONCAT(user, '@', host) FROM mysql.user
  WHERE user LIKE 'jobq\\_%' ORDER BY 1" | sed 's/^/mysql     user      /'
sql_mysql "$JOBQ_MYSQL_URL" "SELECT schema_name FROM information_schema.schemata
  WHERE schema_name NOT IN ('mysql','information_schema','performance_schema','sys')
  ORDER BY schema_name" | sed 's/^/mysql     database  /'
tables=$(sql_mysql "$JOBQ_MYSQL_URL" "SELECT CONCAT('\`', table_schema, '\`.\`', table_name, '\`')
  FROM information_schema.tables WHERE table_type = 'BASE TABLE'
  AND table_schema NOT IN ('mysql','information_schema','performance_schema','sys')
  ORDER BY table_schema, table_name")
for table in $tables; do
  count=$(sql_mysql "$JOBQ_MYSQL_URL" "SELECT COUNT(*) FROM $table")
  echo "mysql     rows      ${table//\`/}  $count"
done

databases=$(sql_postgres "$JOBQ_POSTGRES_URL" "SELECT datname FROM pg_database
  WHERE NOT datistemplate AND datname <> 'postgres' ORDER BY datname")
for db in $databases; do
  echo "postgres  database  $db"
  url=$(url_with_database "$JOBQ_POSTGRES_URL" "$db")
  sql_postgres "$url" "SELECT nspname FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog','information_schema','pg_toast','public')
    AND nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%' ORDER BY 1" \
    | sed "s/^/postgres  schema    $db./"
  tables=$(sql_postgres "$url" "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
    WHERE schemaname NOT IN ('pg_catalog','information_schema') ORDER BY 1")
  for table in $tables; do
    count=$(sql_postgres "$url" "SELECT COUNT(*) FROM $table")
    echo "postgres  rows      $db.$table  $count"
  done
done
