#!/bin/bash
# A client of the service waits for it a while, as it would for any
# service starting beside it.
for _ in $(seq 1 100); do
	if cat </dev/tcp/greeting.internal/8080 >/app/answer.txt 2>/dev/null; then
		exit 0
	fi
	sleep 0.1
done
echo "nothing answers on greeting.internal:8080" >&2
exit 1
