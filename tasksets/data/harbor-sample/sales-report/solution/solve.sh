#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
{
  echo region,total
  awk -F, 'NR > 1 { total[$2] += $3 } END { for (r in total) print r "," total[r] }' sales.csv | LC_ALL=C sort
} > report.csv
