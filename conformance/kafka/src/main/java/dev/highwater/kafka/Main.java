package dev.highwater.kafka;

import java.util.Arrays;

/**
 * Entry point of the interop jar: {@code java -cp ... dev.highwater.kafka.Main COMMAND [--option value]...}.
 * Commands print JSON on stdout (or to {@code --out FILE}); errors go to stderr with a
 * non-zero exit status.
 */
public final class Main {
    private Main() {
    }

    private static final String USAGE = String.join("\n",
        "usage: Main COMMAND [--option value]...",
        "  write        --log-dir DIR [--stop close|crash] [--topic T] [--partition N] [--recovery-point N]",
        "               [--high-watermark N] [--index-interval-bytes N] [--out FILE]",
        "      writes a partition through Kafka's UnifiedLog (several segments and leader epochs),",
        "      writes the broker checkpoints with Kafka's OffsetCheckpointFile, leaves no clean-shutdown",
        "      marker, and prints the log as Kafka's classes read it back (with records). --stop crash",
        "      halts without closing the log (the active segment keeps its preallocated indexes).",
        "  recover      --log-dir DIR [--topic T] [--partition N] [--recovery-point N] [--records] [--out FILE]",
        "      opens the partition with Kafka's log loader (unclean unless the clean-shutdown marker is",
        "      present; recovery point from recovery-point-offset-checkpoint, else 0, unless given) and",
        "      prints the batches it kept.",
        "  fixtures     --log-dir DIR [--out FILE]",
        "      writes topic 'fixture' through Kafka's UnifiedLog: partitions 0-4 an idempotent producer's",
        "      batches in none, gzip, snappy, lz4 and zstd; 5 transactional batches with COMMIT and ABORT",
        "      markers; 6 a LogAppendTime topic. Prints Kafka's view of each and its timestamp lookups.",
        "  checkpoints  --log-dir DIR [--out FILE]",
        "      reads the broker checkpoints, every partition's leader-epoch-checkpoint and the",
        "      clean-shutdown marker with Kafka's checkpoint classes.",
        "  bench-append --dir DIR [--total-bytes N] [--record-bytes N] [--batch-bytes N] [--compression C]",
        "      appends through UnifiedLog.appendAsLeader with no flush, prints the time, and halts",
        "      without closing the log (an unclean stop).",
        "  bench-recover --dir DIR",
        "      times Kafka's log loader recovering DIR from offset 0 after an unclean stop.",
        "  bench-read   --dir DIR",
        "      opens DIR (untimed) and times reading every record, decompressing, through FileRecords.",
        "  controller-cases [--min-replicas N] [--max-replicas N] [--sample-shift S0,S1,...] [--seed N]",
        "      prints, one line per case, Kafka's PartitionChangeBuilder's answer to every event over an",
        "      enumeration of partition states (ControllerCases.java has the line format); with",
        "      --sample-shift, replica count n keeps one case in 2^Sn, chosen by a seeded hash.",
        "  epoch-cache-cases --dir DIR [--sequences N] [--seed N]",
        "      runs random sequences of assign / truncateFromEnd / truncateFromStart / endOffsetFor on",
        "      Kafka's LeaderEpochFileCache and prints each operation, its answer and the checkpoint file.",
        "  brokers      --bootstrap B [--count N] [--timeout-ms T]",
        "      waits until N brokers of a running cluster are registered and unfenced.",
        "  create-topic --bootstrap B --topic T [--partitions N] [--replication-factor N]",
        "  describe     --bootstrap B --topic T",
        "      prints each partition's leader, replicas, ISR and ELR, one JSON line each.",
        "  produce      --bootstrap B --topic T --acks all|1|0 [--seconds S] [--interval-ms M]",
        "      sends 0, 1, 2, ... to partition 0 and prints one JSON line per outcome (ack or error).",
        "  produce-bench --bootstrap B --topic T [--records N] [--record-bytes N] [--batch-records K]",
        "               [--in-flight F] [--linger-ms L] [--warmup-records W]",
        "      acks=all, closed loop (F batches of K records unacknowledged at most); prints one JSON",
        "      line: throughput and p50/p99/max ack latency (send to callback).",
        "  consume      --bootstrap B --topic T [--timeout-ms T]",
        "      reads partition 0 up to its end offset and prints one JSON line per record.",
        "  read         --bootstrap B --topic T",
        "      reads partition 0 from its start, continuously, until stdin closes; one JSON line per",
        "      record read (session, offset, value, wall-clock ms), errors as lines, never dying.");

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println(USAGE);
            System.exit(2);
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        try {
            switch (args[0]) {
                case "write" -> WritePartition.run(rest);
                case "recover" -> RecoverPartition.run(rest);
                case "checkpoints" -> ReadCheckpoints.run(rest);
                case "fixtures" -> Fixtures.run(rest);
                case "bench-append" -> Bench.append(rest);
                case "bench-recover" -> Bench.recover(rest);
                case "bench-read" -> Bench.read(rest);
                case "controller-cases" -> ControllerCases.run(rest);
                case "epoch-cache-cases" -> EpochCacheCases.run(rest);
                case "brokers" -> ClusterClient.brokers(rest);
                case "create-topic" -> ClusterClient.createTopic(rest);
                case "describe" -> ClusterClient.describe(rest);
                case "produce" -> ClusterClient.produce(rest);
                case "produce-bench" -> ClusterClient.produceBench(rest);
                case "consume" -> ClusterClient.consume(rest);
                case "read" -> ClusterClient.read(rest);
                default -> {
                    System.err.println("unknown command " + args[0] + "\n" + USAGE);
                    System.exit(2);
                }
            }
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage() + "\n" + USAGE);
            System.exit(2);
        }
        // Kafka's scheduler threads are daemons, but end promptly and explicitly.
        System.exit(0);
    }
}
