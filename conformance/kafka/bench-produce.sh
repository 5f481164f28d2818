#!/usr/bin/env bash
# Side-by-side produce benchmark (see conformance/examples/kafka_produce_bench.rs): acks=all
# produce to 3 replicas on 127.0.0.1 through the implementation's concurrent driver and through
# a real Apache Kafka 4.4 cluster (1 controller, 3 brokers), same records and batch sizes, one
# producer, closed loop; prints the throughput and p50/p99/max ack latency of each and the
# ratio. The cluster is stopped on success, failure and Ctrl-C.
#
#   conformance/kafka/bench-produce.sh [--records N] [--record-bytes N] [--batch-records K]
#       [--in-flight F] [--linger-ms L] [--warmup-records W] [--dir DIR] [--keep]
#
# A benchmark, not a test: it is not part of CI's test command.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v java >/dev/null && command -v mvn >/dev/null ||
    { echo "bench-produce.sh needs java 17 and mvn" >&2; exit 1; }
bash "$here/setup.sh"
cd "$root"
cargo build -q --release -p highwater-conformance --example kafka_produce_bench
exec "${CARGO_TARGET_DIR:-$root/target}/release/examples/kafka_produce_bench" "$@"
