#!/bin/sh
# The verifier reads what the agent left in /logs/artifacts and adds its own.
cat /logs/artifacts/report.txt
echo graded > /logs/artifacts/verdict.txt
echo 1 > /logs/verifier/reward.txt
