#!/bin/bash
# The agent read the greeting from the service, which still answers.
want=hello-from-the-entrypoint
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$want" ] && [ "$(cat </dev/tcp/127.0.0.1/8080)" = "$want" ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
