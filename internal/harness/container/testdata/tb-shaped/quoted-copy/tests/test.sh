#!/bin/bash
# The image's own build: quoted COPY, ARG, and a RUN that removed files.
if [ "$(cat /app/report.txt)" = final ] && [ "$(cat /app/greeting.txt)" = hello ] && [ -f /app/notes.txt ] && [ ! -e /app/hidden-tests ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
