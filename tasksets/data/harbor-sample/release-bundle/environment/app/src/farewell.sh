#!/bin/sh
echo "Goodbye, ${1:-world}."
