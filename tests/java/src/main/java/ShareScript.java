import java.io.BufferedReader;
import java.io.InputStreamReader;
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
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Java {@code KafkaShareConsumer} driven step by step from stdin, for side-by-side scenarios
 * ({@code share-member --script true --bootstrap B --group G [--mode implicit|explicit]
 * [--max-poll-records N] [--callback true] [--close-ms N]}).
 *
 * <p>One command a line: {@code subscribe T1,T2}, {@code unsubscribe}, {@code poll MS} (the
 * records, one JSON line each as share-member prints them, then {@code {"event": "polled",
 * "count": n}}), {@code ack OFFSET TYPE} (explicit mode: acknowledge the record of the last poll
 * at OFFSET with ACCEPT / RELEASE / REJECT / RENEW), {@code commit} ({@code {"event": "commit",
 * "results": {"T-p": null | "error class: message"}}}), {@code sleep MS}, {@code close}
 * (close(), then {@code {"event": "closed"}} and the process ends; also on "stop" or the end of
 * stdin). A command that throws prints {@code {"event": "error", "error": "class: message"}}.
 * Every command ends with {@code {"event": "done", "cmd": "..."}}. With {@code --callback true}
 * the acknowledgement commit callback prints {@code {"event": "ack_callback", "offsets":
 * {"T-p": [...]}, "error": null | "class: message"}}.
 */
final class ShareScript {
    private ShareScript() {
    }

    static void run(Map<String, String> options) throws Exception {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, options.get("group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-share-script");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put("share.acknowledgement.mode", options.getOrDefault("mode", "implicit"));
        if (options.containsKey("max-poll-records")) {
            config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, options.get("max-poll-records"));
        }
        Duration closeTimeout = Duration.ofMillis(Long.parseLong(options.getOrDefault("close-ms", "30000")));
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(config);
        if (Boolean.parseBoolean(options.getOrDefault("callback", "false"))) {
            consumer.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception e) -> {
                StringBuilder text = new StringBuilder("{\"event\":\"ack_callback\",\"offsets\":{");
                String sep = "";
                for (Map.Entry<TopicIdPartition, Set<Long>> entry : offsets.entrySet()) {
                    List<Long> sorted = new ArrayList<>(entry.getValue());
                    sorted.sort(null);
                    text.append(sep).append('"').append(entry.getKey().topic()).append('-')
                        .append(entry.getKey().partition()).append("\":").append(sorted);
                    sep = ",";
                }
                text.append("},\"error\":").append(error(e)).append('}');
                ShareOracle.line(text.toString());
            });
        }
        List<ConsumerRecord<byte[], byte[]>> last = new ArrayList<>();
        boolean closed = false;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String raw;
            while (!closed) {
                raw = in.readLine();
                String cmd = raw == null ? "close" : raw.strip();
                if (cmd.isEmpty()) {
                    continue;
                }
                String[] words = cmd.split("\\s+");
                try {
                    switch (words[0]) {
                        case "subscribe" -> consumer.subscribe(List.of(words[1].split(",")));
                        case "unsubscribe" -> consumer.unsubscribe();
                        case "sleep" -> Thread.sleep(Long.parseLong(words[1]));
                        case "poll" -> {
                            ConsumerRecords<byte[], byte[]> records =
                                consumer.poll(Duration.ofMillis(Long.parseLong(words[1])));
                            last.clear();
                            for (ConsumerRecord<byte[], byte[]> record : records) {
                                last.add(record);
                                Optional<Short> count = record.deliveryCount();
                                ShareOracle.line("{\"topic\":\"" + record.topic() + "\",\"partition\":"
                                    + record.partition() + ",\"offset\":" + record.offset()
                                    + ",\"delivery_count\":" + (count.isPresent() ? count.get().toString() : "null")
                                    + ",\"value\":" + (record.value() == null ? "null"
                                        : "\"" + Base64.getEncoder().encodeToString(record.value()) + "\"")
                                    + ",\"key\":null,\"headers\":[]}");
                            }
                            ShareOracle.line("{\"event\":\"polled\",\"count\":" + records.count() + "}");
                        }
                        case "ack" -> {
                            long offset = Long.parseLong(words[1]);
                            AcknowledgeType type = AcknowledgeType.valueOf(words[2]);
                            for (ConsumerRecord<byte[], byte[]> record : last) {
                                if (record.offset() == offset) {
                                    consumer.acknowledge(record, type);
                                }
                            }
                        }
                        case "commit" -> {
                            Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                            StringBuilder text = new StringBuilder("{\"event\":\"commit\",\"results\":{");
                            String sep = "";
                            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> entry : result.entrySet()) {
                                text.append(sep).append('"').append(entry.getKey().topic()).append('-')
                                    .append(entry.getKey().partition()).append("\":")
                                    .append(error(entry.getValue().orElse(null)));
                                sep = ",";
                            }
                            ShareOracle.line(text.append("}}").toString());
                        }
                        case "close", "stop" -> {
                            closed = true;
                            consumer.close(closeTimeout);
                            ShareOracle.line("{\"event\":\"closed\"}");
                        }
                        default -> throw new IllegalArgumentException("unknown script command " + words[0]);
                    }
                } catch (Exception e) {
                    ShareOracle.line("{\"event\":\"error\",\"cmd\":\"" + words[0] + "\",\"error\":" + error(e) + "}");
                }
                ShareOracle.line("{\"event\":\"done\",\"cmd\":\"" + words[0] + "\"}");
            }
        } finally {
            if (!closed) {
                consumer.close(closeTimeout);
            }
        }
    }

    private static String error(Exception e) {
        if (e == null) {
            return "null";
        }
        String text = e.getClass().getSimpleName() + ": " + e.getMessage();
        return "\"" + text.replace("\\", "\\\\").replace("\"", "'").replace("\n", " ") + "\"";
    }
}
