#!/bin/bash
# Graded in the verifier's own image, with the declared artifact and
# /logs/artifacts only.
echo "image=$(cat /etc/task-image 2>/dev/null || echo verifier) scratch=$([ -e /app/scratch.txt ] && echo yes || echo no) note=$(cat /logs/artifacts/note.txt 2>/dev/null)"
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
