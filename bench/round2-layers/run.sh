#!/usr/bin/env bash
# A/B of the drain and enqueue rows: BEFORE_BIN (db57d7b, before the round-2
# fixes and the layers) and AFTER_BIN (the layers), alternating sides in
# each round, every backend, on one quiet machine; each run measures jobq
# beside the raw-SQL baseline on the same server.
# Usage: [ONLY=rows] bench/round2-layers/run.sh BEFORE_BIN AFTER_BIN ROUNDS OUTDIR
set -euo pipefail
before=$1 after=$2 rounds=$3 out=$4
only=${ONLY:-drain1,drain8,drain32,enqueue1,enqueue8,enqueue100}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for backend in mysql postgres sqlite; do
    sides="before after"
    # Alternate which side goes first, so drift over the run favours neither.
    [ $((r % 2)) -eq 0 ] && sides="after before"
    for side in $sides; do
      bin=$before; [ "$side" = after ] && bin=$after
      "$bin" --backend "$backend" --runs 3 --only "$only" \
        --out "$out/$side-$backend-$r.json" > "$out/$side-$backend-$r.txt" 2>&1
    done
  done
done
