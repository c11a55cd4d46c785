import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer in the transaction scenarios aiokafka_lite's tests run too (KafkaOracle's
 * {@code txn-feature} and {@code txn-scenario} subcommands, tests/test_txn_v2.py).
 *
 * <p>{@code txn-feature --bootstrap B --level N}: sets the cluster's finalized
 * {@code transaction.version} to N (upgrade or safe downgrade) and waits until the Admin client
 * describes it; one line {@code {"level": N}}.
 *
 * <p>{@code txn-scenario --bootstrap B --topic T --transactional-id ID --scenario S}, one JSON
 * line per step, {@code {"step", "error": simple class name or null, ...}}:
 * <ul>
 * <li>{@code commits}: three transactions of one record each, committed;</li>
 * <li>{@code zombie}: producer A commits one, producer B (same id) initialises, A's next send
 * commit and abort (the error of each), then B commits one;</li>
 * <li>{@code abort-after-failed-send}: a record the broker refuses (T has a small
 * max.message.bytes) fails its send, the commit fails, the abort works, the next transaction
 * commits one record;</li>
 * <li>{@code ctp --input I --group G --count N}: consume-transform-produce exactly once, reading
 * I read_committed and writing each value upper-cased to T with its offset committed in the
 * same transaction, until N records are processed;</li>
 * <li>{@code coordinator-kill --partitions P --pause-ms MS}: one transaction: values v-1000..1049
 * on P partitions, flushed, a pause (the test kills the transaction coordinator meanwhile),
 * v-1050..1099 and the commit ({@code commit}; {@code abort} when it failed), then v-2000..2009
 * committed ({@code next});</li>
 * <li>{@code bench --partitions P --records R --count N --warmup W}: W + N transactions of R
 * 100-byte records spread over P partitions, committed one after another; one line with the
 * seconds of the last N, each one's commit time ({@code commit_ns}) and begin-to-committed
 * time ({@code txn_ns});</li>
 * <li>{@code steps --proxies "B1;B2;..."}: for each bootstrap (a fault proxy answering one
 * request with an injected error), with transactional id ID-i: one transaction of one record (steps {@code send}, {@code commit}), its
 * abort when the commit failed ({@code abort}), then one more transaction ({@code next}: the
 * first error of begin, send, commit). The tests run it through the fault proxy, which answers
 * one request with an injected error: what the application sees of each error class
 * (KIP-1050).</li>
 * </ul>
 */
final class TxnOracle {

    /** --name value pairs after the command; the required ones must be there (this file's own:
     *  a Kafka 3.x build leaves the share files out, and this one is built there too). */
    private static Map<String, String> options(String[] args, String... required) {
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected an option, got " + args[i]);
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        for (String name : required) {
            if (!options.containsKey(name)) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
        }
        return options;
    }

    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final Duration CLOSE = Duration.ofSeconds(10);

    private TxnOracle() {
    }

    static void run(String[] args) throws Exception {
        if (args[0].equals("txn-feature")) {
            feature(options(args, "bootstrap", "level"));
            return;
        }
        Map<String, String> o = options(args, "bootstrap", "topic", "transactional-id", "scenario");
        switch (o.get("scenario")) {
            case "commits" -> commits(o);
            case "zombie" -> zombie(o);
            case "abort-after-failed-send" -> abortAfterFailedSend(o);
            case "ctp" -> ctp(o);
            case "steps" -> steps(o);
            case "coordinator-kill" -> coordinatorKill(o);
            case "bench" -> bench(o);
            default -> throw new IllegalArgumentException("unknown scenario " + o.get("scenario"));
        }
    }

    private static void feature(Map<String, String> o) throws Exception {
        short level = Short.parseShort(o.get("level"));
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        try (Admin admin = Admin.create(config)) {
            FinalizedVersionRange now = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                .finalizedFeatures().get("transaction.version");
            short current = now == null ? 0 : now.maxVersionLevel();
            if (current != level) {
                FeatureUpdate.UpgradeType type = level > current
                    ? FeatureUpdate.UpgradeType.UPGRADE : FeatureUpdate.UpgradeType.SAFE_DOWNGRADE;
                admin.updateFeatures(Map.of("transaction.version", new FeatureUpdate(level, type)),
                    new UpdateFeaturesOptions()).all().get(30, TimeUnit.SECONDS);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                now = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                    .finalizedFeatures().get("transaction.version");
                if ((now == null ? 0 : now.maxVersionLevel()) == level) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("transaction.version still " + now);
                }
                Thread.sleep(100);
            }
        }
        emit("{\"level\":" + level + "}");
    }

    private static KafkaProducer<byte[], byte[]> producer(Map<String, String> o) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.get("transactional-id"));
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, o.getOrDefault("request-timeout-ms", "20000"));
        return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, String value) {
        return new ProducerRecord<>(topic, 0, null, value.getBytes(StandardCharsets.UTF_8));
    }

    private static void commits(Map<String, String> o) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(o)) {
            p.initTransactions();
            for (int i = 0; i < 3; i++) {
                p.beginTransaction();
                p.send(record(o.get("topic"), "c" + i)).get();
                p.commitTransaction();
            }
        }
        step("commits", null);
    }

    private static void zombie(Map<String, String> o) throws Exception {
        String topic = o.get("topic");
        KafkaProducer<byte[], byte[]> a = producer(o);
        KafkaProducer<byte[], byte[]> b = producer(o);
        try {
            a.initTransactions();
            a.beginTransaction();
            a.send(record(topic, "a-committed")).get();
            a.commitTransaction();
            b.initTransactions();
            a.beginTransaction();
            step("zombie-send", error(() -> a.send(record(topic, "a-zombie")).get()));
            step("zombie-commit", error(a::commitTransaction));
            step("zombie-abort", error(a::abortTransaction));
            b.beginTransaction();
            b.send(record(topic, "b-committed")).get();
            b.commitTransaction();
            step("successor-commit", null);
        } finally {
            a.close(CLOSE);
            b.close(CLOSE);
        }
    }

    private static void abortAfterFailedSend(Map<String, String> o) throws Exception {
        String topic = o.get("topic");
        try (KafkaProducer<byte[], byte[]> p = producer(o)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(record(topic, "before")).get();
            step("failed-send", error(() -> p.send(record(topic, "x".repeat(4096))).get()));
            step("commit", error(p::commitTransaction));
            step("abort", error(p::abortTransaction));
            p.beginTransaction();
            p.send(record(topic, "after")).get();
            step("next-commit", error(p::commitTransaction));
        }
    }

    private static void steps(Map<String, String> o) throws Exception {
        String topic = o.get("topic");
        String[] proxies = o.getOrDefault("proxies", o.get("bootstrap")).split(";");
        for (int i = 0; i < proxies.length; i++) {
            Map<String, String> c = new HashMap<>(o);
            c.put("bootstrap", proxies[i]);
            c.put("transactional-id", o.get("transactional-id") + "-" + i);
            int n = i;
            try (KafkaProducer<byte[], byte[]> p = producer(c)) {
                p.initTransactions();
                p.beginTransaction();
                caseStep(n, "send", error(() -> p.send(record(topic, "first")).get()));
                String commit = error(p::commitTransaction);
                caseStep(n, "commit", commit);
                if (commit != null) {
                    caseStep(n, "abort", error(p::abortTransaction));
                }
                caseStep(n, "next", error(() -> {
                    p.beginTransaction();
                    p.send(record(topic, "next")).get();
                    p.commitTransaction();
                }));
            }
        }
    }

    private static void caseStep(int n, String name, String error) {
        emit("{\"case\":" + n + ",\"step\":\"" + name + "\",\"error\":"
            + (error == null ? "null" : "\"" + error + "\"") + "}");
    }

    private static void coordinatorKill(Map<String, String> o) throws Exception {
        String topic = o.get("topic");
        int partitions = Integer.parseInt(o.getOrDefault("partitions", "2"));
        long pause = Long.parseLong(o.getOrDefault("pause-ms", "8000"));
        try (KafkaProducer<byte[], byte[]> p = producer(o)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 1000; i < 1050; i++) {
                p.send(new ProducerRecord<>(topic, i % partitions, null, ("v-" + i).getBytes(StandardCharsets.UTF_8)));
            }
            p.flush();
            Thread.sleep(pause);  // the test kills the coordinator meanwhile
            String failed = error(() -> {
                for (int i = 1050; i < 1100; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, null, ("v-" + i).getBytes(StandardCharsets.UTF_8)));
                }
                p.commitTransaction();
            });
            step("commit", failed);
            if (failed != null) {
                step("abort", error(p::abortTransaction));
            }
            step("next", error(() -> {
                p.beginTransaction();
                for (int i = 2000; i < 2010; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, null, ("v-" + i).getBytes(StandardCharsets.UTF_8)));
                }
                p.commitTransaction();
            }));
        }
    }

    private static void bench(Map<String, String> o) throws Exception {
        String topic = o.get("topic");
        int partitions = Integer.parseInt(o.getOrDefault("partitions", "1"));
        int records = Integer.parseInt(o.getOrDefault("records", "10"));
        int count = Integer.parseInt(o.getOrDefault("count", "200"));
        int warmup = Integer.parseInt(o.getOrDefault("warmup", "20"));
        byte[] value = new byte[100];
        java.util.Arrays.fill(value, (byte) 'x');
        long[] commits = new long[count];
        long[] txns = new long[count];
        try (KafkaProducer<byte[], byte[]> p = producer(o)) {
            p.initTransactions();
            long start = 0;
            for (int t = -warmup; t < count; t++) {
                if (t == 0) {
                    start = System.nanoTime();
                }
                long b = System.nanoTime();
                p.beginTransaction();
                for (int i = 0; i < records; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, null, value));
                }
                long c = System.nanoTime();
                p.commitTransaction();
                if (t >= 0) {
                    long e = System.nanoTime();
                    commits[t] = e - c;
                    txns[t] = e - b;
                }
            }
            long elapsed = System.nanoTime() - start;
            StringBuilder sb = new StringBuilder("{\"step\":\"bench\",\"seconds\":")
                .append(elapsed / 1e9).append(",\"commit_ns\":[");
            for (int t = 0; t < count; t++) {
                sb.append(t == 0 ? "" : ",").append(commits[t]);
            }
            sb.append("],\"txn_ns\":[");
            for (int t = 0; t < count; t++) {
                sb.append(t == 0 ? "" : ",").append(txns[t]);
            }
            emit(sb.append("]}").toString());
        }
    }

    private static void ctp(Map<String, String> o) throws Exception {
        int count = Integer.parseInt(o.get("count"));
        String out = o.get("topic");
        Properties cc = new Properties();
        cc.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        cc.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
        cc.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cc.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cc.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        int done = 0;
        try (KafkaProducer<byte[], byte[]> p = producer(o);
             KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(cc, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            p.initTransactions();
            c.subscribe(List.of(o.get("input")));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (done < count && System.nanoTime() < deadline) {
                var records = c.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String v = new String(r.value(), StandardCharsets.UTF_8).toUpperCase();
                    sent.add(p.send(record(out, v)));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    done++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
            }
        }
        emit("{\"step\":\"ctp\",\"processed\":" + done + "}");
    }

    private interface Call {
        void call() throws Exception;
    }

    /** The simple class name of what {@code call} throws (an ExecutionException's cause), or
     *  null; a plain KafkaException wrapping another (Java's "in an error state") as
     *  {@code KafkaException:CauseName}. */
    private static String error(Call call) {
        try {
            call.call();
            return null;
        } catch (ExecutionException e) {
            return name(e.getCause());
        } catch (Exception e) {
            return name(e);
        }
    }

    private static String name(Throwable e) {
        String name = e.getClass().getSimpleName();
        if (e.getClass() == KafkaException.class && e.getCause() != null) {
            return name + ":" + e.getCause().getClass().getSimpleName();
        }
        return name;
    }

    private static void step(String name, String error) {
        emit("{\"step\":\"" + name + "\",\"error\":" + (error == null ? "null" : "\"" + error + "\"") + "}");
    }

    private static void emit(String line) {
        OUT.println(line);
        OUT.flush();
    }
}
