#!/bin/bash
echo one > /app/one
