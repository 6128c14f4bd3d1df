#!/bin/bash
# Both services must answer on their fixed ports: nginx with the page,
# sshd with its banner.
page=$( (exec 3<>/dev/tcp/127.0.0.1/80 && printf 'GET / HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3 && cat <&3) 2>/dev/null | tail -1)
banner=$( (exec 3<>/dev/tcp/127.0.0.1/22 && timeout 5 head -c 7 <&3) 2>/dev/null)
echo "page=$page banner=$banner"
if [ "$page" = 42 ] && [ "$banner" = SSH-2.0 ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
