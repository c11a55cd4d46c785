import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Scenarios of the client KIPs of issue 32, one JSON line per event on stdout, until "stop" on
 * stdin (or the end of stdin, or {@code --run-ms}):
 *
 * <pre>assign-reader --bootstrap H:P --topic T [--partitions N] [--from earliest|latest|none] [--run-ms N]</pre>
 * (both: {@code [--recovery rebootstrap|none] [--trigger-ms N]}, the KIP-899 / KIP-1102 settings)
 * a consumer without a group, {@code assign()}ed partitions 0..N-1 from the beginning: each record
 * read ({@code topic, partition, offset, value}) and {@code {"event":"error"}} with the exception's
 * class when {@code poll} throws (it keeps polling after 100 ms: what it reads next is the point);
 *
 * <pre>flood-producer --bootstrap H:P --topic T [--run-ms N] [--delivery-timeout-ms N] [--interval-ms N]</pre>
 * an idempotent producer ({@code acks=all}) sending to partition 0 as fast as its buffer lets it:
 * {@code {"event":"acked","offset":n,"t":epoch ms}} per acknowledged record and
 * {@code {"event":"error"}} per failed one. KIP-951's leader discovery is measured from its acks.
 */
final class KipScripts {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private KipScripts() {}

    static void run(String[] args) throws Exception {
        String bootstrap = null, topic = null, from = "earliest", recovery = "rebootstrap";
        String triggerMs = "300000", deliveryMs = "60000";
        long intervalMs = 1;
        int partitions = 1;
        long runMs = 120000;
        for (int i = 1; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = value;
                case "--topic" -> topic = value;
                case "--partitions" -> partitions = Integer.parseInt(value);
                case "--from" -> from = value;
                case "--run-ms" -> runMs = Long.parseLong(value);
                case "--recovery" -> recovery = value;
                case "--trigger-ms" -> triggerMs = value;
                case "--delivery-timeout-ms" -> deliveryMs = value;
                case "--interval-ms" -> intervalMs = Long.parseLong(value);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (bootstrap == null || topic == null) {
            throw new IllegalArgumentException("--bootstrap and --topic are required");
        }
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicBoolean paused = new AtomicBoolean(false);
        watchStdin(stop, paused);
        long deadline = System.nanoTime() + runMs * 1_000_000L;
        if (args[0].equals("assign-reader")) {
            assignReader(bootstrap, topic, partitions, from, stop, paused, deadline, recovery, triggerMs);
        } else {
            floodProducer(bootstrap, topic, stop, deadline, recovery, triggerMs, deliveryMs, intervalMs);
        }
        emit("{\"event\":\"closed\"}");
    }

    private static void assignReader(
            String bootstrap, String topic, int partitions, String from, AtomicBoolean stop,
            AtomicBoolean paused, long deadline, String recovery, String triggerMs) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-assign-reader");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, from);
        config.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        config.put("metadata.recovery.strategy", recovery);
        config.put("metadata.recovery.rebootstrap.trigger.ms", triggerMs);
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            emit("{\"event\":\"assigned\"}");
            boolean isPaused = false;
            while (!stop.get() && System.nanoTime() < deadline) {
                if (paused.get() != isPaused) {
                    isPaused = paused.get();
                    if (isPaused) {
                        consumer.pause(tps);
                    } else {
                        consumer.resume(tps);
                    }
                    emit("{\"event\":\"" + (isPaused ? "paused" : "resumed") + "\"}");
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (KafkaException e) {
                    error(e);
                    sleep(100);
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    emit("{\"topic\":" + str(record.topic()) + ",\"partition\":" + record.partition()
                        + ",\"offset\":" + record.offset() + ",\"key\":null,\"value\":" + b64(record.value())
                        + ",\"headers\":[]}");
                }
            }
        }
    }

    private static void floodProducer(String bootstrap, String topic, AtomicBoolean stop, long deadline,
            String recovery, String triggerMs, String deliveryMs, long intervalMs) throws Exception {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "kafka-oracle-flood");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, deliveryMs);
        config.put("metadata.recovery.strategy", recovery);
        config.put("metadata.recovery.rebootstrap.trigger.ms", triggerMs);
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000"); // as ours (cluster_helpers)
        config.put(ProducerConfig.BUFFER_MEMORY_CONFIG, Integer.toString(1 << 20));
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            emit("{\"event\":\"started\"}");
            long n = 0;
            while (!stop.get() && System.nanoTime() < deadline) {
                byte[] value = Long.toString(n++).getBytes(StandardCharsets.US_ASCII);
                producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                    if (e != null) {
                        error(e);
                    } else {
                        emit("{\"event\":\"acked\",\"offset\":" + md.offset() + ",\"t\":"
                            + System.currentTimeMillis() + "}");
                    }
                });
                sleep(intervalMs); // a steady flood (1 ms: about 1000 records/s), not a full buffer
            }
            producer.flush();
        }
    }

    private static void watchStdin(AtomicBoolean stop, AtomicBoolean paused) {
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    if (line.trim().equals("pause") || line.trim().equals("resume")) {
                        paused.set(line.trim().equals("pause"));
                    }
                }
            } catch (IOException e) {
                System.err.println("warning: reading stdin failed: " + e);
            }
            stop.set(true);
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static void error(Exception e) {
        emit("{\"event\":\"error\",\"error\":" + str(e.getClass().getSimpleName()) + ",\"message\":"
            + str(String.valueOf(e.getMessage())) + ",\"t\":" + System.currentTimeMillis() + "}");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    private static String str(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static synchronized void emit(String line) {
        OUT.print(line + "\n");
        OUT.flush();
    }
}
