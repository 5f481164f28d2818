#!/usr/bin/env bash
# Keeps a Kafka run's observations as a flat directory for
# conformance/tests/kafka_runs/ (its README says what each file holds):
# only the lines the validator reads, the run's directory written RUN, one
# producer line in ten (and the last).
#
#   conformance/kafka/keep-run.sh <run directory> <kept directory>
#
# <run directory> is a run that highwater-kafka-soak --keep (or a failing
# kafka_cluster test) left: the one holding metadata.txt and cluster/.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 <run directory> <kept directory>" >&2
    exit 2
fi
run=$(cd "$1" && pwd)
out=$2
for need in metadata.txt producer.jsonl schedule.txt cluster/controller/server.properties; do
    [ -e "$run/$need" ] || { echo "$run has no $need: not a run directory" >&2; exit 1; }
done
# The run's directory as its brokers printed it (it may have moved since).
printed=$(sed -n 's#^log.dirs=\(.*\)/cluster/controller/data$#\1#p' \
    "$run/cluster/controller/server.properties")
mkdir -p "$out"
grep -v -e NO_OP_RECORD -e REGISTER_CONTROLLER_RECORD -e PRODUCER_IDS_RECORD \
    "$run/metadata.txt" > "$out/metadata.txt"
for b in 1 2 3; do
    dir=$run/cluster/broker-$b
    cp "$dir/state-change.log" "$out/broker-$b.state-change.log"
    grep -e "Recorded replica" -e "High watermark updated" \
        -e "Submitting ISR state change PendingExpandIsr" -e "ISR updated to" \
        -e "Partition state has been reset to the latest committed state" \
        "$dir/partition.log" > "$out/broker-$b.partition.log" || true
    grep -e "Truncating partition" -e "Truncating to" -e "Completed load of Log(" \
        "$dir/server.log" | sed -e "s#${printed:-$run}#RUN#g" -e "s#$run#RUN#g" > "$out/broker-$b.server.log" || true
done
awk 'NR % 10 == 1 { print; next } { last = $0 } END { if (NR % 10 != 1) print last }' \
    "$run/producer.jsonl" > "$out/producer.jsonl"
grep -v -e '^listeners=' -e '^controller.quorum.voters=' -e '^log.dirs=' \
    "$run/cluster/controller/server.properties" > "$out/controller.server.properties"
cp "$run/schedule.txt" "$out/schedule.txt"
[ -e "$run/faults.jsonl" ] && cp "$run/faults.jsonl" "$out/faults.jsonl"
du -sh "$out"
