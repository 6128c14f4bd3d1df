#!/bin/bash
# The second step's check: what the first step wrote is still there, and
# /app/two holds "two".
ok=1
[ "$(cat /app/one 2>/dev/null)" = one ] || ok=0
[ "$(cat /app/two 2>/dev/null)" = two ] || ok=0
echo $ok > /logs/verifier/reward.txt
