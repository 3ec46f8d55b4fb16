#!/usr/bin/env bash
# A MariaDB Galera cluster by hand, the one the Galera tests start
# (tests/src/galera.rs): N mariadbd nodes (galera-4, binlog_format=ROW,
# innodb_autoinc_lock_mode=2, SST by rsync), each with its own datadir under
# /tmp/jobq-galera/slot<k>/ and its own address; user `jobq` (no password),
# database `jobq`.
#
#   scripts/galera.sh start [N]   start N nodes (default 3) in the background,
#                                 print their URLs once all are Synced
#   scripts/galera.sh status      wsrep state of each node
#   scripts/galera.sh stop        kill the nodes, remove their files
#
# In the foreground instead: `cargo run -p jobq-tests --bin jobq-galera`
# (JOBQ_GALERA_NODES=N), which holds the cluster until stdin closes (Ctrl-D).
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=/tmp/jobq-galera/byhand
mkdir -p "$STATE"

case "${1:-}" in
  start)
    if [ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then
      echo "a cluster is running (pid $(cat "$STATE/pid")); see $STATE/out" >&2; exit 1
    fi
    cargo build -q -p jobq-tests --bin jobq-galera
    bin="${CARGO_TARGET_DIR:-target}/debug/jobq-galera"
    rm -f "$STATE/in" && mkfifo "$STATE/in"
    # The fifo is the cluster's stdin: `stop` closes it by killing its holder.
    JOBQ_GALERA_NODES="${2:-3}" setsid "$bin" <"$STATE/in" >"$STATE/out" 2>&1 &
    echo $! >"$STATE/pid"
    sleep infinity >"$STATE/in" &
    echo $! >"$STATE/holder"
    for _ in $(seq 1 1200); do
      if grep -q "holding" "$STATE/out"; then cat "$STATE/out"; exit 0; fi
      if ! kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then cat "$STATE/out" >&2; exit 1; fi
      sleep 0.1
    done
    echo "not Synced after 120 s; see $STATE/out" >&2; exit 1
    ;;
  status)
    for sock in /tmp/jobq-galera/slot*/node*/mysqld.sock; do
      [ -S "$sock" ] || continue
      echo "$sock: $(mariadb --no-defaults -S "$sock" -uroot -N -B -e \
        "SELECT GROUP_CONCAT(CONCAT(VARIABLE_NAME, '=', VARIABLE_VALUE) SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE_COMMENT', 'WSREP_CLUSTER_SIZE', 'WSREP_CLUSTER_STATUS')" 2>&1)"
    done
    ;;
  stop)
    [ -f "$STATE/holder" ] && kill "$(cat "$STATE/holder")" 2>/dev/null || true
    if [ -f "$STATE/pid" ]; then
      for _ in $(seq 1 100); do kill -0 "$(cat "$STATE/pid")" 2>/dev/null || break; sleep 0.1; done
    fi
    cat "$STATE/out" 2>/dev/null | tail -n 1
    rm -rf "$STATE"
    ;;
  *)
    sed -n '2,15p' "$0" >&2; exit 2
    ;;
esac
