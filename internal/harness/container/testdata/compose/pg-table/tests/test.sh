#!/bin/bash
# The tests query the service, from a snapshot of the agent's container
# on the rollout's network.
got=$(psql -tAc "SELECT string_agg(name || '=' || price, ',' ORDER BY name) FROM items" 2>&1)
echo "items: $got"
if [ "$got" = "apple=3,pear=5,plum=7" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
