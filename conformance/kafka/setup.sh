#!/usr/bin/env bash
# Builds the Kafka interop programs (src/main/java) with Maven, which fetches Apache Kafka
# from Maven Central. Idempotent: does nothing when the jar is newer than pom.xml and every
# source file. Prints what it does.
#
# Exit status: 0 when the programs are ready to run; 75 when Java or Maven is missing outside
# CI (the interop tests then skip, saying why); anything else is a failure. Under CI (CI=true)
# a missing java or mvn is installed with apt-get when possible, and is a failure otherwise.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/highwater-kafka-interop.jar"
in_ci() { [[ -n "${CI:-}" && "${CI}" != "false" && "${CI}" != "0" ]]; }

# Makes the named commands available, or explains why not and exits.
need() {
    local missing=() tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    ((${#missing[@]})) || return 0
    if ! in_ci; then
        echo "kafka interop: SKIPPED: ${missing[*]} not found; install Java 17 and Maven to build and run the Kafka interop programs"
        exit 75
    fi
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "kafka interop: ${missing[*]} missing; installing openjdk-17-jdk-headless and maven with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
    else
        echo "kafka interop: ${missing[*]} missing and cannot be installed here; CI needs Java 17 and Maven" >&2
        exit 1
    fi
}

need java
if [[ -f "$jar" && -d "$here/target/lib" && -d "$here/target/broker-lib" ]] &&
    [[ -z "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]]; then
    echo "kafka interop: $jar is up to date"
    exit 0
fi
need mvn

mkdir -p "$here/target"
# One build at a time (test binaries and CI may call this concurrently).
exec 9>"$here/target/.setup.lock"
command -v flock >/dev/null 2>&1 && flock 9
if [[ -f "$jar" && -d "$here/target/lib" && -d "$here/target/broker-lib" ]] &&
    [[ -z "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]]; then
    echo "kafka interop: $jar is up to date"
    exit 0
fi

echo "kafka interop: building $jar (mvn package; Maven fetches org.apache.kafka:kafka_2.13, kafka-storage, kafka-tools, kafka-metadata)"
rm -rf "$here/target/lib" "$here/target/broker-lib"
log="$(mktemp)"
if ! mvn -q -B -f "$here/pom.xml" package >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "kafka interop: mvn package failed" >&2
    exit 1
fi
rm -f "$log"
echo "kafka interop: built $jar"
