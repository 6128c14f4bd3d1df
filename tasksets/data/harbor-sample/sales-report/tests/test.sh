#!/bin/bash
# Compares /app/report.csv with the expected report; writes the reward.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
tests="${EVALFLOW_TESTS:-/tests}"
mkdir -p "$logs"
if cmp -s "$tests/expected.csv" "$app/report.csv"; then
  echo 1 > "$logs/reward.txt"
else
  diff "$tests/expected.csv" "$app/report.csv"
  echo 0 > "$logs/reward.txt"
fi
