#!/bin/bash
set -e
sed -i 's/^mode=dev$/mode=prod/' /etc/shop/shop.conf
touch /root/.shop-migrated
