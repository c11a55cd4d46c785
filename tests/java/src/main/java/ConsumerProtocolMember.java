import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * {@code group-member-consumer}: a Java consumer in a KIP-848 group ({@code group.protocol=consumer}),
 * printing the same JSON lines as {@code group-member} (tests/java_oracle.py {@code GroupMember}):
 * {@code assigned} / {@code revoked} / {@code lost} events with their partitions, each record read,
 * {@code commit_failed}, {@code closed}, and {@code error} (with the exception's class name) when
 * {@code poll} throws, which ends the run. Commits synchronously after each poll that returned records
 * (or, with {@code --auto-commit true}, leaves it to the auto commit); "stop" on stdin (or the end of
 * stdin) closes it, so it leaves the group. Instead of {@code --topic}: {@code --pattern} (a client-side
 * {@code java.util.regex.Pattern}) or {@code --subscription-pattern} (a broker-side
 * {@code SubscriptionPattern}). {@code --revoke-sleep-ms} makes {@code onPartitionsRevoked} slow.
 *
 * <pre>group-member-consumer --bootstrap H:P (--topic T | --pattern P | --subscription-pattern P) --group G
 *     [--remote-assignor NAME] [--run-ms N] [--from beginning|latest] [--instance-id ID]
 *     [--close-operation default|leave_group|remain_in_group (KIP-1092)]
 *     [--revoke-sleep-ms N] [--max-poll-records N] [--auto-commit true|false] [--close-ms N]
 *     [--group-protocol consumer|classic (default consumer: the KIP-1092 close cases run on both)]</pre>
 */
final class ConsumerProtocolMember {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private ConsumerProtocolMember() {}

    static void run(String[] args) throws Exception {
        String bootstrap = null, topic = null, group = null, assignor = null, from = "beginning";
        String pattern = null, subscriptionPattern = null, instanceId = null, maxPollRecords = null;
        boolean autoCommit = false;
        long runMs = 120000, revokeSleepMs = 0, closeMs = 10000;
        // KIP-1092: CloseOptions.GroupMembershipOperation (DEFAULT, LEAVE_GROUP, REMAIN_IN_GROUP)
        String closeOperation = "DEFAULT";
        String groupProtocol = "consumer";
        for (int i = 1; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = value;
                case "--topic" -> topic = value;
                case "--group" -> group = value;
                case "--remote-assignor" -> assignor = value;
                case "--run-ms" -> runMs = Long.parseLong(value);
                case "--from" -> from = value;
                case "--pattern" -> pattern = value;
                case "--subscription-pattern" -> subscriptionPattern = value;
                case "--instance-id" -> instanceId = value;
                case "--revoke-sleep-ms" -> revokeSleepMs = Long.parseLong(value);
                case "--max-poll-records" -> maxPollRecords = value;
                case "--auto-commit" -> autoCommit = Boolean.parseBoolean(value);
                case "--close-ms" -> closeMs = Long.parseLong(value);
                case "--close-operation" -> closeOperation = value;
                case "--group-protocol" -> groupProtocol = value;
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (bootstrap == null || group == null
            || (topic == null && pattern == null && subscriptionPattern == null)) {
            throw new IllegalArgumentException(
                "--bootstrap, --group and one of --topic, --pattern, --subscription-pattern are required");
        }
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafka-oracle-consumer-protocol");
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, Boolean.toString(autoCommit));
        if (instanceId != null) {
            config.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        if (maxPollRecords != null) {
            config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPollRecords);
        }
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, from.equals("latest") ? "latest" : "earliest");
        if (assignor != null) {
            config.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // wait for "stop" or the end of stdin
                }
            } catch (IOException e) {
                System.err.println("warning: reading stdin failed: " + e);
            }
            stop.set(true);
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();

        long deadline = System.nanoTime() + runMs * 1_000_000L;
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        final long sleepMs = revokeSleepMs;
        try {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    event("revoked", partitions, consumer);
                    if (sleepMs > 0 && !partitions.isEmpty()) {
                        try {
                            Thread.sleep(sleepMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        event("revoked_done", partitions, consumer);
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    event("assigned", partitions, consumer);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    event("lost", partitions, consumer);
                }
            };
            if (subscriptionPattern != null) {
                consumer.subscribe(new SubscriptionPattern(subscriptionPattern), listener);
            } else if (pattern != null) {
                consumer.subscribe(Pattern.compile(pattern), listener);
            } else {
                consumer.subscribe(List.of(topic), listener);
            }
            while (!stop.get() && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (KafkaException e) {
                    emit("{\"event\":\"error\",\"error\":" + str(e.getClass().getSimpleName())
                        + ",\"message\":" + str(String.valueOf(e.getMessage())) + "}");
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    emit("{\"topic\":" + str(record.topic()) + ",\"partition\":" + record.partition()
                        + ",\"offset\":" + record.offset() + ",\"timestamp\":" + record.timestamp()
                        + ",\"key\":" + b64(record.key()) + ",\"value\":" + b64(record.value())
                        + ",\"headers\":[]}");
                }
                if (!records.isEmpty() && !autoCommit) {
                    try {
                        consumer.commitSync();
                    } catch (KafkaException e) {
                        emit("{\"event\":\"commit_failed\",\"error\":" + str(e.toString()) + "}");
                    }
                }
            }
        } finally {
            consumer.close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.valueOf(closeOperation.toUpperCase()))
                .withTimeout(Duration.ofMillis(closeMs)));
        }
        emit("{\"event\":\"closed\"}");
    }

    private static void event(String kind, Collection<TopicPartition> partitions, KafkaConsumer<?, ?> consumer) {
        List<String> pairs = new ArrayList<>();
        partitions.stream()
            .sorted((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                : a.topic().compareTo(b.topic()))
            .forEach(tp -> pairs.add("[" + str(tp.topic()) + "," + tp.partition() + "]"));
        emit("{\"event\":" + str(kind) + ",\"partitions\":[" + String.join(",", pairs) + "],\"generation\":"
            + consumer.groupMetadata().generationId() + ",\"member_id\":" + str(consumer.groupMetadata().memberId())
            + "}");
    }

    private static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    /** A JSON string; topic names and error texts here are printable ASCII but escape anyway. */
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
