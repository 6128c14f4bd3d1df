#!/bin/bash
# The service must still run when the tests look.
pid=$(cat /run/ticker.pid 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
	a=$(cat /run/ticker.tick); sleep 1; b=$(cat /run/ticker.tick)
	[ "$a" != "$b" ] && { echo 1 > /logs/verifier/reward.txt; exit 0; }
fi
echo 0 > /logs/verifier/reward.txt
