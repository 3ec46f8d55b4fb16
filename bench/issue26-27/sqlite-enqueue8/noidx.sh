#!/usr/bin/env bash
# head2 with and without the job_name index on SQLite, alternating.
set -u
out=$1; rounds=$2
mkdir -p $out
for r in $(seq 1 $rounds); do
  for v in idx noidx; do
    d=$(mktemp -d)
    JOBQ_BENCH_SCALE=1 /work/ab/head2 --backend sqlite --url sqlite://$d/b.db --runs 1 --only enqueue1 >/dev/null 2>&1
    if [ $v = noidx ]; then sqlite3 $d/b.db "DROP INDEX jobq_jobs_job_name"; fi
    JOBQ_BENCH_SCALE=5 /work/ab/head2 --backend sqlite --url sqlite://$d/b.db --runs 3 --only enqueue8 --out $out/$v-sqlite-$r.json > $out/$v-sqlite-$r.txt 2>&1
    rm -rf $d
  done
done
