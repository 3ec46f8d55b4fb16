#!/usr/bin/env bash
# A/B of the hot-path rows (enqueue 1/8/100, drain 1/8/32): BEFORE_BIN
# (f301ed3, before issue 29's runtime changes) and AFTER_BIN, alternating
# which side goes first in each round, every backend; each run measures
# jobq beside the raw-SQL baseline on the same server, on fresh databases.
# [ONLY=rows] [BACKENDS="mysql postgres sqlite"]
# Usage: bench/issue29/hot-ab/run.sh BEFORE_BIN AFTER_BIN ROUNDS OUTDIR
set -euo pipefail
before=$1 after=$2 rounds=$3 out=$4
only=${ONLY:-drain1,drain8,drain32,enqueue1,enqueue8,enqueue100}
mkdir -p "$out"
fresh() {
  mysql -uroot -e "DROP DATABASE IF EXISTS jobq_bench; CREATE DATABASE jobq_bench"
  psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS jobq_bench" postgres
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE jobq_bench" postgres
}
for r in $(seq 1 "$rounds"); do
  for backend in ${BACKENDS:-mysql postgres sqlite}; do
    sides="before after"
    [ $((r % 2)) -eq 0 ] && sides="after before"
    for side in $sides; do
      bin=$before; [ "$side" = after ] && bin=$after
      fresh
      "$bin" --backend "$backend" --runs 3 --only "$only" \
        --out "$out/$side-$backend-$r.json" > "$out/$side-$backend-$r.txt" 2>&1
    done
  done
done
