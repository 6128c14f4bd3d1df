#!/bin/bash
# Checks the names and contents of /app/photos; writes the reward.
app="${EVALFLOW_WORKSPACE:-/app}"
logs="${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$logs"
ok=1
want="beach-day.jpg
img_0001.jpg
img_0002.jpg
old-town-square.jpg
sunset.jpg"
got=$(cd "$app/photos" 2>/dev/null && LC_ALL=C ls)
if [ "$got" != "$want" ]; then
  echo "photos/ holds:"; echo "$got"; ok=0
fi
check() { [ "$(cat "$app/photos/$1" 2>/dev/null)" = "photo: $2" ] || { echo "$1 lost its content"; ok=0; }; }
check img_0001.jpg "IMG_0001.JPG"
check img_0002.jpg "IMG_0002.jpeg"
check beach-day.jpg "Beach Day.JPEG"
check old-town-square.jpg "Old Town Square.jpg"
check sunset.jpg "sunset.Jpg"
echo "$ok" > "$logs/reward.txt"
