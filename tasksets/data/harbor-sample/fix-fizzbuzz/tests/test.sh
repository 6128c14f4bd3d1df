#!/bin/bash
# Runs fizzbuzz.sh on a few inputs and writes the reward (1 or 0).
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
tests="${EVALFLOW_TESTS:-/tests}"
mkdir -p "$logs"
ok=1
if ! sh "$app/fizzbuzz.sh" 16 | cmp -s - "$tests/expected-16.txt"; then
  echo "fizzbuzz.sh 16: wrong output"; ok=0
fi
if [ "$(sh "$app/fizzbuzz.sh" 45 | tail -n 1)" != FizzBuzz ]; then
  echo "fizzbuzz.sh 45: the last line should be FizzBuzz"; ok=0
fi
if [ "$(sh "$app/fizzbuzz.sh" 1)" != 1 ]; then
  echo "fizzbuzz.sh 1: should print 1"; ok=0
fi
echo "$ok" > "$logs/reward.txt"
