#!/bin/bash
# As Harbor tasks are written: the paths of the task's container.
set -e
cd /app
printf 'Hello, evalflow!\n' > /app/hello.txt
