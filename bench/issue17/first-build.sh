#!/usr/bin/env bash
# The README's first command from cold, and the edit-run loop after it, per
# dev-profile variant. Each variant builds in a fresh CARGO_TARGET_DIR
# (deleted afterwards). Usage: bench/issue17/first-build.sh <name> [--config …]…
#   bench/issue17/first-build.sh current
#   bench/issue17/first-build.sh deps-o0 --config 'profile.dev.package."*".opt-level=0'
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; shift
dir=/tmp/cold-$name
rm -rf "$dir"
export CARGO_TARGET_DIR=$dir
now() { date +%s.%N; }
log=bench/issue17/$name.log
: >"$log"
start=$(now)
cargo run -p quickstart "$@" >>"$log" 2>&1
cold=$(echo "$(now) - $start" | bc)
crates=$(grep -c '^ *Compiling ' "$log" || true)
warm=()
for _ in 1 2 3; do
  touch quickstart/src/main.rs
  start=$(now)
  cargo run -p quickstart "$@" >>"$log" 2>&1
  warm+=("$(echo "$(now) - $start" | bc)")
done
size=$(du -sm "$dir" | cut -f1)
echo "$name: cold ${cold}s ($crates crates), edit-run ${warm[*]} s, target ${size} MB"
rm -rf "$dir"
