package dev.highwater.kafka;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.storage.internals.checkpoint.CleanShutdownFileHandler;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

import java.io.File;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;

/**
 * Reads a log directory's checkpoint files with Kafka's own readers
 * ({@link OffsetCheckpointFile}, {@link LeaderEpochCheckpointFile}, {@link CleanShutdownFileHandler})
 * and prints what they return. A file Kafka cannot parse makes the program fail. Absent files
 * are reported as null and are not created (Kafka's constructors would create them).
 */
final class ReadCheckpoints {
    private ReadCheckpoints() {
    }

    static void run(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File logDir = new File(LogSupport.required(args, "log-dir"));
        if (!logDir.isDirectory()) {
            throw new IllegalArgumentException(logDir + " is not a directory");
        }
        LogDirFailureChannel failures = new LogDirFailureChannel(1);
        ObjectNode root = LogSupport.NODES.objectNode();

        for (String name : new String[] {
            LogSupport.RECOVERY_POINT_CHECKPOINT,
            LogSupport.LOG_START_OFFSET_CHECKPOINT,
            LogSupport.REPLICATION_OFFSET_CHECKPOINT,
        }) {
            File f = new File(logDir, name);
            if (!f.exists()) {
                root.putNull(name);
                continue;
            }
            Map<TopicPartition, Long> entries = new TreeMap<>(
                Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
            entries.putAll(new OffsetCheckpointFile(f, failures).read());
            ArrayNode list = root.putArray(name);
            entries.forEach((tp, offset) -> {
                ObjectNode e = list.addObject();
                e.put("topic", tp.topic());
                e.put("partition", tp.partition());
                e.put("offset", offset);
            });
        }

        ObjectNode epochs = root.putObject("leader-epoch-checkpoint");
        File[] children = logDir.listFiles(File::isDirectory);
        if (children != null) {
            Arrays.sort(children);
            for (File partitionDir : children) {
                File f = new File(partitionDir, "leader-epoch-checkpoint");
                if (!f.exists()) {
                    continue;
                }
                ArrayNode list = epochs.putArray(partitionDir.getName());
                for (EpochEntry e : new LeaderEpochCheckpointFile(f, failures).read()) {
                    ObjectNode n = list.addObject();
                    n.put("epoch", e.epoch());
                    n.put("start_offset", e.startOffset());
                }
            }
        }

        CleanShutdownFileHandler marker = new CleanShutdownFileHandler(logDir.getPath());
        ObjectNode clean = root.putObject("clean_shutdown");
        clean.put("exists", marker.exists());
        if (marker.exists()) {
            OptionalLong brokerEpoch = marker.read();
            if (brokerEpoch.isPresent()) {
                clean.put("broker_epoch", brokerEpoch.getAsLong());
            } else {
                clean.putNull("broker_epoch");
            }
        }
        LogSupport.emit(root, args);
    }
}
