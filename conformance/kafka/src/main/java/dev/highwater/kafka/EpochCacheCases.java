package dev.highwater.kafka;

import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ScheduledFuture;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.server.util.Scheduler;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

/**
 * Random sequences of operations on Kafka's own {@code LeaderEpochFileCache}, each backed by its
 * {@code leader-epoch-checkpoint} file, for the differential test
 * {@code conformance/tests/kafka_epoch_cache.rs}. The cache's background flush after a truncation
 * runs at once (a scheduler that runs what it is given), so that the file can be compared after
 * every operation.
 *
 * <p>Two kinds of sequence alternate. {@code o}: assigns (epochs 0 to 11, offsets 0 to 39; mostly
 * as a log grows, the rest anywhere, so that entries conflict), truncateFromEndAsyncFlush, truncateFromStartAsyncFlush and endOffsetFor
 * (epochs -1 to 12). {@code l}: a log of at most four records with leader epochs that rise along
 * it, as under KIP-320: appends (assign at the log end offset), truncations of the log
 * (truncateFromEndAsyncFlush) and lookups.
 *
 * <p>One line per operation: {@code SEQ KIND OP A B ANSWER ENTRIES FILE}, space-separated: OP is
 * {@code A} assign(A, B), {@code E} truncateFromEnd(A), {@code S} truncateFromStart(A), {@code Q}
 * endOffsetFor(A, B) (B the log end offset); ANSWER is {@code epoch:offset} for Q, else {@code -};
 * ENTRIES are the cache's {@code epoch:startOffset} pairs, comma-separated ({@code -} when empty);
 * FILE is the checkpoint file's bytes in hex ({@code -} while there is none).
 */
final class EpochCacheCases {
    private EpochCacheCases() {
    }

    /** Runs what it is given, at once, on the caller's thread. */
    private static final class InlineScheduler implements Scheduler {
        @Override
        public void startup() {
        }

        @Override
        public void shutdown() {
        }

        @Override
        public ScheduledFuture<?> schedule(String name, Runnable task, long delayMs, long periodMs) {
            task.run();
            return null;
        }

        @Override
        public void resizeThreadPool(int size) {
        }
    }

    static void run(String[] args) throws IOException {
        Map<String, String> o = LogSupport.parseArgs(args, 0);
        File dir = new File(LogSupport.required(o, "dir"));
        int sequences = Integer.parseInt(o.getOrDefault("sequences", "100000"));
        long seed = Long.parseLong(o.getOrDefault("seed", "0"));
        Files.createDirectories(dir.toPath());
        File file = LeaderEpochCheckpointFile.newFile(dir);
        SplittableRandom rnd = new SplittableRandom(seed);
        Scheduler scheduler = new InlineScheduler();
        TopicPartition tp = new TopicPartition("cases", 0);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 20);
        long ops = 0;
        for (int seq = 0; seq < sequences; seq++) {
            Files.deleteIfExists(file.toPath());
            LeaderEpochFileCache cache = new LeaderEpochFileCache(tp,
                new LeaderEpochCheckpointFile(file, new LogDirFailureChannel(1)), scheduler);
            boolean logLike = seq % 2 == 1;
            int steps = 1 + rnd.nextInt(logLike ? 12 : 20);
            // The log-like sequence's log: its end offset and the latest leader epoch so far.
            long leo = 0;
            int epoch = rnd.nextInt(3);
            for (int i = 0; i < steps; i++) {
                char op;
                long a;
                long b = 0;
                String answer = "-";
                if (logLike) {
                    int pick = rnd.nextInt(10);
                    if (pick < 5 && leo < 4) {
                        // An append, by the leader of this epoch or a later one.
                        if (rnd.nextInt(3) == 0) {
                            epoch += 1 + rnd.nextInt(2);
                        }
                        op = 'A';
                        a = epoch;
                        b = leo;
                        cache.assign(epoch, leo);
                        leo++;
                    } else if (pick < 7) {
                        op = 'E';
                        a = rnd.nextInt((int) leo + 2);
                        cache.truncateFromEndAsyncFlush(a);
                        leo = Math.min(leo, a);
                    } else {
                        op = 'Q';
                        a = rnd.nextInt(epoch + 3);
                        b = leo;
                        Map.Entry<Integer, Long> r = cache.endOffsetFor((int) a, b);
                        answer = r.getKey() + ":" + r.getValue();
                    }
                } else {
                    int pick = rnd.nextInt(10);
                    long latest = cache.latestEntry().map(EpochEntry::startOffset).orElse(0L);
                    if (pick < 5) {
                        op = 'A';
                        if (rnd.nextInt(10) < 6) {
                            // Mostly the way a log grows: this epoch or a later one, further on.
                            int latestEpoch = cache.latestEpoch().orElse(0);
                            a = Math.min(11, latestEpoch + rnd.nextInt(3));
                            b = Math.min(39, latest + rnd.nextInt(6));
                        } else {
                            a = rnd.nextInt(12);
                            b = rnd.nextInt(40);
                        }
                        cache.assign((int) a, b);
                    } else if (pick < 7) {
                        op = 'E';
                        a = rnd.nextInt(42);
                        cache.truncateFromEndAsyncFlush(a);
                    } else if (pick < 8) {
                        op = 'S';
                        a = rnd.nextInt(42);
                        cache.truncateFromStartAsyncFlush(a);
                    } else {
                        op = 'Q';
                        a = rnd.nextInt(14) - 1;
                        b = latest + rnd.nextInt(5);
                        Map.Entry<Integer, Long> r = cache.endOffsetFor((int) a, b);
                        answer = r.getKey() + ":" + r.getValue();
                    }
                }
                StringBuilder line = new StringBuilder(96);
                line.append(seq).append(' ').append(logLike ? 'l' : 'o').append(' ').append(op)
                    .append(' ').append(a).append(' ').append(b).append(' ').append(answer).append(' ');
                StringBuilder entries = new StringBuilder();
                for (EpochEntry e : cache.epochEntries()) {
                    if (entries.length() > 0) {
                        entries.append(',');
                    }
                    entries.append(e.epoch()).append(':').append(e.startOffset());
                }
                line.append(entries.length() == 0 ? "-" : entries).append(' ');
                if (file.exists()) {
                    for (byte x : Files.readAllBytes(file.toPath())) {
                        line.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
                    }
                } else {
                    line.append('-');
                }
                out.write(line.toString());
                out.write('\n');
                ops++;
            }
        }
        out.flush();
        System.err.println("epoch-cache-cases: " + sequences + " sequences, " + ops + " operations");
    }
}
