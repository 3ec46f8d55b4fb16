#!/usr/bin/env bash
# A/B of the MariaDB drains: 5bda241 (before, lane Option in the claim) and
# the lane removal (after), alternating rounds on one quiet machine.
# Usage: bench/lane-removal/run.sh BEFORE_BIN AFTER_BIN ROUNDS OUTDIR
set -euo pipefail
before=$1 after=$2 rounds=$3 out=$4
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    bin=$before; [ "$side" = after ] && bin=$after
    "$bin" --backend mysql --url "$JOBQ_MYSQL_URL" --runs 3 --only drain1,drain8,drain32 \
      --out "$out/$side-$r.json" > "$out/$side-$r.txt" 2>&1
  done
done
