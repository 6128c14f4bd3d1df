#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
awk '
  /^[ \t]*(#|$)/ { next }
  {
    i = index($0, "=")
    k = substr($0, 1, i - 1); v = substr($0, i + 1)
    gsub(/^[ \t]+|[ \t]+$/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
    lines[++n] = "  \"" k "\": \"" v "\""
  }
  END {
    print "{"
    for (j = 1; j <= n; j++) print lines[j] (j < n ? "," : "")
    print "}"
  }
' settings.conf > settings.json
