#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
awk '$2 == "ERROR" { n[$3]++ } END { for (s in n) print s, n[s] }' server.log |
  LC_ALL=C sort -k2,2nr -k1,1 > errors.txt
