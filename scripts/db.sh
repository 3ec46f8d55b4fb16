# Shell helpers on the database URLs the tests read (sourced, not run):
#   sql_mysql URL SQL    runs SQL on the MySQL/MariaDB server of URL (no database selected)
#   sql_mysql_in URL     the same with the SQL on stdin
#   sql_postgres URL SQL runs SQL on the PostgreSQL server of URL, in its database
#   url_with_database URL NAME   URL with its database replaced by NAME
#   use_run_databases PREFIX     a database PREFIX_<time>_<pid> on each server,
#                                dropped on exit; JOBQ_*_URL point at it, on
#                                MySQL/MariaDB as a user of this run's own
#                                with privileges on its databases only
# Passwords go through the environment (MYSQL_PWD, PGPASSWORD), never argv.

# Splits a mysql://user:password@host:port/db URL into MY_USER, MY_PASSWORD,
# MY_HOST, MY_PORT, MY_DB.
parse_mysql_url() {
  local rest=${1#*://}
  rest=${rest%%\?*}
  local userinfo=${rest%@*} hostdb=${rest##*@}
  MY_USER=${userinfo%%:*}
  MY_PASSWORD=
  [[ $userinfo == *:* ]] && MY_PASSWORD=${userinfo#*:}
  local hostport=${hostdb%%/*}
  MY_DB=${hostdb#*/}
  [[ $hostdb == */* ]] || MY_DB=
  MY_HOST=${hostport%%:*}
  MY_PORT=3306
  [[ $hostport == *:* ]] && MY_PORT=${hostport#*:}
  return 0
}

sql_mysql() { # url sql
  printf '%s\n' "$2" | sql_mysql_in "$1"
}

# Runs the SQL on stdin (a statement that holds a password stays out of argv).
sql_mysql_in() { # url
  parse_mysql_url "$1"
  MYSQL_PWD=$MY_PASSWORD "$(command -v mariadb || command -v mysql)" \
    -h"$MY_HOST" -P"$MY_PORT" -u"$MY_USER" --batch --skip-column-names
}

sql_postgres() { # url sql
  psql "$1" -X -q -At -v ON_ERROR_STOP=1 -c "$2"
}

url_with_database() { # url name
  local url=$1 name=$2 query=
  if [[ $url == *\?* ]]; then query="?${url#*\?}"; url=${url%%\?*}; fi
  local scheme=${url%%://*} rest=${url#*://}
  local head=${rest%%/*}
  echo "$scheme://$head/$name$query"
}

# Makes RUN_DB=PREFIX_<time>_<pid> on the MySQL/MariaDB and PostgreSQL
# servers of JOBQ_MYSQL_URL and JOBQ_POSTGRES_URL, drops both when the
# shell exits (also on failure or interrupt: it sets the EXIT trap), and
# points the two URLs (exported) at them.
#
# On MySQL/MariaDB the tests run as a user of this run's own, RUN_DB, with
# a random password and every privilege on the databases whose names start
# with RUN_DB (the run's, and those tests make for themselves, which are
# named after it) and none beyond: no PROCESS, no SUPER, nothing on other
# databases, as an application's own user has. So nothing jobq does, and
# no test, silently needs more. The user is dropped at the end with the
# databases. JOBQ_MYSQL_ADMIN_URL keeps the server's URL (with RUN_DB) for
# the few tests that need more, and say so: the doctor test that makes a
# user of its own, the lock-wait report (PROCESS), the outage tests.
use_run_databases() { # prefix
  RUN_DB="$1_$(date +%s)_$$"
  SERVER_MYSQL_URL=$JOBQ_MYSQL_URL
  SERVER_POSTGRES_URL=$JOBQ_POSTGRES_URL
  trap drop_run_databases EXIT
  sql_mysql "$SERVER_MYSQL_URL" "CREATE DATABASE $RUN_DB"
  sql_postgres "$SERVER_POSTGRES_URL" "CREATE DATABASE $RUN_DB"
  local password
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  # `_` is a wildcard in a database grant: escaped, the pattern is the
  # name as written, then anything.
  sql_mysql_in "$SERVER_MYSQL_URL" <<SQL
CREATE USER '$RUN_DB'@'%' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON \`${RUN_DB//_/\\_}%\`.* TO '$RUN_DB'@'%';
SQL
  export JOBQ_MYSQL_URL JOBQ_POSTGRES_URL JOBQ_MYSQL_ADMIN_URL
  JOBQ_MYSQL_ADMIN_URL=$(url_with_database "$SERVER_MYSQL_URL" "$RUN_DB")
  JOBQ_MYSQL_URL=$(url_with_user "$JOBQ_MYSQL_ADMIN_URL" "$RUN_DB" "$password")
  JOBQ_POSTGRES_URL=$(url_with_database "$SERVER_POSTGRES_URL" "$RUN_DB")
}

# URL with its userinfo replaced by USER:PASSWORD (hex: nothing to escape).
url_with_user() { # url user password
  local scheme=${1%%://*} rest=${1#*://}
  echo "$scheme://$2:$3@${rest#*@}"
}

drop_run_databases() {
  # The run's databases, and any a test made after it and left behind.
  local databases
  databases=$(sql_mysql "$SERVER_MYSQL_URL" "SELECT schema_name FROM information_schema.schemata
    WHERE schema_name LIKE '${RUN_DB//_/\\_}%'") || databases=$RUN_DB
  for db in $databases; do
    sql_mysql "$SERVER_MYSQL_URL" "DROP DATABASE IF EXISTS \`$db\`" \
      || echo "could not drop $db on MariaDB" >&2
  done
  sql_mysql "$SERVER_MYSQL_URL" "DROP USER IF EXISTS '$RUN_DB'@'%'" \
    || echo "could not drop the user $RUN_DB on MariaDB" >&2
  sql_postgres "$SERVER_POSTGRES_URL" "DROP DATABASE IF EXISTS $RUN_DB WITH (FORCE)" \
    || echo "could not drop $RUN_DB on PostgreSQL" >&2
}
