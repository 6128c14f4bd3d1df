#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
mkdir -p dist
cp src/*.sh dist/
chmod +x dist/*.sh
(cd dist && LC_ALL=C ls *.sh | xargs sha256sum > MANIFEST)
tar -czf "release-$(cat VERSION).tar.gz" dist
