package dev.highwater.kafka;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.FileLogInputStream;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;

/**
 * Shared plumbing for the interop programs: argument parsing, a {@link LogConfig},
 * opening a partition through {@link UnifiedLog#create} (which runs Kafka's LogLoader),
 * and a JSON view of a log read back through Kafka's own segment and record classes.
 */
final class LogSupport {
    /** Broker-level checkpoint files, as Kafka's LogManager names them. */
    static final String RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint";
    static final String LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint";
    static final String REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint";

    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private LogSupport() {
    }

    /** Parses {@code --name value} pairs (and bare {@code --flag}s, stored as "true"). */
    static Map<String, String> parseArgs(String[] args, int from) {
        Map<String, String> out = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + a);
            }
            String name = a.substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                out.put(name, args[++i]);
            } else {
                out.put(name, "true");
            }
        }
        return out;
    }

    static String required(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }

    /**
     * The topic configuration every program uses: Kafka's defaults, except a small
     * index interval (so small test segments still get several index entries), no
     * limit on how old a record's CreateTime may be (the tests use fixed timestamps),
     * and immediate deletion of segments that recovery drops.
     */
    static LogConfig logConfig(Map<String, String> args) {
        return logConfig(args, Map.of());
    }

    /** {@link #logConfig(Map)} with further topic configs ({@code message.timestamp.type}, ...). */
    static LogConfig logConfig(Map<String, String> args, Map<String, Object> extra) {
        Map<String, Object> props = new HashMap<>(extra);
        props.put("index.interval.bytes", args.getOrDefault("index-interval-bytes", "4096"));
        props.put("segment.bytes", args.getOrDefault("segment-bytes", "1073741824"));
        props.put("message.timestamp.before.max.ms", Long.toString(Long.MAX_VALUE));
        props.put("message.timestamp.after.max.ms", Long.toString(Long.MAX_VALUE));
        props.put("file.delete.delay.ms", "0");
        return new LogConfig(props);
    }

    static KafkaScheduler startScheduler() {
        KafkaScheduler scheduler = new KafkaScheduler(1, true, "highwater-interop-");
        scheduler.startup();
        return scheduler;
    }

    /**
     * Opens (creating if absent) one partition directory with Kafka's log loader. With
     * {@code cleanShutdown} false, every segment at or above {@code recoveryPoint} is
     * recovered, as after a crash.
     */
    static UnifiedLog open(File partitionDir, LogConfig config, long logStartOffset, long recoveryPoint,
                           boolean cleanShutdown, KafkaScheduler scheduler) throws IOException {
        return UnifiedLog.create(
            partitionDir,
            config,
            logStartOffset,
            recoveryPoint,
            scheduler,
            new BrokerTopicStats(),
            Time.SYSTEM,
            900_000, // transaction.max.timeout.ms default
            new ProducerStateManagerConfig(86_400_000, false),
            600_000, // producer.id.expiration.check.interval.ms default
            new LogDirFailureChannel(1),
            cleanShutdown,
            Optional.empty());
    }

    /** Reads one partition's entry from a broker-level offset checkpoint file, if the file exists. */
    static Optional<Long> readCheckpointEntry(File logDir, String name, TopicPartition tp) throws IOException {
        File f = new File(logDir, name);
        if (!f.exists()) {
            return Optional.empty();
        }
        return Optional.ofNullable(new OffsetCheckpointFile(f, new LogDirFailureChannel(1)).read().get(tp));
    }

    static String hex(ByteBuffer buf) {
        if (buf == null) {
            return null;
        }
        byte[] bytes = new byte[buf.remaining()];
        buf.duplicate().get(bytes);
        return HexFormat.of().formatHex(bytes);
    }

    static String hex(byte[] bytes) {
        return bytes == null ? null : HexFormat.of().formatHex(bytes);
    }

    static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * A JSON view of a log as Kafka's own classes see it: log offsets, the leader epoch
     * cache, and every segment's batches (and, when asked, records), read with
     * {@link LogSegment#log()}'s {@code FileRecords.batches()}.
     */
    static ObjectNode view(UnifiedLog log, boolean withRecords) {
        ObjectNode root = NODES.objectNode();
        root.put("topic", log.topicPartition().topic());
        root.put("partition", log.topicPartition().partition());
        root.put("log_start_offset", log.logStartOffset());
        root.put("log_end_offset", log.logEndOffset());
        root.put("high_watermark", log.highWatermark());
        root.put("recovery_point", log.recoveryPoint());
        ArrayNode epochs = root.putArray("leader_epochs");
        for (EpochEntry e : log.leaderEpochCache().epochEntries()) {
            ObjectNode n = epochs.addObject();
            n.put("epoch", e.epoch());
            n.put("start_offset", e.startOffset());
        }
        ArrayNode segments = root.putArray("segments");
        for (LogSegment segment : log.logSegments()) {
            ObjectNode s = segments.addObject();
            s.put("base_offset", segment.baseOffset());
            s.put("file", segment.log().file().getName());
            s.put("size_bytes", segment.size());
            ArrayNode batches = s.putArray("batches");
            int position = 0;
            for (FileLogInputStream.FileChannelRecordBatch batch : segment.log().batches()) {
                ObjectNode b = batches.addObject();
                b.put("base_offset", batch.baseOffset());
                b.put("last_offset", batch.lastOffset());
                b.put("partition_leader_epoch", batch.partitionLeaderEpoch());
                b.put("position", position);
                b.put("size_bytes", batch.sizeInBytes());
                b.put("magic", batch.magic());
                b.put("crc", batch.checksum());
                b.put("is_valid", batch.isValid());
                b.put("max_timestamp", batch.maxTimestamp());
                b.put("timestamp_type", batch.timestampType().toString());
                b.put("compression", batch.compressionType().name);
                b.put("producer_id", batch.producerId());
                b.put("producer_epoch", batch.producerEpoch());
                b.put("base_sequence", batch.baseSequence());
                b.put("is_transactional", batch.isTransactional());
                b.put("is_control", batch.isControlBatch());
                Integer count = batch.countOrNull();
                b.put("record_count", count == null ? -1 : count);
                if (withRecords) {
                    ArrayNode records = b.putArray("records");
                    for (Record r : batch) {
                        ObjectNode rn = records.addObject();
                        rn.put("offset", r.offset());
                        rn.put("timestamp", r.timestamp());
                        rn.put("key", r.hasKey() ? hex(r.key()) : null);
                        rn.put("value", r.hasValue() ? hex(r.value()) : null);
                        ArrayNode headers = rn.putArray("headers");
                        for (Header h : r.headers()) {
                            ObjectNode hn = headers.addObject();
                            hn.put("key", h.key());
                            hn.put("value", hex(h.value()));
                        }
                    }
                }
                position += batch.sizeInBytes();
            }
        }
        return root;
    }

    /** Prints {@code node} to stdout, and also to {@code --out FILE} when given. */
    static void emit(ObjectNode node, Map<String, String> args) throws IOException {
        String text = JSON.writeValueAsString(node);
        String out = args.get("out");
        if (out != null) {
            Files.writeString(new File(out).toPath(), text + "\n");
        } else {
            PrintStream stdout = System.out;
            stdout.println(text);
            stdout.flush();
        }
    }
}
