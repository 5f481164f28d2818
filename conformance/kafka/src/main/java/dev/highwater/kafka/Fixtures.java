package dev.highwater.kafka;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.UnifiedLog;

import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;

/**
 * Writes the Kafka fixtures of the interop tests through Kafka's own log code, one partition
 * of topic {@code fixture} per case, and prints, per partition, Kafka's view of the log (with
 * records) and Kafka's answer to {@link UnifiedLog#fetchOffsetByTimestamp} for every record's
 * timestamp, one below it and one above it.
 *
 * <ul>
 *   <li>partitions 0-4: an idempotent producer's CreateTime batches compressed with none, gzip,
 *       snappy, lz4 and zstd ({@link UnifiedLog#appendAsLeader}), runs of equal timestamps inside
 *       and across batches, three segments;</li>
 *   <li>partition 5: transactional batches of mixed codecs, a COMMIT marker, an aborted
 *       transaction and its ABORT marker, then plain batches, appended as a follower appends
 *       ({@link UnifiedLog#appendAsFollower}, the leader's offsets and epochs kept);</li>
 *   <li>partition 6: a topic with {@code message.timestamp.type=LogAppendTime}: Kafka stamps
 *       each batch (snappy and uncompressed alternately) with the time it appends it.</li>
 * </ul>
 */
final class Fixtures {
    private Fixtures() {
    }

    static final String TOPIC = "fixture";
    static final Compression[] CODECS = {
        Compression.NONE, Compression.gzip().build(), Compression.snappy().build(),
        Compression.lz4().build(), Compression.zstd().build(),
    };

    /** Record {@code i} of a fixture: repeated keys, some null values, a header on every third. */
    static SimpleRecord record(int i, long timestamp) {
        String value = i % 9 == 8 ? null : "fixture-value-" + i + "-" + "abcabcabc".repeat(i % 13);
        Header[] headers = i % 3 == 0
            ? new Header[] {new RecordHeader("h", LogSupport.utf8("v" + i))}
            : new Header[0];
        return new SimpleRecord(timestamp, LogSupport.utf8("key-" + (i % 5)), LogSupport.utf8(value), headers);
    }

    /** The CreateTime of record {@code i}: runs of two or three equal timestamps, never going down. */
    static long createTime(int i) {
        return WritePartition.BASE_TIMESTAMP + (i / 3) * 10L + (i % 7 == 0 ? 5 : 0);
    }

    static void run(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File logDir = new File(LogSupport.required(args, "log-dir"));
        args.putIfAbsent("index-interval-bytes", "256");
        KafkaScheduler scheduler = LogSupport.startScheduler();
        ObjectNode root = LogSupport.NODES.objectNode();
        ArrayNode partitions = root.putArray("partitions");
        Map<TopicPartition, Long> zeros = new HashMap<>();
        Map<TopicPartition, Long> hws = new HashMap<>();
        for (int p = 0; p <= 6; p++) {
            TopicPartition tp = new TopicPartition(TOPIC, p);
            File dir = new File(logDir, UnifiedLog.logDirName(tp));
            if (dir.exists()) {
                throw new IllegalArgumentException(dir + " already exists");
            }
            if (!dir.mkdirs()) {
                throw new IllegalStateException("cannot create " + dir);
            }
            Map<String, Object> extra = p == 6
                ? Map.of("message.timestamp.type", "LogAppendTime")
                : Map.of();
            LogConfig config = LogSupport.logConfig(args, extra);
            UnifiedLog log = LogSupport.open(dir, config, 0L, 0L, false, scheduler);
            String name;
            if (p <= 4) {
                name = "idempotent-" + CODECS[p].type().name;
                writeIdempotent(log, CODECS[p], 1000L + p);
            } else if (p == 5) {
                name = "transactional";
                writeTransactional(log);
            } else {
                name = "log-append-time";
                writeLogAppendTime(log);
            }
            log.updateHighWatermark(log.logEndOffset());
            ObjectNode view = LogSupport.view(log, true);
            view.put("case", name);
            view.set("lookups", lookups(log));
            partitions.add(view);
            zeros.put(tp, 0L);
            hws.put(tp, log.highWatermark());
            log.close();
        }
        // A crashed broker's checkpoints: recover everything from offset 0.
        LogDirFailureChannel failures = new LogDirFailureChannel(1);
        new OffsetCheckpointFile(new File(logDir, LogSupport.RECOVERY_POINT_CHECKPOINT), failures).write(zeros);
        new OffsetCheckpointFile(new File(logDir, LogSupport.LOG_START_OFFSET_CHECKPOINT), failures).write(zeros);
        new OffsetCheckpointFile(new File(logDir, LogSupport.REPLICATION_OFFSET_CHECKPOINT), failures).write(hws);
        LogSupport.emit(root, args);
        scheduler.shutdown();
    }

    private static void writeIdempotent(UnifiedLog log, Compression compression, long producerId) throws Exception {
        int next = 0;
        int sequence = 0;
        for (int b = 0; b < 18; b++) {
            if (b == 6 || b == 12) {
                log.roll();
            }
            int n = 1 + (b * 5) % 7;
            SimpleRecord[] records = new SimpleRecord[n];
            for (int k = 0; k < n; k++) {
                records[k] = record(next + k, createTime(next + k));
            }
            MemoryRecords batch = MemoryRecords.withRecords(RecordBatch.CURRENT_MAGIC_VALUE, 0L, compression,
                TimestampType.CREATE_TIME, producerId, (short) 0, sequence, RecordBatch.NO_PARTITION_LEADER_EPOCH,
                false, records);
            log.appendAsLeader(batch, b / 6);
            next += n;
            sequence += n;
        }
    }

    private static void writeTransactional(UnifiedLog log) throws Exception {
        long producerId = 7L;
        short producerEpoch = 2;
        int epoch = 3;
        long offset = 0;
        int sequence = 0;
        int i = 0;
        // A committed transaction of three batches, then an aborted one of two.
        for (int txn = 0; txn < 2; txn++) {
            for (int b = 0; b < 3 - txn; b++) {
                int n = 2 + b;
                SimpleRecord[] records = new SimpleRecord[n];
                for (int k = 0; k < n; k++) {
                    records[k] = record(i + k, createTime(i + k));
                }
                Compression c = CODECS[(txn * 3 + b) % CODECS.length];
                offset = follow(log, MemoryRecords.withRecords(RecordBatch.CURRENT_MAGIC_VALUE, offset, c,
                    TimestampType.CREATE_TIME, producerId, producerEpoch, sequence, epoch, true, records), epoch);
                i += n;
                sequence += n;
            }
            ControlRecordType type = txn == 0 ? ControlRecordType.COMMIT : ControlRecordType.ABORT;
            offset = follow(log, MemoryRecords.withEndTransactionMarker(offset, createTime(i), epoch, producerId,
                producerEpoch, new EndTransactionMarker(type, 5)), epoch);
            if (txn == 0) {
                log.roll();
            }
        }
        // A plain producer afterwards, in a later epoch.
        for (int b = 0; b < 4; b++) {
            SimpleRecord[] records = {record(i, createTime(i)), record(i + 1, createTime(i + 1))};
            offset = follow(log, MemoryRecords.withRecords(RecordBatch.CURRENT_MAGIC_VALUE, offset,
                CODECS[b % CODECS.length], TimestampType.CREATE_TIME, RecordBatch.NO_PRODUCER_ID,
                RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, epoch + 1, false, records), epoch + 1);
            i += 2;
        }
    }

    /** Appends as a follower (offsets and epoch kept); returns the next offset. */
    private static long follow(UnifiedLog log, MemoryRecords records, int epoch) throws Exception {
        log.appendAsFollower(records, epoch);
        return log.logEndOffset();
    }

    private static void writeLogAppendTime(UnifiedLog log) throws Exception {
        int next = 0;
        for (int b = 0; b < 12; b++) {
            if (b == 6) {
                log.roll();
            }
            int n = 1 + b % 4;
            SimpleRecord[] records = new SimpleRecord[n];
            for (int k = 0; k < n; k++) {
                records[k] = record(next + k, createTime(next + k));
            }
            MemoryRecords batch = MemoryRecords.withRecords(CODECS[(b % 2) * 2], records);
            log.appendAsLeader(batch, 1);
            next += n;
        }
    }

    /** Kafka's answer for every record timestamp, and one on each side of it. */
    private static ArrayNode lookups(UnifiedLog log) throws Exception {
        TreeSet<Long> targets = new TreeSet<>();
        for (LogSegment segment : log.logSegments()) {
            for (var batch : segment.log().batches()) {
                for (var r : batch) {
                    long t = r.timestamp();
                    if (batch.timestampType() == TimestampType.LOG_APPEND_TIME) {
                        t = batch.maxTimestamp();
                    }
                    targets.add(t - 1);
                    targets.add(t);
                    targets.add(t + 1);
                }
            }
        }
        ArrayNode out = LogSupport.NODES.arrayNode();
        List<Long> list = new ArrayList<>(targets);
        for (long target : list) {
            ObjectNode n = out.addObject();
            n.put("target", target);
            Optional<FileRecords.TimestampAndOffset> found =
                log.fetchOffsetByTimestamp(target, Optional.empty()).timestampAndOffsetOpt();
            if (found.isPresent()) {
                n.put("offset", found.get().offset);
                n.put("timestamp", found.get().timestamp);
            } else {
                n.putNull("offset");
                n.putNull("timestamp");
            }
        }
        return out;
    }
}
