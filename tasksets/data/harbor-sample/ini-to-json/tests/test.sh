#!/bin/bash
# Compares /app/settings.json with the expected JSON; writes the reward.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
tests="${EVALFLOW_TESTS:-/tests}"
mkdir -p "$logs"
if cmp -s "$tests/expected.json" "$app/settings.json"; then
  echo 1 > "$logs/reward.txt"
else
  diff "$tests/expected.json" "$app/settings.json"
  echo 0 > "$logs/reward.txt"
fi
