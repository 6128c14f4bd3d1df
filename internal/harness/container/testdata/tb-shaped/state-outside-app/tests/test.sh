#!/bin/bash
# What the agent changed outside /app is only there in its own sandbox.
if grep -qx 'mode=prod' /etc/shop/shop.conf && grep -qx 'port=8080' /etc/shop/shop.conf && [ -f /root/.shop-migrated ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
