#!/bin/bash
# jq comes from the image's RUN line: the tests need it too.
want=$(jq '[.items[].price] | add' /app/data.json)
if [ "$(cat /app/total.txt 2>/dev/null)" = "$want" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
