#!/bin/sh
# The dashboard's pure modules (model.js, loader.js, layout.js, fmt.js) under Node's own
# test runner: no browser and no npm packages. Skips without node >= 18.
: "${top_srcdir:=.}"
command -v node >/dev/null 2>&1 || { echo "SKIP: node not installed"; exit 77; }
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 18 ] || { echo "SKIP: node $major has no --test"; exit 77; }
exec node --test "$top_srcdir"/tests/dashboard/*.test.mjs
