#!/usr/bin/env bash
# Builds the Kafka interop programs (Main in src/main/java) with Maven, which fetches
# Apache Kafka from Maven Central. Idempotent: does nothing when the jar is newer than
# pom.xml and every source file. Prints what it does.
#
# Without java or mvn: inside CI (CI=true) it installs them with apt-get when it can and
# fails otherwise; outside CI it prints why and exits 0, and the interop tests skip.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/highwater-kafka-interop.jar"

missing=()
command -v java >/dev/null 2>&1 || missing+=(java)
command -v mvn >/dev/null 2>&1 || missing+=(mvn)
if ((${#missing[@]})); then
    if [[ "${CI:-}" == "true" ]]; then
        if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "kafka interop: ${missing[*]} missing; installing openjdk-17-jdk-headless and maven with apt-get"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
        else
            echo "kafka interop: ${missing[*]} missing and cannot be installed here; CI needs Java 17 and Maven" >&2
            exit 1
        fi
    else
        echo "kafka interop: SKIPPED building the Kafka programs: ${missing[*]} not found (install Java 17 and Maven to run the Kafka interop tests)"
        exit 0
    fi
fi

if [[ -f "$jar" && -d "$here/target/lib" ]] &&
    [[ -z "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]]; then
    echo "kafka interop: $jar is up to date"
    exit 0
fi

echo "kafka interop: building $jar (mvn package; Maven fetches org.apache.kafka:kafka_2.13, kafka-storage, kafka-tools)"
rm -rf "$here/target/lib"
log="$(mktemp)"
if ! mvn -q -B -f "$here/pom.xml" package >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "kafka interop: mvn package failed" >&2
    exit 1
fi
rm -f "$log"
echo "kafka interop: built $jar"
