#!/usr/bin/env bash
# Each single-backend build of jobq-runtime: it compiles, it is lint-clean
# (its unit and integration tests included), and it pulls in no other
# backend's sqlx driver nor sqlx's macros. Checks only, no tests: each
# backend's tests run in the default (all-backend) build.
#
#   scripts/backends.sh            # mysql, postgres, sqlite
#   scripts/backends.sh sqlite     # one
set -euo pipefail
cd "$(dirname "$0")/.."

backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(mysql postgres sqlite)

drivers=(sqlx-mysql sqlx-postgres sqlx-sqlite)
for backend in "${backends[@]}"; do
  flags=(-p jobq-runtime --no-default-features --features "$backend")
  echo "== $backend: cargo tree"
  tree=$(cargo tree "${flags[@]}" -e normal --prefix none)
  for driver in "${drivers[@]}" sqlx-macros-core; do
    if [ "$driver" != "sqlx-$backend" ] && grep -q "^$driver " <<<"$tree"; then
      echo "the $backend-only build of jobq-runtime depends on $driver:" >&2
      cargo tree "${flags[@]}" -e normal -i "$driver" >&2 || true
      exit 1
    fi
  done
  if ! grep -q "^sqlx-$backend " <<<"$tree"; then
    echo "the $backend-only build of jobq-runtime does not depend on sqlx-$backend" >&2
    exit 1
  fi
  echo "== $backend: cargo check"
  cargo check "${flags[@]}"
  echo "== $backend: cargo clippy"
  cargo clippy "${flags[@]}" --all-targets -- -D warnings
done
