#!/bin/bash
# Checks /app/hello.txt and writes the reward (1 or 0), as Harbor tasks do.
mkdir -p /logs/verifier
if printf 'Hello, evalflow!\n' | cmp -s - /app/hello.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
