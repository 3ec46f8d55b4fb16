# Shell helpers on the database URLs the tests read (sourced, not run):
#   sql_mysql URL SQL    runs SQL on the MySQL/MariaDB server of URL (no database selected)
#   sql_postgres URL SQL runs SQL on the PostgreSQL server of URL, in its database
#   url_with_database URL NAME   URL with its database replaced by NAME
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
