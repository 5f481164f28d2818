package dev.highwater.kafka;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.UnifiedLog;

import java.io.File;
import java.util.Map;

/**
 * The Kafka half of the side-by-side benchmark (driven by bench.sh). {@code bench-append}
 * appends {@code total-bytes} of record values, {@code record-bytes} each, in batches of
 * {@code batch-bytes} of values, through {@link UnifiedLog#appendAsLeader} with Kafka's default
 * topic configuration (1 GiB segments, no flush.messages) and halts without closing.
 * {@code bench-recover} then times {@link UnifiedLog#create} with no clean-shutdown marker and
 * recovery point 0, which recovers every segment. Batches are built before the clock starts:
 * building them is the producer's work, not the log's.
 */
final class Bench {
    private Bench() {
    }

    private static final TopicPartition TP = new TopicPartition("bench", 0);
    /** Distinct prebuilt batches, appended in turn (appending rewrites offsets in place). */
    private static final int POOL = 64;

    static void append(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File base = new File(LogSupport.required(args, "dir"));
        long totalBytes = Long.parseLong(args.getOrDefault("total-bytes", Long.toString(1L << 30)));
        int recordBytes = Integer.parseInt(args.getOrDefault("record-bytes", "1024"));
        int batchBytes = Integer.parseInt(args.getOrDefault("batch-bytes", "16384"));
        int perBatch = batchBytes / recordBytes;
        long records = totalBytes / recordBytes;
        long batches = records / perBatch;
        File dir = new File(base, UnifiedLog.logDirName(TP));
        if (dir.exists()) {
            throw new IllegalArgumentException(dir + " already exists");
        }
        if (!dir.mkdirs()) {
            throw new IllegalStateException("cannot create " + dir);
        }

        MemoryRecords[] pool = new MemoryRecords[POOL];
        for (int p = 0; p < POOL; p++) {
            SimpleRecord[] batch = new SimpleRecord[perBatch];
            for (int r = 0; r < perBatch; r++) {
                byte[] value = new byte[recordBytes];
                for (int k = 0; k < recordBytes; k++) {
                    value[k] = (byte) ('a' + (p * 31 + r * 7 + k) % 26);
                }
                batch[r] = new SimpleRecord(WritePartition.BASE_TIMESTAMP + p, null, value);
            }
            pool[p] = MemoryRecords.withRecords(RecordBatch.CURRENT_MAGIC_VALUE, 0L, Compression.NONE,
                TimestampType.CREATE_TIME, batch);
        }

        // compression.type: Kafka's LogValidator re-encodes each producer batch with it.
        String compression = args.getOrDefault("compression", "none");
        LogConfig config = LogSupport.logConfig(args, Map.of("compression.type",
            compression.equals("none") ? "producer" : compression));
        KafkaScheduler scheduler = LogSupport.startScheduler();
        UnifiedLog log = LogSupport.open(dir, config, 0L, 0L, false, scheduler);
        long start = System.nanoTime();
        for (long b = 0; b < batches; b++) {
            MemoryRecords batch = pool[(int) (b % POOL)];
            // Appending assigned offsets in place; a producer's batch starts at 0. Not in the CRC.
            for (MutableRecordBatch header : batch.batches()) {
                header.setLastOffset(perBatch - 1);
            }
            log.appendAsLeader(batch, 0);
        }
        long elapsed = System.nanoTime() - start;

        ObjectNode out = LogSupport.NODES.objectNode();
        out.put("implementation", "kafka");
        out.put("phase", "append");
        out.put("compression", compression);
        out.put("records", records);
        out.put("batches", batches);
        out.put("value_bytes", records * recordBytes);
        out.put("log_bytes", log.size());
        out.put("segments", log.numberOfSegments());
        out.put("log_end_offset", log.logEndOffset());
        out.put("seconds", elapsed / 1e9);
        LogSupport.emit(out, args);
        System.out.flush();
        // Unclean stop: nothing flushed, closed or checkpointed.
        Runtime.getRuntime().halt(0);
    }

    /**
     * {@code bench-read}: opens the log (recovering it, untimed), then times reading every
     * batch and every record (decompressing them) through the segments' {@code FileRecords}.
     */
    static void read(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File base = new File(LogSupport.required(args, "dir"));
        File dir = new File(base, UnifiedLog.logDirName(TP));
        if (!dir.isDirectory()) {
            throw new IllegalArgumentException(dir + " is not a directory");
        }
        LogConfig config = LogSupport.logConfig(args);
        KafkaScheduler scheduler = LogSupport.startScheduler();
        UnifiedLog log = LogSupport.open(dir, config, 0L, 0L, false, scheduler);
        long start = System.nanoTime();
        long records = 0;
        long valueBytes = 0;
        for (LogSegment segment : log.logSegments()) {
            for (var batch : segment.log().batches()) {
                for (var r : batch) {
                    records++;
                    valueBytes += r.valueSize();
                }
            }
        }
        long elapsed = System.nanoTime() - start;
        ObjectNode out = LogSupport.NODES.objectNode();
        out.put("implementation", "kafka");
        out.put("phase", "read");
        out.put("records", records);
        out.put("value_bytes", valueBytes);
        out.put("seconds", elapsed / 1e9);
        LogSupport.emit(out, args);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static void recover(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File base = new File(LogSupport.required(args, "dir"));
        File dir = new File(base, UnifiedLog.logDirName(TP));
        if (!dir.isDirectory()) {
            throw new IllegalArgumentException(dir + " is not a directory");
        }
        LogConfig config = LogSupport.logConfig(args);
        KafkaScheduler scheduler = LogSupport.startScheduler();
        long start = System.nanoTime();
        UnifiedLog log = LogSupport.open(dir, config, 0L, 0L, false, scheduler);
        long elapsed = System.nanoTime() - start;
        long batches = 0;
        for (LogSegment segment : log.logSegments()) {
            for (var ignored : segment.log().batches()) {
                batches++;
            }
        }
        ObjectNode out = LogSupport.NODES.objectNode();
        out.put("implementation", "kafka");
        out.put("phase", "recover");
        out.put("batches", batches);
        out.put("log_bytes", log.size());
        out.put("segments", log.numberOfSegments());
        out.put("log_end_offset", log.logEndOffset());
        out.put("seconds", elapsed / 1e9);
        LogSupport.emit(out, args);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
