package dev.highwater.kafka;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.CleanShutdownFileHandler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;

import java.io.File;
import java.util.Map;

/**
 * Opens a partition directory with Kafka's log loader, as a broker's LogManager does at
 * startup, and prints what it kept. The recovery point and log start offset come from the
 * broker-level checkpoint files (0 when absent) unless given; the load is unclean unless the
 * clean-shutdown marker is present. The high watermark from replication-offset-checkpoint is
 * applied with {@link UnifiedLog#updateHighWatermark}, which clamps it to the log.
 */
final class RecoverPartition {
    private RecoverPartition() {
    }

    static void run(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        File logDir = new File(LogSupport.required(args, "log-dir"));
        String topic = args.getOrDefault("topic", "interop");
        int partition = Integer.parseInt(args.getOrDefault("partition", "0"));
        TopicPartition tp = new TopicPartition(topic, partition);
        File dir = new File(logDir, UnifiedLog.logDirName(tp));
        if (!dir.isDirectory()) {
            throw new IllegalArgumentException(dir + " is not a directory");
        }

        long recoveryPoint = args.containsKey("recovery-point")
            ? Long.parseLong(args.get("recovery-point"))
            : LogSupport.readCheckpointEntry(logDir, LogSupport.RECOVERY_POINT_CHECKPOINT, tp).orElse(0L);
        long logStartOffset =
            LogSupport.readCheckpointEntry(logDir, LogSupport.LOG_START_OFFSET_CHECKPOINT, tp).orElse(0L);
        boolean clean = new CleanShutdownFileHandler(logDir.getPath()).exists();

        LogConfig config = LogSupport.logConfig(args);
        KafkaScheduler scheduler = LogSupport.startScheduler();
        UnifiedLog log = LogSupport.open(dir, config, logStartOffset, recoveryPoint, clean, scheduler);
        var hw = LogSupport.readCheckpointEntry(logDir, LogSupport.REPLICATION_OFFSET_CHECKPOINT, tp);
        if (hw.isPresent()) {
            log.updateHighWatermark(hw.get());
        }

        ObjectNode view = LogSupport.view(log, args.containsKey("records"));
        view.put("loaded_clean", clean);
        view.put("recovered_from", recoveryPoint);
        LogSupport.emit(view, args);
        log.close();
        scheduler.shutdown();
    }
}
