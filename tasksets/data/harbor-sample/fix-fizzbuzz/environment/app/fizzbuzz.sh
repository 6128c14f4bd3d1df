#!/bin/sh
# Prints the FizzBuzz sequence from 1 to N (the first argument).
n=${1:?usage: fizzbuzz.sh N}
i=1
while [ "$i" -le "$n" ]; do
  if [ $((i % 3)) -eq 0 ]; then
    echo Fizz
  elif [ $((i % 5)) -eq 0 ]; then
    echo Buzz
  elif [ $((i % 15)) -eq 0 ]; then
    echo FizzBuzz
  else
    echo "$i"
  fi
  i=$((i + 1))
done
