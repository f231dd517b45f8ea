#!/bin/sh
# make check: the short variant of the whole-system scenarios (run.sh), well
# under 90 s: kill -9, outage past the spool, disk full, hostile clients and
# retention, with the exact ledger check per emitter.
exec bash "$top_srcdir/tests/system/run.sh" --short
