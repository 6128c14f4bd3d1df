#!/bin/bash
set -e
cd "${EVALFLOW_WORKSPACE:-/app}"
awk '
  /^\[/ { if (section == "server") print "debug = false"; section = substr($0, 2, length($0) - 2) }
  section == "server" && /^$/ { print "debug = false"; section = "" }
  section == "server" && /^port[ \t]*=/ { print "port = 9090"; next }
  { print }
  END { if (section == "server") print "debug = false" }
' config.ini > config.ini.new
mv config.ini.new config.ini
