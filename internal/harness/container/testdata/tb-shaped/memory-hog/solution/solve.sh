#!/bin/bash
# The whole stream in one shell variable: 300 MB in memory.
data=$(head -c 300M /dev/zero | tr '\0' x)
echo "${#data}" > /app/count.txt
