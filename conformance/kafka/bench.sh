#!/usr/bin/env bash
# Side-by-side benchmark of Kafka's log and ours (see conformance/examples/kafka_bench.rs):
# 1 GiB of 1 KiB records in 16 KiB batches appended with no flush, then recovery of that
# unflushed gigabyte after an unclean stop; prints each figure and the ratio. Needs about
# 2.2 GB of free disk under the data directory (default: $TMPDIR/highwater-kafka-bench).
#
#   conformance/kafka/bench.sh [--dir DIR] [--total-bytes N] [--record-bytes N] [--batch-bytes N] [--keep]
#
# A benchmark, not a test: it is not part of CI's test command.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v java >/dev/null && command -v mvn >/dev/null ||
    { echo "bench.sh needs java 17 and mvn" >&2; exit 1; }
bash "$here/setup.sh"
cd "$root"
cargo build -q --release -p highwater-conformance --example kafka_bench
exec "${CARGO_TARGET_DIR:-$root/target}/release/examples/kafka_bench" "$@"
