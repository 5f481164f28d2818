package dev.highwater.kafka;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.log.LogAppendInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.UnifiedLog;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes one partition directory through Kafka's own log code: {@link UnifiedLog#appendAsLeader}
 * for every batch (Kafka assigns offsets and stamps the leader epoch) and {@link UnifiedLog#roll}
 * between segments. The content is deterministic: see {@link #PLAN} and {@link #record}.
 */
final class WritePartition {
    private WritePartition() {
    }

    /** CreateTime of record 0; record i is one second later, with some records stepping back. */
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;

    /**
     * One row per segment; each pair is (leader epoch, records in the batch). The last
     * segment stays active. Epochs skip 2 and 5 (a leader that wrote nothing) on purpose.
     */
    static final int[][][] PLAN = {
        {{0, 1}, {0, 3}, {0, 5}, {0, 2}, {1, 4}, {1, 1}},
        {{1, 3}, {1, 6}, {3, 2}, {3, 2}, {3, 7}},
        {{3, 5}, {4, 1}, {4, 8}, {4, 3}, {4, 2}},
        {{6, 4}, {6, 4}, {6, 2}},
    };

    private static final String ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

    /**
     * Record number {@code i}: keys, values and headers are ASCII so that DumpLogSegments'
     * string output can be compared exactly; some keys and values are null (a tombstone),
     * some records have no headers, some repeat a header key, and some header values are null.
     */
    static SimpleRecord record(int i) {
        String key = i % 7 == 6 ? null : "key-" + i;
        String value = null;
        if (i % 11 != 10) {
            StringBuilder v = new StringBuilder("value-").append(i).append('-');
            int len = (i * 37) % 200;
            for (int k = 0; k < len; k++) {
                v.append(ALPHABET.charAt((i + k) % ALPHABET.length()));
            }
            value = v.toString();
        }
        List<Header> headers = new ArrayList<>();
        switch (i % 3) {
            case 1 -> headers.add(new RecordHeader("trace", LogSupport.utf8("t-" + i)));
            case 2 -> {
                headers.add(new RecordHeader("a", LogSupport.utf8("x" + i)));
                headers.add(new RecordHeader("b", (byte[]) null));
                headers.add(new RecordHeader("a", LogSupport.utf8("dup")));
            }
            default -> {
            }
        }
        long timestamp = BASE_TIMESTAMP + i * 1000L - (i % 5 == 3 ? 2500L : 0L);
        return new SimpleRecord(timestamp, LogSupport.utf8(key), LogSupport.utf8(value),
            headers.toArray(new Header[0]));
    }

    static void run(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File logDir = new File(LogSupport.required(args, "log-dir"));
        String topic = args.getOrDefault("topic", "interop");
        int partition = Integer.parseInt(args.getOrDefault("partition", "0"));
        String stop = args.getOrDefault("stop", "close");
        if (!stop.equals("close") && !stop.equals("crash")) {
            throw new IllegalArgumentException("--stop must be close or crash");
        }
        args.putIfAbsent("index-interval-bytes", "256");
        TopicPartition tp = new TopicPartition(topic, partition);
        File dir = new File(logDir, UnifiedLog.logDirName(tp));
        if (dir.exists()) {
            throw new IllegalArgumentException(dir + " already exists");
        }
        if (!dir.mkdirs()) {
            throw new IllegalStateException("cannot create " + dir);
        }

        LogConfig config = LogSupport.logConfig(args);
        KafkaScheduler scheduler = LogSupport.startScheduler();
        UnifiedLog log = LogSupport.open(dir, config, 0L, 0L, false, scheduler);
        int next = 0;
        for (int s = 0; s < PLAN.length; s++) {
            if (s > 0) {
                log.roll();
            }
            for (int[] batch : PLAN[s]) {
                int epoch = batch[0];
                SimpleRecord[] records = new SimpleRecord[batch[1]];
                for (int k = 0; k < records.length; k++) {
                    records[k] = record(next + k);
                }
                MemoryRecords memoryRecords = MemoryRecords.withRecords(RecordBatch.CURRENT_MAGIC_VALUE, 0L,
                    Compression.NONE, TimestampType.CREATE_TIME, records);
                LogAppendInfo info = log.appendAsLeader(memoryRecords, epoch);
                if (info.firstOffset() != next || info.lastOffset() != next + records.length - 1) {
                    throw new IllegalStateException("Kafka assigned offsets " + info.firstOffset() + ".."
                        + info.lastOffset() + ", expected " + next + ".." + (next + records.length - 1));
                }
                next += records.length;
            }
        }

        long leo = log.logEndOffset();
        long hw = Long.parseLong(args.getOrDefault("high-watermark", Long.toString(leo - 3)));
        log.updateHighWatermark(hw);
        long recoveryPoint = Long.parseLong(args.getOrDefault("recovery-point", "0"));

        // What a broker's LogManager and ReplicaManager would checkpoint for this log directory.
        LogDirFailureChannel failures = new LogDirFailureChannel(1);
        new OffsetCheckpointFile(new File(logDir, LogSupport.RECOVERY_POINT_CHECKPOINT), failures)
            .write(Map.of(tp, recoveryPoint));
        new OffsetCheckpointFile(new File(logDir, LogSupport.LOG_START_OFFSET_CHECKPOINT), failures)
            .write(Map.of(tp, log.logStartOffset()));
        new OffsetCheckpointFile(new File(logDir, LogSupport.REPLICATION_OFFSET_CHECKPOINT), failures)
            .write(Map.of(tp, log.highWatermark()));

        ObjectNode view = LogSupport.view(log, true);
        view.put("stop", stop);
        view.put("checkpointed_recovery_point", recoveryPoint);
        LogSupport.emit(view, args);

        if (stop.equals("crash")) {
            // An unclean stop: no close, no flush, no trimming of the active segment's
            // preallocated indexes. Written data stays in the page cache.
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }
        // A closed log without the clean-shutdown marker: the next open still recovers it.
        log.close();
        scheduler.shutdown();
    }
}
