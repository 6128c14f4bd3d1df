#!/bin/bash
# Compares /app/config.ini with the expected file; writes the reward.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
tests="${EVALFLOW_TESTS:-/tests}"
mkdir -p "$logs"
if cmp -s "$tests/expected.ini" "$app/config.ini"; then
  echo 1 > "$logs/reward.txt"
else
  diff "$tests/expected.ini" "$app/config.ini"
  echo 0 > "$logs/reward.txt"
fi
