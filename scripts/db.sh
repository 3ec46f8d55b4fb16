# Shell helpers on the database URLs the tests read (sourced, not run):
#   sql_mysql URL SQL    runs SQL on the MySQL/MariaDB server of URL (no database selected)
#   sql_postgres URL SQL runs SQL on the PostgreSQL server of URL, in its database
#   url_with_database URL NAME   URL with its database replaced by NAME
#   use_run_databases PREFIX     a database PREFIX_<time>_<pid> on each server,
#                                dropped on exit; JOBQ_*_URL point at it
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
  parse_mysql_url "$1"
  MYSQL_PWD=$MY_PASSWORD "$(command -v mariadb || command -v mysql)" \
    -h"$MY_HOST" -P"$MY_PORT" -u"$MY_USER" --batch --skip-column-names -e "$2"
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
use_run_databases() { # prefix
  RUN_DB="$1_$(date +%s)_$$"
  SERVER_MYSQL_URL=$JOBQ_MYSQL_URL
  SERVER_POSTGRES_URL=$JOBQ_POSTGRES_URL
  trap drop_run_databases EXIT
  sql_mysql "$SERVER_MYSQL_URL" "CREATE DATABASE $RUN_DB"
  sql_postgres "$SERVER_POSTGRES_URL" "CREATE DATABASE $RUN_DB"
  export JOBQ_MYSQL_URL JOBQ_POSTGRES_URL
  JOBQ_MYSQL_URL=$(url_with_database "$SERVER_MYSQL_URL" "$RUN_DB")
  JOBQ_POSTGRES_URL=$(url_with_database "$SERVER_POSTGRES_URL" "$RUN_DB")
}

drop_run_databases() {
  sql_mysql "$SERVER_MYSQL_URL" "DROP DATABASE IF EXISTS $RUN_DB" \
    || echo "could not drop $RUN_DB on MariaDB" >&2
  sql_postgres "$SERVER_POSTGRES_URL" "DROP DATABASE IF EXISTS $RUN_DB WITH (FORCE)" \
    || echo "could not drop $RUN_DB on PostgreSQL" >&2
}
