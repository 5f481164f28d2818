package dev.highwater.kafka;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.InvalidOffsetException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.DefaultRecord;
import org.apache.kafka.common.record.internal.DefaultRecordBatch;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.io.PrintStream;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The client side of the real-cluster harness (conformance/src/kafka_cluster): Kafka's own
 * Admin, producer and consumer against a running cluster. Every command prints JSON lines on
 * stdout, one per observation, so the Rust side reads them as they come.
 */
final class ClusterClient {
    private ClusterClient() {
    }

    private static final ObjectMapper LINE = new ObjectMapper();
    private static final PrintStream OUT = System.out;

    private static synchronized void emit(ObjectNode node) {
        try {
            OUT.println(LINE.writeValueAsString(node));
            OUT.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static Admin admin(Map<String, String> args) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, LogSupport.required(args, "bootstrap"));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        return Admin.create(p);
    }

    private static long longArg(Map<String, String> args, String name, long dflt) {
        String v = args.get(name);
        if (v == null) {
            return dflt;
        }
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " must be a number, not " + v);
        }
    }

    /**
     * {@code brokers --bootstrap B --count N --timeout-ms T}: waits until N brokers are
     * registered and unfenced (Admin's describeCluster lists only unfenced brokers), printing
     * {"brokers":[ids]} once they are; exit status 1 when the time runs out.
     */
    static void brokers(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        long count = longArg(args, "count", 1);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(longArg(args, "timeout-ms", 60000));
        String last = "no answer";
        try (Admin admin = admin(args)) {
            while (System.nanoTime() < deadline) {
                try {
                    Collection<Node> nodes = admin.describeCluster().nodes().get(5, TimeUnit.SECONDS);
                    if (nodes.size() >= count) {
                        ObjectNode out = LogSupport.NODES.objectNode();
                        ArrayNode ids = out.putArray("brokers");
                        nodes.stream().mapToInt(Node::id).sorted().forEach(ids::add);
                        emit(out);
                        return;
                    }
                    last = nodes.size() + " unfenced brokers";
                } catch (Exception e) {
                    last = e.toString();
                }
                Thread.sleep(250);
            }
        }
        System.err.println("fewer than " + count + " unfenced brokers in time: " + last);
        System.exit(1);
    }

    /**
     * {@code create-topic --bootstrap B --topic T [--partitions 1] [--replication-factor 3]}:
     * creates the topic (the cluster's min.insync.replicas and unclean election apply).
     */
    static void createTopic(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        int partitions = (int) longArg(args, "partitions", 1);
        short rf = (short) longArg(args, "replication-factor", 3);
        try (Admin admin = admin(args)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, rf))).all().get(30, TimeUnit.SECONDS);
        }
        ObjectNode out = LogSupport.NODES.objectNode();
        out.put("created", topic);
        emit(out);
    }

    /**
     * {@code describe --bootstrap B --topic T}: one line per partition with its leader (-1 when
     * none), replicas, ISR, ELR and last known ELR, as the controller's metadata has them.
     */
    static void describe(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        TopicDescription d;
        try (Admin admin = admin(args)) {
            d = admin.describeTopics(Set.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
        }
        for (TopicPartitionInfo p : d.partitions()) {
            ObjectNode out = LogSupport.NODES.objectNode();
            out.put("partition", p.partition());
            out.put("leader", p.leader() == null || p.leader().isEmpty() ? -1 : p.leader().id());
            ids(out.putArray("replicas"), p.replicas());
            ids(out.putArray("isr"), p.isr());
            ids(out.putArray("elr"), p.elr());
            ids(out.putArray("last_known_elr"), p.lastKnownElr());
            emit(out);
        }
    }

    private static void ids(ArrayNode into, List<Node> nodes) {
        if (nodes != null) {
            nodes.forEach(n -> into.add(n.id()));
        }
    }

    /**
     * {@code produce --bootstrap B --topic T --acks all|1|0 --seconds S [--interval-ms M]}:
     * sends the values 0, 1, 2, ... (as decimal strings) to partition 0, one every M ms, for S
     * seconds, and prints one line per outcome: {"value":v,"outcome":"ack","offset":o} or
     * {"value":v,"outcome":"error","error":"..."} (the record may or may not be written: an
     * indeterminate send), each with "sent_ms" and "ms", the wall clock (ms since the epoch) at
     * the send and at the outcome: the brokers and the controller log on the same host's clock,
     * so an acknowledgement is placed before or after their events. Ends with
     * {"done":true,"sent":n}.
     */
    static void produce(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        String acks = LogSupport.required(args, "acks");
        if (!Set.of("all", "1", "0").contains(acks)) {
            throw new IllegalArgumentException("--acks must be all, 1 or 0, not " + acks);
        }
        long seconds = longArg(args, "seconds", 10);
        long interval = longArg(args, "interval-ms", 5);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, LogSupport.required(args, "bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        // Idempotence needs acks=all; with it, retries cannot duplicate or reorder a value.
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(acks.equals("all")));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "2000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        long sent = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            while (System.nanoTime() < end) {
                final long value = sent++;
                final long sentMs = System.currentTimeMillis();
                try {
                    producer.send(new ProducerRecord<>(topic, 0, null, Long.toString(value)), (md, err) -> {
                        ObjectNode out = LogSupport.NODES.objectNode();
                        out.put("value", value);
                        out.put("sent_ms", sentMs);
                        out.put("ms", System.currentTimeMillis());
                        if (err == null) {
                            out.put("outcome", "ack");
                            out.put("offset", md.offset());
                        } else {
                            out.put("outcome", "error");
                            out.put("error", err.toString());
                        }
                        emit(out);
                    });
                } catch (Exception e) {
                    ObjectNode out = LogSupport.NODES.objectNode();
                    out.put("value", value);
                    out.put("sent_ms", sentMs);
                    out.put("ms", System.currentTimeMillis());
                    out.put("outcome", "error");
                    out.put("error", e.toString());
                    emit(out);
                }
                if (interval > 0) {
                    Thread.sleep(interval);
                }
            }
            // Every send gets its outcome (ack, or error at the delivery timeout) before the end.
            producer.flush();
        }
        ObjectNode done = LogSupport.NODES.objectNode();
        done.put("done", true);
        done.put("sent", sent);
        emit(done);
    }

    /**
     * {@code produce-bench --bootstrap B --topic T --records N [--record-bytes 1024]
     * [--batch-records 16] [--in-flight 4] [--linger-ms 100] [--warmup-records 2000]}: acks=all
     * produce, closed loop, measured, for conformance/examples/kafka_produce_bench.rs. Each record
     * has an 8-byte key (its number, big-endian) and a value of R bytes, as the concurrent
     * driver's records have; batch.size is set so that a batch holds exactly K records, and at
     * most F batches' worth of records (F * K) are unacknowledged at any time (a semaphore taken
     * before each send and given back in its callback), with max.in.flight.requests.per.connection
     * F: F produce requests of K records, as the driver's producer keeps F requests of K records
     * in flight. A linger of L ms only bounds the wait of a batch the window left short. The
     * warm-up records are sent and flushed first, untimed (connections, metadata, JIT). Each
     * timed record's ack latency is from just before {@code send} to its callback
     * (System.nanoTime), so it includes its wait in the accumulator; the run's time is from the
     * first timed send to the last callback. Prints one line: records, errors, seconds,
     * records_per_s, mib_per_s (of values), p50_ms, p99_ms, max_ms (nearest rank over the sorted
     * latencies, index round(p / 100 * (n - 1)), as RunReport::latency_percentile), and the
     * producer's own records-per-request-avg, batch-size-avg, record-queue-time-avg and
     * request-latency-avg metrics (over its sample window, warm-up included).
     */
    static void produceBench(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        long records = longArg(args, "records", 20000);
        int recordBytes = (int) longArg(args, "record-bytes", 1024);
        int batchRecords = (int) longArg(args, "batch-records", 16);
        int inFlight = (int) longArg(args, "in-flight", 4);
        long linger = longArg(args, "linger-ms", 100);
        long warmup = longArg(args, "warmup-records", 2000);
        // One latency per record is kept in memory.
        if (records > 100_000_000) {
            throw new IllegalArgumentException("--records must be at most 100000000, not " + records);
        }
        if (records < 1 || recordBytes < 0 || batchRecords < 1 || linger < 0 || warmup < 0) {
            throw new IllegalArgumentException(
                "--records and --batch-records must be at least 1, the rest at least 0");
        }
        // Idempotence (Kafka's default under acks=all) allows at most 5 requests in flight.
        if (inFlight < 1 || inFlight > 5) {
            throw new IllegalArgumentException("--in-flight must be 1 to 5, not " + inFlight);
        }
        // The accumulator closes a batch when the next record no longer fits in batch.size: room
        // for K records whose timestamp deltas take up to 2 varint bytes (8 s) fits K exactly
        // while a record is larger than the K bytes of slack (the summary shows the mean).
        long batchSize = DefaultRecordBatch.RECORD_BATCH_OVERHEAD;
        for (int i = 0; i < batchRecords; i++) {
            batchSize += DefaultRecord.sizeInBytes(i, 8191L, 8, recordBytes, new Header[0]);
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, LogSupport.required(args, "bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(batchSize));
        p.put(ProducerConfig.LINGER_MS_CONFIG, String.valueOf(linger));
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, String.valueOf(inFlight));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, LongSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[recordBytes];
        java.util.Arrays.fill(value, (byte) 'x');
        long[] latencies = new long[(int) records];
        AtomicLong errors = new AtomicLong();
        AtomicLong lastCallback = new AtomicLong();
        Semaphore window = new Semaphore(inFlight * batchRecords);
        long started;
        try (KafkaProducer<Long, byte[]> producer = new KafkaProducer<>(p)) {
            for (long n = 0; n < warmup; n++) {
                window.acquire();
                producer.send(new ProducerRecord<>(topic, 0, n, value), (md, err) -> window.release());
            }
            producer.flush();
            started = System.nanoTime();
            for (int i = 0; i < records; i++) {
                window.acquire();
                final int k = i;
                final long sent = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, 0, warmup + i, value), (md, err) -> {
                    long now = System.nanoTime();
                    latencies[k] = now - sent;
                    lastCallback.accumulateAndGet(now, Math::max);
                    if (err != null) {
                        errors.incrementAndGet();
                    }
                    window.release();
                });
            }
            producer.flush();
            double seconds = (lastCallback.get() - started) / 1e9;
            java.util.Arrays.sort(latencies);
            ObjectNode out = LogSupport.NODES.objectNode();
            out.put("records", records);
            out.put("record_bytes", recordBytes);
            out.put("batch_records", batchRecords);
            out.put("batch_size", batchSize);
            out.put("in_flight", inFlight);
            out.put("linger_ms", linger);
            out.put("warmup_records", warmup);
            out.put("errors", errors.get());
            out.put("seconds", seconds);
            out.put("records_per_s", records / seconds);
            out.put("mib_per_s", records * (double) recordBytes / (1 << 20) / seconds);
            out.put("p50_ms", percentile(latencies, 50) / 1e6);
            out.put("p99_ms", percentile(latencies, 99) / 1e6);
            out.put("max_ms", latencies[latencies.length - 1] / 1e6);
            for (String metric : List.of("records-per-request-avg", "batch-size-avg",
                    "record-queue-time-avg", "request-latency-avg")) {
                producer.metrics().forEach((name, m) -> {
                    if (name.group().equals("producer-metrics") && name.name().equals(metric)
                            && m.metricValue() instanceof Double d) {
                        out.put(metric, d);
                    }
                });
            }
            emit(out);
        }
    }

    /** Nearest rank over sorted values: index round(p / 100 * (n - 1)). */
    private static long percentile(long[] sorted, double p) {
        int i = (int) Math.round(p / 100.0 * (sorted.length - 1));
        return sorted[Math.min(i, sorted.length - 1)];
    }

    /**
     * {@code consume --bootstrap B --topic T [--timeout-ms T]}: reads partition 0 from its start
     * to its end offset (the leader's high watermark when the read begins) and prints
     * {"offset":o,"value":"v"} per record, then {"done":true,"end":e}.
     */
    static void consume(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(longArg(args, "timeout-ms", 60000));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, LogSupport.required(args, "bootstrap"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        long end;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            end = consumer.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            while (consumer.position(tp, Duration.ofSeconds(30)) < end) {
                if (System.nanoTime() > deadline) {
                    System.err.println("consume: did not reach the end offset " + end + " in time");
                    System.exit(1);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    ObjectNode out = LogSupport.NODES.objectNode();
                    out.put("offset", r.offset());
                    out.put("value", r.value());
                    emit(out);
                }
            }
        }
        ObjectNode done = LogSupport.NODES.objectNode();
        done.put("done", true);
        done.put("end", end);
        emit(done);
    }

    /**
     * {@code read --bootstrap B --topic T}: a consumer beside the producer for the whole run.
     * Reads partition 0 from its start, continuously (read_uncommitted: without transactions a
     * consumer sees only records below the leader's high watermark), until its standard input
     * closes (the harness closes it, or kills the process by its PID), and prints one line per
     * record read: {"session":s,"offset":o,"value":"v","ms":t}, t the wall clock (ms since the
     * epoch) when poll returned it. A session is one unbroken run of positions: the consumer runs
     * with auto.offset.reset=none, so that when Kafka says its position is no longer valid (the
     * log was truncated below it, KIP-320's divergence check, or it is out of range) it does not
     * move silently; it prints {"session":s,"error":"...","resume":r} and starts session s+1 at
     * r: the divergent offset Kafka gave, else the start of the log. Any other error is printed
     * as {"session":s,"error":"..."} and the consumer, closed and made again, goes on in a new
     * session after the last offset it read. Ends with {"done":true,"reads":n,"sessions":s}.
     */
    static void read(String[] argv) throws Exception {
        Map<String, String> args = LogSupport.parseArgs(argv, 0);
        String topic = LogSupport.required(args, "topic");
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, LogSupport.required(args, "bootstrap"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "highwater-reader");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        AtomicBoolean stop = new AtomicBoolean();
        final KafkaConsumer<?, ?>[] current = new KafkaConsumer<?, ?>[1];
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // Nothing is expected on it: its end is the signal.
                }
            } catch (Exception e) {
                // A broken stdin ends the reader as its end does.
            }
            stop.set(true);
            synchronized (current) {
                if (current[0] != null) {
                    current[0].wakeup();
                }
            }
        }, "stdin-watch");
        stdin.setDaemon(true);
        stdin.start();
        long reads = 0;
        long session = 0;
        // Where the next session starts; -1: the start of the log.
        long resume = -1;
        while (!stop.get()) {
            KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
            synchronized (current) {
                current[0] = consumer;
            }
            long last = -1;
            try {
                consumer.assign(List.of(tp));
                if (resume < 0) {
                    consumer.seekToBeginning(List.of(tp));
                } else {
                    consumer.seek(tp, resume);
                }
                while (!stop.get()) {
                    try {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            ObjectNode out = LogSupport.NODES.objectNode();
                            out.put("session", session);
                            out.put("offset", r.offset());
                            out.put("value", r.value());
                            out.put("ms", System.currentTimeMillis());
                            emit(out);
                            reads++;
                            last = r.offset();
                        }
                    } catch (InvalidOffsetException e) {
                        long at = -1;
                        if (e instanceof LogTruncationException t) {
                            OffsetAndMetadata d = t.divergentOffsets().get(tp);
                            if (d != null) {
                                at = d.offset();
                            }
                        }
                        ObjectNode out = LogSupport.NODES.objectNode();
                        out.put("session", session);
                        out.put("error", e.toString());
                        out.put("resume", at);
                        out.put("ms", System.currentTimeMillis());
                        emit(out);
                        session++;
                        last = -1;
                        resume = at;
                        if (at < 0) {
                            consumer.seekToBeginning(List.of(tp));
                        } else {
                            consumer.seek(tp, at);
                        }
                    }
                }
            } catch (WakeupException e) {
                // stdin closed: the loop ends.
            } catch (Exception e) {
                ObjectNode out = LogSupport.NODES.objectNode();
                out.put("session", session);
                out.put("error", e.toString());
                out.put("ms", System.currentTimeMillis());
                emit(out);
                session++;
                resume = last >= 0 ? last + 1 : resume;
                Thread.sleep(500);
            } finally {
                synchronized (current) {
                    current[0] = null;
                }
                try {
                    consumer.close(Duration.ofSeconds(2));
                } catch (Exception e) {
                    // Closing a consumer of a broken cluster may fail; a new one follows.
                }
            }
        }
        ObjectNode done = LogSupport.NODES.objectNode();
        done.put("done", true);
        done.put("reads", reads);
        done.put("sessions", session + 1);
        emit(done);
    }
}
