import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java {@code KafkaShareConsumer} as a share-group member for interop tests (KafkaOracle's
 * {@code share-member} subcommand).
 *
 * <p>{@code share-member --bootstrap B --topic T --group G [--run-ms N]}: joins share group G
 * (implicit acknowledgement), polls until "stop" on stdin or N ms, and after every poll that
 * returned records commits them ({@code commitSync}: each record accepted). stdout, one JSON
 * line each: {@code {"topic", "partition", "offset", "delivery_count", "value"}} per record
 * (value in base64; key and headers are left out, as null and []), {@code {"event": "commit", "errors": E}} after each commit (E partitions
 * whose acknowledgement failed) and {@code {"event": "closed"}} at the end.
 */
final class ShareOracle {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private ShareOracle() {
    }

    /** The {@code --name value} pairs after the command name; each of {@code required} must be there. */
    static Map<String, String> options(String[] args, String... required) {
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

    static void run(String[] args) throws Exception {
        if (args[0].equals("share-script")) {
            ShareApiScript.run(args);
            return;
        }
        if (List.of(args).contains("--script")) {
            ShareScript.run(options(args, "bootstrap", "group"));
            return;
        }
        Map<String, String> options = options(args, "bootstrap", "topic", "group");
        long runMs = Long.parseLong(options.getOrDefault("run-ms", "120000"));
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, options.get("group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-share-member");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.strip().equals("stop")) {
                    // wait for "stop" or the end of stdin
                }
            } catch (java.io.IOException e) {
                System.err.println("warning: reading stdin failed: " + e);
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        long deadline = System.currentTimeMillis() + runMs;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(config)) {
            consumer.subscribe(List.of(options.get("topic")));
            while (!stop.get() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    Optional<Short> count = record.deliveryCount();
                    line("{\"topic\":\"" + record.topic() + "\",\"partition\":" + record.partition()
                        + ",\"offset\":" + record.offset() + ",\"delivery_count\":"
                        + (count.isPresent() ? count.get().toString() : "null") + ",\"value\":"
                        + (record.value() == null ? "null"
                            : "\"" + Base64.getEncoder().encodeToString(record.value()) + "\"")
                        + ",\"key\":null,\"headers\":[]}");
                }
                Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                int errors = 0;
                for (Optional<KafkaException> error : result.values()) {
                    if (error.isPresent()) {
                        errors++;
                        System.err.println("acknowledgement failed: " + error.get());
                    }
                }
                line("{\"event\":\"commit\",\"errors\":" + errors + "}");
            }
        }
        line("{\"event\":\"closed\"}");
    }

    static void line(String text) {
        OUT.println(text);
        OUT.flush();
    }
}
