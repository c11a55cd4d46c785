import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * The Apache Kafka Java client as a command-line oracle for interop tests.
 *
 * <p>Every subcommand takes its whole configuration as {@code --name value} options and writes
 * JSON lines to stdout (flushed after every line). Bytes are standard base64 strings, absent keys
 * and values are JSON null. Errors go to stderr; the exit status is 0 on success, 1 on a Kafka or
 * I/O failure and 2 on a usage error. Run without arguments for the list of subcommands.
 */
public final class KafkaOracle {

    private static final String USAGE = String.join("\n",
        "usage: KafkaOracle COMMAND --option value ...",
        "",
        "  produce --bootstrap H:P --topic T [--compression none|gzip|snappy|lz4|zstd]",
        "          [--idempotent true|false] [--acks all|1|0] [--linger-ms N] [--partition N]",
        "          [--transactional-id ID [--txn commit|abort]] [--timeout-ms N]",
        "      stdin: one JSON record a line, {\"key\": b64|null, \"value\": b64|null,",
        "             \"headers\": [[name, b64|null], ...], \"timestamp\": ms|null, \"partition\": n|null}",
        "      stdout: {\"partition\": n, \"offset\": n, \"timestamp\": ms} per record, in input order",
        "",
        "  consume --bootstrap H:P --topic T [--group G] [--isolation read_committed|read_uncommitted]",
        "          [--from beginning|latest] [--max-records N] [--timeout-ms N] [--until-end true|false]",
        "          [--assignor range|roundrobin|sticky|cooperative-sticky] [--commit true|false]",
        "          [--partitions 0,1,...]",
        "      stdout: {\"topic\", \"partition\", \"offset\", \"timestamp\", \"timestamp_type\", \"key\",",
        "               \"value\", \"headers\"} per record; stops after N records, at the end of the",
        "               assigned partitions (--until-end true) or after --timeout-ms (default 10000)",
        "",
        "  group-member --bootstrap H:P --topic T --group G [--assignor range|roundrobin|...]",
        "          [--run-ms N] [--from beginning|latest] [--session-timeout-ms N] [--heartbeat-interval-ms N]",
        "          [--watch-stdin true|false] [--auto-commit true|false] [--close-ms N (default 10000)]",
        "      stdout: {\"event\": \"assigned\"|\"revoked\"|\"lost\", \"partitions\": [[topic, p], ...], ...},",
        "              records as for consume, {\"event\": \"commit_failed\", ...}, finally {\"event\": \"closed\"}",
        "      stops after --run-ms (default 120000), or when stdin says \"stop\" or is closed",
        "",
        "  partition-for --bootstrap H:P --topic T [--keys-file F] [--method produce|compute]",
        "      keys: one base64 key a line (\"-\" for a null key), from F or stdin",
        "      stdout: {\"key\": b64|null, \"partition\": n} per key, as the default partitioner chose",
        "",
        "  create-topic --bootstrap H:P --topic T [--partitions N] [--replication-factor N]",
        "          [--config k=v,k=v] [--if-not-exists true|false]",
        "      stdout: {\"topic\": T, \"created\": true|false}",
        "",
        "  (Kafka 4.x builds) group-member-consumer, share-member, share-script, share-admin: see",
        "      ConsumerProtocolMember.java, ShareOracle.java, ShareApiScript.java and ShareAdminOracle.java",
        "  assign-reader, flood-producer: see KipScripts.java",
        "  txn-feature, txn-scenario: see TxnOracle.java",
        "  (Kafka 4.x builds) txn-admin: see TxnAdminOracle.java; telemetry-client: see TelemetryClients.java");

    /** stdout as UTF-8 (only ASCII is written: {@link #json} escapes everything else). */
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    private KafkaOracle() {
    }

    public static void main(String[] args) {
        // slf4j-simple reads its settings once, when the first logger is made: keep the client
        // quiet (WARN and above, to stderr) unless the caller chose otherwise with -D.
        setDefaultProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefaultProperty("org.slf4j.simpleLogger.logFile", "System.err");

        if (args.length == 0 || args[0].equals("--help") || args[0].equals("-h")) {
            System.err.println(USAGE);
            System.exit(args.length == 0 ? 2 : 0);
        }
        int status;
        try {
            Options options = Options.parse(args, 1);
            switch (args[0]) {
                case "produce" -> produce(options);
                case "consume" -> consume(options);
                case "group-member" -> groupMember(options);
                case "group-member-consumer" -> runOwnFile("ConsumerProtocolMember", args);
                case "partition-for" -> partitionFor(options);
                case "create-topic" -> createTopic(options);
                case "share-member", "share-script" -> runOwnFile("ShareOracle", args);
                case "share-admin" -> runOwnFile("ShareAdminOracle", args);
                case "assign-reader", "flood-producer" -> runOwnFile("KipScripts", args);
                case "txn-feature", "txn-scenario" -> runOwnFile("TxnOracle", args);
                case "txn-admin" -> runOwnFile("TxnAdminOracle", args);
                case "telemetry-client" -> runOwnFile("TelemetryClients", args);
                default -> throw new UsageException("unknown command " + args[0]);
            }
            status = 0;
        } catch (UsageException e) {
            System.err.println("usage error: " + e.getMessage());
            System.err.println("(KafkaOracle --help lists the commands and their options)");
            status = 2;
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            cause.printStackTrace(System.err);
            // Last, so that it ends whatever log a caller keeps: the error and its causes.
            StringBuilder message = new StringBuilder("error: ").append(cause);
            for (Throwable inner = cause.getCause(); inner != null; inner = inner.getCause()) {
                message.append(" <- caused by ").append(inner);
            }
            System.err.println(message);
            status = 1;
        }
        OUT.flush();
        System.err.flush();
        // Kafka client threads are daemons, but a stdin reader may still be blocked: exit outright.
        System.exit(status);
    }

    private static void setDefaultProperty(String name, String value) {
        if (System.getProperty(name) == null) {
            System.setProperty(name, value);
        }
    }

    // ---------------------------------------------------------------------------------------
    // produce

    private static void produce(Options options) throws Exception {
        options.allow("bootstrap", "topic", "compression", "idempotent", "acks", "linger-ms",
            "partition", "transactional-id", "txn", "timeout-ms");
        String topic = options.required("topic");
        Integer defaultPartition = options.integer("partition", null);
        String transactionalId = options.get("transactional-id", null);
        boolean commit = options.choice("txn", "commit", "commit", "abort").equals("commit");
        if (options.has("txn") && transactionalId == null) {
            throw new UsageException("--txn needs --transactional-id");
        }
        int timeoutMs = options.integer("timeout-ms", 30000);
        int lingerMs = options.integer("linger-ms", -1);

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.required("bootstrap"));
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "kafka-oracle-producer");
        config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG,
            options.choice("compression", "none", "none", "gzip", "snappy", "lz4", "zstd"));
        if (options.has("acks")) {
            config.put(ProducerConfig.ACKS_CONFIG, options.choice("acks", null, "all", "-1", "1", "0"));
        }
        if (options.has("idempotent")) {
            config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(options.bool("idempotent", true)));
        }
        if (lingerMs >= 0) {
            config.put(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(lingerMs));
        }
        if (transactionalId != null) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
            config.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.toString(Math.max(timeoutMs, 10000)));
        }
        // Fail inside the time limit rather than retrying for the client's default two minutes.
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Integer.toString(timeoutMs));
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs + Math.max(lingerMs, 0) + 1000));
        addClientProperties(options, config);

        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (BufferedReader in = stdinReader()) {
            String line;
            int lineNumber = 0;
            while ((line = in.readLine()) != null) {
                lineNumber++;
                if (!line.isBlank()) {
                    records.add(parseRecord(topic, defaultPartition, line, lineNumber));
                }
            }
        }

        List<RecordMetadata> sent = new ArrayList<>();
        KafkaProducer<byte[], byte[]> producer =
            new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        try {
            if (transactionalId != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            try {
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (ProducerRecord<byte[], byte[]> record : records) {
                    futures.add(producer.send(record));
                }
                producer.flush();
                for (Future<RecordMetadata> future : futures) {
                    sent.add(future.get());
                }
            } catch (Exception e) {
                if (transactionalId != null) {
                    abortQuietly(producer);
                }
                throw e;
            }
            if (transactionalId != null) {
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
        } finally {
            producer.close(CLOSE_TIMEOUT);
        }
        for (RecordMetadata metadata : sent) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("partition", metadata.partition());
            line.put("offset", metadata.offset());
            line.put("timestamp", metadata.timestamp());
            emit(line);
        }
    }

    private static void abortQuietly(KafkaProducer<byte[], byte[]> producer) {
        try {
            producer.abortTransaction();
        } catch (KafkaException e) {
            System.err.println("warning: abortTransaction failed too: " + e);
        }
    }

    private static ProducerRecord<byte[], byte[]> parseRecord(
            String topic, Integer defaultPartition, String line, int lineNumber) throws UsageException {
        String where = "stdin line " + lineNumber;
        Object parsed;
        try {
            parsed = new JsonReader(line).readDocument();
        } catch (IllegalArgumentException e) {
            throw new UsageException(where + ": " + e.getMessage());
        }
        if (!(parsed instanceof Map<?, ?> fields)) {
            throw new UsageException(where + ": expected a JSON object");
        }
        for (Object name : fields.keySet()) {
            if (!Set.of("key", "value", "headers", "timestamp", "partition").contains(name)) {
                throw new UsageException(where + ": unknown field " + name);
            }
        }
        byte[] key = base64Field(fields.get("key"), where + " key");
        byte[] value = base64Field(fields.get("value"), where + " value");
        Long timestamp = longField(fields.get("timestamp"), where + " timestamp");
        Long partition = longField(fields.get("partition"), where + " partition");
        List<Header> headers = new ArrayList<>();
        Object rawHeaders = fields.get("headers");
        if (rawHeaders != null) {
            if (!(rawHeaders instanceof List<?> headerList)) {
                throw new UsageException(where + ": headers must be a list of [name, value] pairs");
            }
            for (Object item : headerList) {
                if (!(item instanceof List<?> pair) || pair.size() != 2 || !(pair.get(0) instanceof String name)) {
                    throw new UsageException(where + ": each header must be [name, base64|null]");
                }
                headers.add(new RecordHeader(name, base64Field(pair.get(1), where + " header " + name)));
            }
        }
        Integer partitionNumber = partition != null ? Integer.valueOf(partition.intValue()) : defaultPartition;
        return new ProducerRecord<>(topic, partitionNumber, timestamp, key, value, headers);
    }

    private static byte[] base64Field(Object value, String what) throws UsageException {
        if (value == null) {
            return null;
        }
        if (!(value instanceof String text)) {
            throw new UsageException(what + ": expected a base64 string or null");
        }
        try {
            return Base64.getDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            throw new UsageException(what + ": bad base64: " + e.getMessage());
        }
    }

    private static Long longField(Object value, String what) throws UsageException {
        if (value == null) {
            return null;
        }
        if (!(value instanceof Long number)) {
            throw new UsageException(what + ": expected an integer or null");
        }
        return number;
    }

    // ---------------------------------------------------------------------------------------
    // consume

    private static void consume(Options options) throws Exception {
        options.allow("bootstrap", "topic", "group", "isolation", "from", "max-records", "timeout-ms",
            "until-end", "assignor", "commit", "partitions");
        String topic = options.required("topic");
        String group = options.get("group", null);
        long maxRecords = options.integer("max-records", 0);
        long timeoutMs = options.integer("timeout-ms", 10000);
        boolean untilEnd = options.bool("until-end", false);
        boolean commit = options.bool("commit", false);
        if (commit && group == null) {
            throw new UsageException("--commit true needs --group");
        }
        if (maxRecords <= 0) {
            maxRecords = Long.MAX_VALUE;
        }
        List<Integer> partitions = options.integerList("partitions");

        Properties config = consumerConfig(options, group);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
            options.choice("isolation", "read_uncommitted", "read_committed", "read_uncommitted"));

        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        try {
            if (partitions != null) {
                List<TopicPartition> assignment = new ArrayList<>();
                for (int partition : partitions) {
                    assignment.add(new TopicPartition(topic, partition));
                }
                consumer.assign(assignment);
            } else if (group != null) {
                consumer.subscribe(List.of(topic));
            } else {
                consumer.assign(allPartitions(consumer, topic, deadline));
            }

            Map<TopicPartition, Long> endOffsets = null;
            Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();
            long count = 0;
            polling:
            while (count < maxRecords && remainingMs(deadline) > 0) {
                ConsumerRecords<byte[], byte[]> records =
                    consumer.poll(Duration.ofMillis(Math.min(200, remainingMs(deadline))));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    emit(recordJson(record));
                    consumed.put(new TopicPartition(record.topic(), record.partition()),
                        new OffsetAndMetadata(record.offset() + 1, record.leaderEpoch(), ""));
                    if (++count >= maxRecords) {
                        break polling;
                    }
                }
                if (untilEnd && !consumer.assignment().isEmpty()) {
                    if (endOffsets == null) {
                        // With read_committed these are the last stable offsets.
                        endOffsets = consumer.endOffsets(consumer.assignment(), remaining(deadline));
                    }
                    if (reachedEnd(consumer, endOffsets, deadline)) {
                        break;
                    }
                }
            }
            if (commit && !consumed.isEmpty()) {
                consumer.commitSync(consumed, Duration.ofSeconds(30));
            }
        } finally {
            consumer.close(CLOSE_TIMEOUT);
        }
    }

    private static boolean reachedEnd(
            KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> endOffsets, long deadline) {
        for (TopicPartition partition : consumer.assignment()) {
            Long end = endOffsets.get(partition);
            if (end == null || consumer.position(partition, remaining(deadline)) < end) {
                return false;
            }
        }
        return true;
    }

    private static List<TopicPartition> allPartitions(
            KafkaConsumer<byte[], byte[]> consumer, String topic, long deadline) throws InterruptedException {
        while (true) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, remaining(deadline));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> result = new ArrayList<>();
                for (PartitionInfo info : infos) {
                    result.add(new TopicPartition(topic, info.partition()));
                }
                return result;
            }
            if (remainingMs(deadline) <= 0) {
                throw new KafkaException("topic " + topic + " has no partitions (does it exist?)");
            }
            Thread.sleep(100);
        }
    }

    // ---------------------------------------------------------------------------------------
    // group-member

    private static void groupMember(Options options) throws Exception {
        options.allow("bootstrap", "topic", "group", "assignor", "run-ms", "from", "session-timeout-ms",
            "heartbeat-interval-ms", "watch-stdin", "auto-commit", "close-ms");
        String topic = options.required("topic");
        String group = options.required("group");
        long runMs = options.integer("run-ms", 120000);
        Properties config = consumerConfig(options, group);
        if (options.bool("auto-commit", false)) { // the Java default; commitSync after polls stays
            config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        }
        Duration closeTimeout = Duration.ofMillis(options.integer("close-ms", (int) CLOSE_TIMEOUT.toMillis()));
        if (options.has("session-timeout-ms")) {
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(options.integer("session-timeout-ms", 0)));
        }
        if (options.has("heartbeat-interval-ms")) {
            // also how soon it notices a rebalance another member started
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                Integer.toString(options.integer("heartbeat-interval-ms", 0)));
        }

        AtomicBoolean stop = new AtomicBoolean(false);
        if (options.bool("watch-stdin", true)) {
            Thread watcher = new Thread(() -> watchStdin(stop), "stdin-watcher");
            watcher.setDaemon(true);
            watcher.start();
        }

        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(runMs);
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emitGroupEvent("revoked", partitions, consumer);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    emitGroupEvent("assigned", partitions, consumer);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    emitGroupEvent("lost", partitions, consumer);
                }
            });
            while (!stop.get() && remainingMs(deadline) > 0) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    emit(recordJson(record));
                }
                if (!records.isEmpty()) {
                    try {
                        consumer.commitSync();
                    } catch (KafkaException e) {
                        // Typically a rebalance overtook us: the records will be delivered again.
                        Map<String, Object> event = new LinkedHashMap<>();
                        event.put("event", "commit_failed");
                        event.put("error", e.toString());
                        emit(event);
                    }
                }
            }
        } finally {
            consumer.close(closeTimeout); // sends LeaveGroup; revocation callbacks run here too
        }
        Map<String, Object> closed = new LinkedHashMap<>();
        closed.put("event", "closed");
        emit(closed);
    }

    private static void watchStdin(AtomicBoolean stop) {
        try (BufferedReader in = stdinReader()) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("stop")) {
                    break;
                }
            }
        } catch (IOException e) {
            System.err.println("warning: reading stdin failed: " + e);
        }
        stop.set(true);
    }

    private static void emitGroupEvent(
            String kind, Collection<TopicPartition> partitions, KafkaConsumer<byte[], byte[]> consumer) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("event", kind);
        event.put("partitions", partitionPairs(partitions));
        ConsumerGroupMetadata metadata = consumer.groupMetadata();
        event.put("generation", metadata.generationId());
        event.put("member_id", metadata.memberId());
        emit(event);
    }

    private static List<Object> partitionPairs(Collection<TopicPartition> partitions) {
        TreeMap<String, TopicPartition> sorted = new TreeMap<>();
        for (TopicPartition partition : partitions) {
            sorted.put(String.format("%s\u0000%010d", partition.topic(), partition.partition()), partition);
        }
        List<Object> pairs = new ArrayList<>();
        for (TopicPartition partition : sorted.values()) {
            pairs.add(List.of(partition.topic(), partition.partition()));
        }
        return pairs;
    }

    // ---------------------------------------------------------------------------------------
    // consume and group-member share these

    private static Properties consumerConfig(Options options, String group) throws UsageException {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.required("bootstrap"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-consumer");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        String from = options.choice("from", "latest", "beginning", "earliest", "latest", "end");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
            from.equals("beginning") || from.equals("earliest") ? "earliest" : "latest");
        String assignor = options.choice("assignor", "range", "range", "roundrobin", "sticky", "cooperative-sticky");
        if (group != null) {
            config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, switch (assignor) {
                case "roundrobin" -> RoundRobinAssignor.class.getName();
                case "sticky" -> StickyAssignor.class.getName();
                case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
                default -> RangeAssignor.class.getName();
            });
        } else if (options.has("assignor")) {
            throw new UsageException("--assignor needs --group");
        }
        addClientProperties(options, config);
        return config;
    }

    /** The {@code --client-properties} file's settings (a Java properties file), over the rest. */
    private static void addClientProperties(Options options, Properties config) throws UsageException {
        if (!options.has("client-properties")) {
            return;
        }
        String path = options.required("client-properties");
        try (java.io.Reader reader = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
            Properties extra = new Properties();
            extra.load(reader);
            config.putAll(extra);
        } catch (java.io.IOException e) {
            throw new UsageException("--client-properties " + path + ": " + e.getMessage());
        }
    }

    private static Map<String, Object> recordJson(ConsumerRecord<byte[], byte[]> record) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("topic", record.topic());
        line.put("partition", record.partition());
        line.put("offset", record.offset());
        line.put("timestamp", record.timestamp());
        line.put("timestamp_type", record.timestampType().toString());
        line.put("key", record.key());
        line.put("value", record.value());
        List<Object> headers = new ArrayList<>();
        for (Header header : record.headers()) {
            List<Object> pair = new ArrayList<>();
            pair.add(header.key());
            pair.add(header.value());
            headers.add(pair);
        }
        line.put("headers", headers);
        return line;
    }

    // ---------------------------------------------------------------------------------------
    // partition-for

    private static void partitionFor(Options options) throws Exception {
        options.allow("bootstrap", "topic", "keys-file", "method");
        String topic = options.required("topic");
        boolean produce = options.choice("method", "produce", "produce", "compute").equals("produce");
        List<byte[]> keys = new ArrayList<>();
        try (BufferedReader in = options.has("keys-file")
                ? Files.newBufferedReader(Path.of(options.required("keys-file")), StandardCharsets.UTF_8)
                : stdinReader()) {
            String line;
            while ((line = in.readLine()) != null) {
                String text = line.strip();
                keys.add(text.equals("-") ? null : base64Field(text, "key " + (keys.size() + 1)));
            }
        }

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.required("bootstrap"));
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "kafka-oracle-partitioner");
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        List<Integer> chosen = new ArrayList<>();
        KafkaProducer<byte[], byte[]> producer =
            new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        try {
            if (produce) {
                // The most honest answer: let the producer's default partitioner place a real record.
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (byte[] key : keys) {
                    futures.add(producer.send(new ProducerRecord<>(topic, key, new byte[0])));
                }
                producer.flush();
                for (Future<RecordMetadata> future : futures) {
                    chosen.add(future.get().partition());
                }
            } else {
                // What the default partitioner computes for a keyed record (BuiltInPartitioner).
                int count = producer.partitionsFor(topic).size();
                for (byte[] key : keys) {
                    chosen.add(key == null ? null : Utils.toPositive(Utils.murmur2(key)) % count);
                }
            }
        } finally {
            producer.close(CLOSE_TIMEOUT);
        }
        for (int i = 0; i < keys.size(); i++) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("key", keys.get(i));
            line.put("partition", chosen.get(i));
            emit(line);
        }
    }

    // ---------------------------------------------------------------------------------------
    // create-topic

    private static void createTopic(Options options) throws Exception {
        options.allow("bootstrap", "topic", "partitions", "replication-factor", "config", "if-not-exists");
        String topic = options.required("topic");
        NewTopic newTopic = new NewTopic(topic, options.integer("partitions", 1),
            options.integer("replication-factor", 1).shortValue());
        Map<String, String> topicConfig = new HashMap<>();
        for (String item : options.get("config", "").split(",")) {
            if (item.isBlank()) {
                continue;
            }
            int equals = item.indexOf('=');
            if (equals <= 0) {
                throw new UsageException("--config wants name=value pairs separated by commas");
            }
            topicConfig.put(item.substring(0, equals).strip(), item.substring(equals + 1).strip());
        }
        newTopic.configs(topicConfig);
        boolean ifNotExists = options.bool("if-not-exists", false);

        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.required("bootstrap"));
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, "kafka-oracle-admin");
        boolean created = true;
        try (Admin admin = Admin.create(config)) {
            admin.createTopics(List.of(newTopic)).all().get(60, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(ifNotExists && e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
            created = false;
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("topic", topic);
        line.put("created", created);
        emit(line);
    }

    // ---------------------------------------------------------------------------------------
    // helpers

    private static BufferedReader stdinReader() {
        return new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    }

    private static long remainingMs(long deadlineNanos) {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    private static Duration remaining(long deadlineNanos) {
        return Duration.ofMillis(Math.max(1, remainingMs(deadlineNanos)));
    }

    /** Writes one JSON line and flushes it; the rebalance listener and the main loop share stdout. */
    private static synchronized void emit(Map<String, Object> object) {
        StringBuilder out = new StringBuilder();
        json(out, object);
        out.append('\n');
        OUT.print(out);
        OUT.flush();
    }

    /** Appends a value as JSON: maps, lists, strings, numbers, booleans, null, and byte[] as base64. */
    private static void json(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof byte[] bytes) {
            out.append('"').append(Base64.getEncoder().encodeToString(bytes)).append('"');
        } else if (value instanceof String text) {
            jsonString(out, text);
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            String separator = "";
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                out.append(separator);
                jsonString(out, entry.getKey().toString());
                out.append(':');
                json(out, entry.getValue());
                separator = ",";
            }
            out.append('}');
        } else if (value instanceof List<?> list) {
            out.append('[');
            String separator = "";
            for (Object item : list) {
                out.append(separator);
                json(out, item);
                separator = ",";
            }
            out.append(']');
        } else {
            throw new IllegalArgumentException("cannot write " + value.getClass() + " as JSON");
        }
    }

    /** A JSON string with every non-printable or non-ASCII character as a \\u escape. */
    private static void jsonString(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /** Thrown for bad command lines and bad input; exits with status 2. */
    private static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /** {@code --name value} pairs, each name at most once. */
    private static final class Options {
        private final Map<String, String> values = new LinkedHashMap<>();

        static Options parse(String[] args, int start) throws UsageException {
            Options options = new Options();
            for (int i = start; i < args.length; i += 2) {
                if (!args[i].startsWith("--") || args[i].length() == 2) {
                    throw new UsageException("expected an option, got " + args[i]);
                }
                if (i + 1 >= args.length) {
                    throw new UsageException(args[i] + " needs a value");
                }
                String name = args[i].substring(2);
                if (options.values.put(name, args[i + 1]) != null) {
                    throw new UsageException("--" + name + " given twice");
                }
            }
            return options;
        }

        void allow(String... names) throws UsageException {
            List<String> allowed = List.of(names);
            for (String name : values.keySet()) {
                // --client-properties FILE: extra client settings (security, SASL) for any command
                if (!allowed.contains(name) && !name.equals("client-properties")) {
                    throw new UsageException("unknown option --" + name);
                }
            }
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        String get(String name, String fallback) {
            return values.getOrDefault(name, fallback);
        }

        String required(String name) throws UsageException {
            String value = values.get(name);
            if (value == null) {
                throw new UsageException("--" + name + " is required");
            }
            return value;
        }

        Integer integer(String name, Integer fallback) throws UsageException {
            String value = values.get(name);
            if (value == null) {
                return fallback;
            }
            try {
                return Integer.valueOf(value.strip());
            } catch (NumberFormatException e) {
                throw new UsageException("--" + name + " wants an integer, got " + value);
            }
        }

        List<Integer> integerList(String name) throws UsageException {
            String value = values.get(name);
            if (value == null) {
                return null;
            }
            List<Integer> result = new ArrayList<>();
            for (String item : value.split(",")) {
                try {
                    result.add(Integer.valueOf(item.strip()));
                } catch (NumberFormatException e) {
                    throw new UsageException("--" + name + " wants integers separated by commas, got " + value);
                }
            }
            return result;
        }

        boolean bool(String name, boolean fallback) throws UsageException {
            String value = choice(name, Boolean.toString(fallback), "true", "false");
            return value.equals("true");
        }

        String choice(String name, String fallback, String... allowed) throws UsageException {
            String value = values.get(name);
            if (value == null) {
                return fallback;
            }
            if (!List.of(allowed).contains(value)) {
                throw new UsageException("--" + name + " must be one of " + String.join(", ", allowed) + ", got " + value);
            }
            return value;
        }
    }

    /**
     * A small JSON reader for the produce command's input: objects become LinkedHashMaps, arrays
     * Lists, integers Longs, other numbers Doubles; throws IllegalArgumentException on bad input.
     */
    private static final class JsonReader {
        private final String text;
        private int pos;

        JsonReader(String text) {
            this.text = text;
        }

        Object readDocument() {
            Object value = readValue();
            skipSpace();
            if (pos != text.length()) {
                throw error("trailing characters");
            }
            return value;
        }

        private Object readValue() {
            skipSpace();
            if (pos >= text.length()) {
                throw error("unexpected end of input");
            }
            char c = text.charAt(pos);
            switch (c) {
                case '{':
                    return readObject();
                case '[':
                    return readArray();
                case '"':
                    return readString();
                case 't':
                    expectWord("true");
                    return Boolean.TRUE;
                case 'f':
                    expectWord("false");
                    return Boolean.FALSE;
                case 'n':
                    expectWord("null");
                    return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return readNumber();
                    }
                    throw error("unexpected character '" + c + "'");
            }
        }

        private Map<String, Object> readObject() {
            Map<String, Object> result = new LinkedHashMap<>();
            pos++; // '{'
            skipSpace();
            if (peek() == '}') {
                pos++;
                return result;
            }
            while (true) {
                skipSpace();
                if (peek() != '"') {
                    throw error("expected a field name");
                }
                String name = readString();
                skipSpace();
                expect(':');
                if (result.containsKey(name)) {
                    throw error("duplicate field " + name);
                }
                result.put(name, readValue());
                skipSpace();
                if (peek() == ',') {
                    pos++;
                } else {
                    expect('}');
                    return result;
                }
            }
        }

        private List<Object> readArray() {
            List<Object> result = new ArrayList<>();
            pos++; // '['
            skipSpace();
            if (peek() == ']') {
                pos++;
                return result;
            }
            while (true) {
                result.add(readValue());
                skipSpace();
                if (peek() == ',') {
                    pos++;
                } else {
                    expect(']');
                    return result;
                }
            }
        }

        private String readString() {
            StringBuilder out = new StringBuilder();
            pos++; // opening quote
            while (true) {
                if (pos >= text.length()) {
                    throw error("unterminated string");
                }
                char c = text.charAt(pos++);
                if (c == '"') {
                    return out.toString();
                }
                if (c < 0x20) {
                    throw error("control character in string");
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                if (pos >= text.length()) {
                    throw error("unterminated escape");
                }
                char escaped = text.charAt(pos++);
                switch (escaped) {
                    case '"', '\\', '/' -> out.append(escaped);
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> {
                        if (pos + 4 > text.length()) {
                            throw error("short \\u escape");
                        }
                        try {
                            out.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
                        } catch (NumberFormatException e) {
                            throw error("bad \\u escape");
                        }
                        pos += 4;
                    }
                    default -> throw error("bad escape \\" + escaped);
                }
            }
        }

        private Object readNumber() {
            int start = pos;
            if (peek() == '-') {
                pos++;
            }
            boolean integral = true;
            while (pos < text.length()) {
                char c = text.charAt(pos);
                if (c >= '0' && c <= '9') {
                    pos++;
                } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                    integral = false;
                    pos++;
                } else {
                    break;
                }
            }
            String number = text.substring(start, pos);
            try {
                return integral ? (Object) Long.valueOf(number) : (Object) Double.valueOf(number);
            } catch (NumberFormatException e) {
                throw error("bad number " + number);
            }
        }

        private void expectWord(String word) {
            if (!text.startsWith(word, pos)) {
                throw error("expected " + word);
            }
            pos += word.length();
        }

        private void expect(char c) {
            if (peek() != c) {
                throw error("expected '" + c + "'");
            }
            pos++;
        }

        private char peek() {
            return pos < text.length() ? text.charAt(pos) : '\0';
        }

        private void skipSpace() {
            while (pos < text.length() && " \t\r\n".indexOf(text.charAt(pos)) >= 0) {
                pos++;
            }
        }

        private IllegalArgumentException error(String message) {
            return new IllegalArgumentException("bad JSON at column " + (pos + 1) + ": " + message);
        }
    }

    /**
     * A command in its own source file that needs a Kafka 4.x client (the share consumer,
     * group.protocol=consumer): the pom's kafka3 profile leaves those files out of a 3.x build,
     * so they are looked up by name here.
     */
    private static void runOwnFile(String className, String[] args) throws Exception {
        Class<?> cls;
        try {
            cls = Class.forName(className);
        } catch (ClassNotFoundException e) {
            throw new UsageException(className + " needs the oracle built with a Kafka 4.x client");
        }
        java.lang.reflect.Method run = cls.getDeclaredMethod("run", String[].class);
        run.setAccessible(true);
        try {
            run.invoke(null, (Object) args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }
}
