#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
# Test for multiples of 15 first.
cat > fizzbuzz.sh <<'SCRIPT'
#!/bin/sh
# Prints the FizzBuzz sequence from 1 to N (the first argument).
n=${1:?usage: fizzbuzz.sh N}
i=1
while [ "$i" -le "$n" ]; do
  if [ $((i % 15)) -eq 0 ]; then
    echo FizzBuzz
  elif [ $((i % 3)) -eq 0 ]; then
    echo Fizz
  elif [ $((i % 5)) -eq 0 ]; then
    echo Buzz
  else
    echo "$i"
  fi
  i=$((i + 1))
done
SCRIPT
