#!/bin/bash
# Compares /app/errors.txt with the expected counts; writes the reward.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
tests="${EVALFLOW_TESTS:-/tests}"
mkdir -p "$logs"
if cmp -s "$tests/expected.txt" "$app/errors.txt"; then
  echo 1 > "$logs/reward.txt"
else
  diff "$tests/expected.txt" "$app/errors.txt"
  echo 0 > "$logs/reward.txt"
fi
