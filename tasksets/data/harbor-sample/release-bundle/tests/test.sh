#!/bin/bash
# Checks each step of the release and writes reward.json with one metric
# per step (1 or 0); the reward is their mean.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
archive="$app/${RELEASE_ARCHIVE:?the task sets RELEASE_ARCHIVE}"
mkdir -p "$logs"
scripts="farewell.sh greet.sh"

copied=1
for s in $scripts; do
  if ! cmp -s "$app/src/$s" "$app/dist/$s" || [ ! -x "$app/dist/$s" ]; then
    echo "dist/$s is missing, different or not executable"; copied=0
  fi
done
if [ -e "$app/dist/notes.txt" ]; then
  echo "dist/notes.txt is not a script"; copied=0
fi

manifest=0
if [ -d "$app/dist" ] && [ "$(cd "$app/src" && sha256sum $scripts)" = "$(cat "$app/dist/MANIFEST" 2>/dev/null)" ]; then
  manifest=1
else
  echo "dist/MANIFEST is missing or wrong"
fi

packed=0
if listing=$(tar -tzf "$archive" 2>/dev/null); then
  packed=1
  for f in dist/MANIFEST dist/greet.sh dist/farewell.sh; do
    if ! printf '%s\n' "$listing" | grep -qx "$f"; then
      echo "$f is not in the archive"; packed=0
    fi
  done
else
  echo "no readable archive $archive"
fi

printf '{"copied": %d, "manifest": %d, "archive": %d}\n' "$copied" "$manifest" "$packed" > "$logs/reward.json"
