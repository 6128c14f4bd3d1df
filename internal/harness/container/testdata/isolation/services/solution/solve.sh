#!/bin/bash
set -e
echo 42 > /var/www/html/index.html
mkdir -p /run/sshd
/usr/sbin/sshd
nginx
