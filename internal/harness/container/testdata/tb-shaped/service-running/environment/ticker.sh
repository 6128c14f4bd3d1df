#!/bin/bash
# A service: writes a tick every 0.2 s while it runs.
echo $$ > /run/ticker.pid
while true; do date +%s%N > /run/ticker.tick; sleep 0.2; done
