import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Java client kept running for the KIP-714 telemetry tests (KafkaOracle's
 * {@code telemetry-client} subcommand), so that the broker's metrics plugin records its pushes.
 *
 * <p>{@code telemetry-client --bootstrap B --kind share|admin --client-id C [--topic T --group G]
 * [--run-ms N]}: {@code share}, a {@code KafkaShareConsumer} subscribed to T in share group G,
 * polling every 200 ms and committing (implicit acknowledgement); {@code admin}, an
 * {@code Admin} client calling {@code describeCluster} every 200 ms ({@code --push}: its
 * {@code enable.metrics.push}, false by default for the Admin client). Until "stop" on stdin (or
 * its end, or N ms); then the client is closed (its terminating push) and one line
 * {@code {"event":"closed"}} is printed.
 */
final class TelemetryClients {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private TelemetryClients() {
    }

    static void run(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].substring(2), args[i + 1]);
        }
        long deadline = System.currentTimeMillis() + Long.parseLong(o.getOrDefault("run-ms", "120000"));
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
        if (o.get("kind").equals("share")) {
            Properties config = new Properties();
            config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
            config.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
            config.put(ConsumerConfig.CLIENT_ID_CONFIG, o.get("client-id"));
            config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(config)) {
                consumer.subscribe(List.of(o.get("topic")));
                while (!stop.get() && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                    if (!records.isEmpty()) {
                        consumer.commitSync();
                    }
                }
            }
        } else {
            Properties config = new Properties();
            config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
            config.put(AdminClientConfig.CLIENT_ID_CONFIG, o.get("client-id"));
            if (o.containsKey("push")) {
                config.put(AdminClientConfig.ENABLE_METRICS_PUSH_CONFIG, o.get("push"));
            }
            try (Admin admin = Admin.create(config)) {
                while (!stop.get() && System.currentTimeMillis() < deadline) {
                    admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
                    Thread.sleep(200);
                }
            }
        }
        OUT.println("{\"event\":\"closed\"}");
        OUT.flush();
    }
}
