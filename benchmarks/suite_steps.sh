#!/usr/bin/env bash
# Times each step of `make test` before the tests, in a fresh clone (benchmarks/reports/test-suite-time.md).
# Usage: bash benchmarks/suite_steps.sh [REPO (default: this checkout)] [CLONE (default: a new temp dir)]
set -euo pipefail
repo=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
clone=${2:-$(mktemp -d)/clone}
rm -rf "$clone" && git clone -q "$repo" "$clone" && cd "$clone"
unset PYTHONDONTWRITEBYTECODE  # as the Makefile does
step() {  # run a step quietly, print its wall time
  local start end
  start=$(date +%s.%N); "$@" > /dev/null 2>&1; end=$(date +%s.%N)
  printf "%6.1f s  %s\n" "$(echo "$end - $start" | bc)" "$*" | cut -c1-110
}
step python3 -m venv .venv
step .venv/bin/python -m pip install -q --upgrade pip
step .venv/bin/python -m pip install -q --no-compile -e '.[test,box2d,ray,flower,tensorboard]'
step .venv/bin/ruff check .
start=$(date +%s.%N)
warm=$(mktemp -d)
(step .venv/bin/python -c 'import ray, flwr.server, flwr.simulation, stable_baselines3, opacus, tensorboard, pytest, xdist'
 step .venv/bin/frd compare --methods frd,pd,frl,independent --agents 2 --seeds 1 --hidden 8 --period 2 --max-episodes 4 \
   --no-progress --out "$warm") &
step .venv/bin/mypy
wait
end=$(date +%s.%N)
printf "%6.1f s  mypy beside the warm-up (wall)\n" "$(echo "$end - $start" | bc)"
rm -rf "$warm"
