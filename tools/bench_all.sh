#!/usr/bin/env bash
# Run every benchmark given (default: bench/bench_*.py) with the venv's python, each to its end, and fail at the end
# listing every one that missed its target or failed: `make bench` (one miss must not hide the others' figures).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
scripts=("$@"); [[ ${#scripts[@]} -gt 0 ]] || scripts=(bench/bench_*.py)
missed=()
for b in "${scripts[@]}"; do
  echo "== $b"
  start=$SECONDS
  "$PY" "$b"; rc=$?
  echo "== $b: exit $rc after $((SECONDS - start)) s"
  [[ $rc -eq 0 ]] || missed+=("$b (exit $rc)")
done
if [[ ${#missed[@]} -gt 0 ]]; then
  echo "make bench: ${#missed[@]} of ${#scripts[@]} missed a target or failed: ${missed[*]}"
  exit 1
fi
echo "make bench: all ${#scripts[@]} met their targets"
