#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
printf 'Hello, evalflow!\n' > hello.txt
