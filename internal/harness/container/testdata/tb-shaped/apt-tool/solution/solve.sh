#!/bin/bash
set -e
jq '[.items[].price] | add' /app/data.json > /app/total.txt
