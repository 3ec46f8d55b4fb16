#!/usr/bin/env bash
# Round robin of bench binaries on one backend's rows: ROUNDS rounds, each binary once per round (order rotated).
set -euo pipefail
out=$1; rounds=$2; shift 2
bins=("$@")
mkdir -p "$out"
fresh() {
  mysql -uroot -e "DROP DATABASE IF EXISTS jobq_bench; CREATE DATABASE jobq_bench"
  psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS jobq_bench" postgres 2>/dev/null
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE jobq_bench" postgres
}
n=${#bins[@]}
for r in $(seq 1 "$rounds"); do
  for backend in ${BACKENDS:-mysql}; do
    for i in $(seq 0 $((n-1))); do
      b=${bins[$(( (i + r) % n ))]}
      name=$(basename "$b")
      fresh
      "$b" --backend "$backend" --runs 3 --only "$ONLY" --out "$out/$name-$backend-$r.json" > "$out/$name-$backend-$r.txt" 2>&1
    done
  done
done
