#!/usr/bin/env bash
# Runs one of the Kafka interop programs against files on disk. Build first with setup.sh.
#
#   kafka.sh write|recover|checkpoints|bench-append|bench-recover|controller-cases|epoch-cache-cases [--option value]...
#       the programs in src/main/java (kafka.sh help lists their options)
#   kafka.sh dump [DumpLogSegments options]...
#       Kafka's own kafka-dump-log tool, org.apache.kafka.tools.DumpLogSegments, e.g.
#       kafka.sh dump --deep-iteration --print-data-log --files DIR/00000000000000000000.log
#
# JAVA_OPTS is passed to the JVM.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/highwater-kafka-interop.jar"
if [[ ! -f "$jar" || ! -d "$here/target/lib" ]]; then
    echo "kafka.sh: $jar is not built; run $here/setup.sh" >&2
    exit 3
fi
cp="$jar:$here/target/lib/*"
cmd="${1:-help}"
shift || true
# shellcheck disable=SC2086
case "$cmd" in
    dump) exec java ${JAVA_OPTS:-} -cp "$cp" org.apache.kafka.tools.DumpLogSegments "$@" ;;
    help | -h | --help) exec java ${JAVA_OPTS:-} -cp "$cp" dev.highwater.kafka.Main ;;
    *) exec java ${JAVA_OPTS:-} -cp "$cp" dev.highwater.kafka.Main "$cmd" "$@" ;;
esac
