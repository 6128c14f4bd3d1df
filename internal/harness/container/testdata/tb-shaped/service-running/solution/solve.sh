#!/bin/bash
nohup /usr/local/bin/ticker >/dev/null 2>&1 &
for _ in $(seq 50); do [ -s /run/ticker.pid ] && break; sleep 0.1; done
