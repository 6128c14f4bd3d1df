#!/bin/bash
echo 42 > /app/answer.txt
echo scratch > /app/scratch.txt
mkdir -p /logs/artifacts && echo kept > /logs/artifacts/note.txt
