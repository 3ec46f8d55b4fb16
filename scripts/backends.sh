#!/usr/bin/env bash
# Each single-backend build of jobq-runtime: it compiles, it is lint-clean
# (its unit and integration tests included), it pulls in no other
# backend's sqlx driver nor sqlx's macros, and the tests that exist only in
# such a build pass (`store::tests::single_backend::`, e.g. the
# BackendNotCompiled error): at least one must run. Every other test runs in
# the default (all-backend) build.
#
# The backends are the features of jobq-runtime/Cargo.toml that enable
# their sqlx driver alone (`mysql = ["sqlx/mysql"]`): a unit test
# (`store::tests::the_list_names_every_backend_feature_of_the_manifest`)
# checks they are the list of backends' (jobq-runtime/src/backends.rs).
#
#   scripts/backends.sh            # every backend
#   scripts/backends.sh sqlite     # one
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t all < <(sed -nE 's/^([a-z0-9_]+) = \["sqlx\/\1"\]$/\1/p' jobq-runtime/Cargo.toml)
if [ ${#all[@]} -eq 0 ]; then
  echo "found no backend feature (\`name = [\"sqlx/name\"]\`) in jobq-runtime/Cargo.toml" >&2
  exit 1
fi

backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=("${all[@]}")

drivers=("${all[@]/#/sqlx-}")
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
  # (clippy compiles what it lints: a separate `cargo check` added nothing.)
  echo "== $backend: cargo clippy"
  cargo clippy "${flags[@]}" --all-targets -- -D warnings
  echo "== $backend: the tests only this build has"
  out=$(cargo test "${flags[@]}" --lib -- single_backend:: 2>&1) || {
    echo "$out" >&2
    exit 1
  }
  echo "$out" | grep -E '^test |^test result' || true
  if ! grep -qE '^test result: ok\. [1-9][0-9]* passed' <<<"$out"; then
    echo "the $backend-only build ran no single_backend:: test (renamed or moved?)" >&2
    exit 1
  fi
done
