#!/bin/bash
# Checks /app/hello.txt and writes the reward (1 or 0).
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$logs"
if printf 'Hello, evalflow!\n' | cmp -s - "$app/hello.txt"; then
  echo "hello.txt is right"
  echo 1 > "$logs/reward.txt"
else
  echo "hello.txt is missing or wrong"
  echo 0 > "$logs/reward.txt"
fi
