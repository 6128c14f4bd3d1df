#!/bin/bash
set -e
psql -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE items (name text, price integer);
INSERT INTO items VALUES ('apple', 3), ('pear', 5), ('plum', 7);
SQL
