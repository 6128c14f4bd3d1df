#!/bin/bash
# The first step's check: /app/one holds "one".
[ "$(cat /app/one 2>/dev/null)" = one ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
