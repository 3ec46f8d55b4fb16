#!/usr/bin/env bash
# The many-hosts throughput table of docs/scaling-many-hosts.md: no-op jobs
# drained by 4 hosts x 2 worker processes (8 and 32 slots each) on loopback,
# and through a test network (network namespaces, each host's database
# traffic through a forwarder on the gateway) at +0 ms and +5 ms ± 2 ms
# round trip, on MariaDB and PostgreSQL. Needs root (namespaces).
#
#   scripts/many-hosts.sh                     # 20,000 jobs per drain
#   JOBQ_MANY_HOSTS_JOBS=50000 scripts/many-hosts.sh
#
# It runs in a database made for the run on each server (dropped at the
# end) and prints one markdown table per backend. Run it on a quiet machine:
# the numbers are the database's and the workers' CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/services.sh)"
. scripts/db.sh

use_run_databases jobq_many_hosts
echo "uptime: $(uptime)"
cargo test --release -p jobq-tests --test many_hosts -- --ignored --nocapture --test-threads=1 throughput_table "$@"
