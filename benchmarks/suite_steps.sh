#!/usr/bin/env bash
# Times the steps of `make test` before the tests, in a fresh clone (benchmarks/reports/test-suite-time.md):
# the set-up, then mypy beside the warm-up's two steps, as the Makefile runs them.
# Usage: bash benchmarks/suite_steps.sh [REPO (default: this checkout)] [CLONE (default: a new temp dir)]
set -euo pipefail
repo=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
clone=${2:-$(mktemp -d)/clone}
rm -rf "$clone" && git clone -q "$repo" "$clone" && cd "$clone"
step() {  # run a step quietly, print its wall time
  local start end
  start=$(date +%s.%N); "$@" > /dev/null 2>&1; end=$(date +%s.%N)
  printf "%6.1f s  %s\n" "$(echo "$end - $start" | bc)" "$*"
}
step make -s setup
step .venv/bin/ruff check .
start=$(date +%s.%N)
(step make -s warm-imports; step make -s warm-kernels) &
step .venv/bin/mypy
wait
printf "%6.1f s  mypy beside the warm-up (wall)\n" "$(echo "$(date +%s.%N) - $start" | bc)"
