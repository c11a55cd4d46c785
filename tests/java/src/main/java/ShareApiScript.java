import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * A {@code KafkaShareConsumer} driven step by step from stdin, for side-by-side scenarios
 * (KafkaOracle's {@code share-script} subcommand, run by {@code java_oracle.ShareApiScript}).
 *
 * <p>{@code share-script --bootstrap B --topic T --group G [--config k=v,k=v] [--fail-prefix P]}:
 * {@code --config} adds consumer configs ({@code share.acknowledgement.mode=explicit},
 * {@code share.acquire.mode=record_limit}, {@code max.poll.records}, ...); with
 * {@code --fail-prefix} the value deserializer throws on values starting with P. Commands, one a
 * line: {@code poll MS}, {@code poll-until MS} (polls until records come, an error, or MS), {@code ack TOPIC PARTITION OFFSET TYPE}, {@code ack-record INDEX TYPE}
 * (INDEX in the last poll's records), {@code commit-sync}, {@code commit-async}, {@code sleep MS},
 * {@code lock-timeout}, {@code close}. Each answers one JSON line with {@code "reply": command},
 * {@code "error"} (null or {@code {"class", "message", "topic", "partition", "offset"}}) and, for
 * poll, {@code "records"}; commit-sync gives {@code "results"} ("topic-partition": error class or
 * null). The acknowledgement commit callback prints {@code {"event": "callback", "offsets":
 * {"topic-partition": [...]}, "error": class or null}} when Java calls it.
 */
final class ShareApiScript {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private ShareApiScript() {
    }

    /** A value deserializer failing on values that start with a prefix. */
    static final class Failing implements Deserializer<byte[]> {
        private final byte[] prefix;

        Failing(String prefix) {
            this.prefix = prefix.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public byte[] deserialize(String topic, byte[] data) {
            if (data != null && data.length >= prefix.length) {
                boolean match = true;
                for (int i = 0; i < prefix.length; i++) {
                    match &= data[i] == prefix[i];
                }
                if (match) {
                    throw new SerializationException("cannot deserialize this value");
                }
            }
            return data;
        }
    }

    static void run(String[] args) throws Exception {
        Map<String, String> options = ShareOracle.options(args, "bootstrap", "topic", "group");
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, options.get("group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-share-script");
        for (String kv : options.getOrDefault("config", "").split(",")) {
            if (!kv.isBlank()) {
                String[] parts = kv.split("=", 2);
                config.put(parts[0], parts[1]);
            }
        }
        String failPrefix = options.get("fail-prefix");
        Deserializer<byte[]> values =
            failPrefix == null ? new ByteArrayDeserializer() : new Failing(failPrefix);
        List<ConsumerRecord<byte[], byte[]>> last = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                 new KafkaShareConsumer<>(config, new ByteArrayDeserializer(), values)) {
            consumer.setAcknowledgementCommitCallback((offsets, error) -> {
                StringBuilder text = new StringBuilder("{\"event\":\"callback\",\"offsets\":{");
                String sep = "";
                for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                    text.append(sep).append('"').append(e.getKey().topic()).append('-')
                        .append(e.getKey().partition()).append("\":").append(new java.util.TreeSet<>(e.getValue()));
                    sep = ",";
                }
                text.append("},\"error\":").append(error == null ? "null" : "\"" + error.getClass().getSimpleName() + "\"")
                    .append('}');
                line(text.toString());
            });
            consumer.subscribe(List.of(options.get("topic")));
            String command;
            while ((command = in.readLine()) != null) {
                String[] words = command.strip().split(" ");
                String extra = "";
                String error = "null";
                try {
                    switch (words[0]) {
                        case "poll" -> {
                            last.clear();
                            ConsumerRecords<byte[], byte[]> records =
                                consumer.poll(Duration.ofMillis(Long.parseLong(words[1])));
                            records.forEach(last::add);
                            extra = ",\"records\":" + recordsJson(last);
                        }
                        case "poll-until" -> {
                            last.clear();
                            long until = System.currentTimeMillis() + Long.parseLong(words[1]);
                            while (last.isEmpty() && System.currentTimeMillis() < until) {
                                consumer.poll(Duration.ofMillis(200)).forEach(last::add);
                            }
                            extra = ",\"records\":" + recordsJson(last);
                        }
                        case "ack" -> consumer.acknowledge(words[1], Integer.parseInt(words[2]),
                            Long.parseLong(words[3]), AcknowledgeType.valueOf(words[4]));
                        case "ack-record" -> consumer.acknowledge(last.get(Integer.parseInt(words[1])),
                            AcknowledgeType.valueOf(words[2]));
                        case "commit-sync" -> {
                            Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                            StringBuilder text = new StringBuilder(",\"results\":{");
                            String sep = "";
                            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                                text.append(sep).append('"').append(e.getKey().topic()).append('-')
                                    .append(e.getKey().partition()).append("\":")
                                    .append(e.getValue().map(x -> "\"" + x.getClass().getSimpleName() + "\"").orElse("null"));
                                sep = ",";
                            }
                            extra = text.append('}').toString();
                        }
                        case "commit-async" -> consumer.commitAsync();
                        case "sleep" -> Thread.sleep(Long.parseLong(words[1]));
                        case "lock-timeout" -> extra = ",\"ms\":" + consumer.acquisitionLockTimeoutMs().orElse(-1);
                        case "close" -> {
                            consumer.close();
                            line("{\"reply\":\"close\",\"error\":null}");
                            return;
                        }
                        default -> throw new IllegalArgumentException("unknown command " + words[0]);
                    }
                } catch (RuntimeException e) {
                    error = errorJson(e);
                }
                line("{\"reply\":\"" + words[0] + "\",\"error\":" + error + extra + "}");
            }
        }
    }

    private static String errorJson(Exception e) {
        String where = "";
        if (e instanceof RecordDeserializationException r) {
            where = ",\"topic\":\"" + r.topicPartition().topic() + "\",\"partition\":"
                + r.topicPartition().partition() + ",\"offset\":" + r.offset();
        }
        String message = String.valueOf(e.getMessage()).replace("\\", "/").replace("\"", "'").replaceAll("\\s", " ");
        return "{\"class\":\"" + e.getClass().getSimpleName() + "\",\"message\":\"" + message + "\"" + where + "}";
    }

    private static String recordsJson(List<ConsumerRecord<byte[], byte[]>> records) {
        StringBuilder text = new StringBuilder("[");
        String sep = "";
        for (ConsumerRecord<byte[], byte[]> r : records) {
            Optional<Short> count = r.deliveryCount();
            text.append(sep).append("{\"topic\":\"").append(r.topic()).append("\",\"partition\":")
                .append(r.partition()).append(",\"offset\":").append(r.offset()).append(",\"delivery_count\":")
                .append(count.isPresent() ? count.get().toString() : "null").append(",\"value\":")
                .append(r.value() == null ? "null" : "\"" + Base64.getEncoder().encodeToString(r.value()) + "\"")
                .append('}');
            sep = ",";
        }
        return text.append(']').toString();
    }

    private static void line(String text) {
        synchronized (OUT) {
            OUT.println(text);
            OUT.flush();
        }
    }
}
