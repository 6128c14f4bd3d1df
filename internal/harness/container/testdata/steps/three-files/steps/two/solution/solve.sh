#!/bin/bash
echo two > /app/two
