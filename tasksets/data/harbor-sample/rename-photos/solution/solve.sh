#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}/photos"
for f in *; do
  new=$(printf '%s' "$f" | tr 'A-Z ' 'a-z-' | sed 's/\.jpe\{0,1\}g$/.jpg/')
  if [ "$f" != "$new" ]; then
    mv -- "$f" "$new"
  fi
done
