import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FenceProducersResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java {@code Admin} client's transaction calls (KafkaOracle's {@code txn-admin}
 * subcommand), for comparing aiokafka_lite's with them on the same transactions.
 *
 * <p>{@code txn-admin --bootstrap B --ids ID,ID --partitions T:P,T:P [--pattern RE]
 * [--producer-id N] [--abort T:P:PID:EPOCH:COORDEPOCH] [--fence ID]}, one JSON line per step,
 * in this order: {@code {"abort": "T:P", "error"}} and {@code {"fence": ID, "producer_id",
 * "producer_epoch", "error"}} when asked (error: the simple class name or null), then
 * {@code {"list": [...], "ongoing": [...], "by_producer": [...], "over_hour": [...],
 * "any_duration": [...], "pattern": [...], "describe": {ID: {...}}, "producers": {"T:P": [...]}}}:
 * {@code listTransactions} without filter, with {@code filterStates(Ongoing)},
 * {@code filterProducerIds(N)}, {@code filterOnDuration} one hour and 0, and
 * {@code filterOnTransactionalIdPattern(RE)}, each kept to the ids of --ids
 * ({@code [id, producer_id, state]}, sorted); {@code describeTransactions} of the ids;
 * {@code describeProducers} of the partitions ({@code [producer_id, epoch, last_sequence,
 * last_timestamp, coordinator_epoch, txn_start_offset]}, -1 for an absent value, sorted).
 */
final class TxnAdminOracle {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final long WAIT_S = 60;

    private TxnAdminOracle() {
    }

    static void run(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].substring(2), args[i + 1]);
        }
        Set<String> ids = Set.of(o.get("ids").split(","));
        List<TopicPartition> partitions = new ArrayList<>();
        for (String tp : o.get("partitions").split(",")) {
            int at = tp.lastIndexOf(':');
            partitions.add(new TopicPartition(tp.substring(0, at), Integer.parseInt(tp.substring(at + 1))));
        }
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, "kafka-oracle-txn-admin");
        try (Admin admin = Admin.create(config)) {
            if (o.containsKey("abort")) {
                String[] a = o.get("abort").split(":");
                TopicPartition tp = new TopicPartition(a[0], Integer.parseInt(a[1]));
                String error = null;
                try {
                    admin.abortTransaction(new AbortTransactionSpec(tp, Long.parseLong(a[2]),
                        Short.parseShort(a[3]), Integer.parseInt(a[4]))).all().get(WAIT_S, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    error = e.getCause().getClass().getSimpleName();
                }
                OUT.println("{\"abort\":" + quote(a[0] + ":" + a[1]) + ",\"error\":" + quoteOrNull(error) + "}");
            }
            if (o.containsKey("fence")) {
                String id = o.get("fence");
                FenceProducersResult r = admin.fenceProducers(List.of(id));
                String error = null;
                long pid = -1;
                short epoch = -1;
                try {
                    pid = r.producerId(id).get(WAIT_S, TimeUnit.SECONDS);
                    epoch = r.epochId(id).get(WAIT_S, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    error = e.getCause().getClass().getSimpleName();
                }
                OUT.println("{\"fence\":" + quote(id) + ",\"producer_id\":" + pid + ",\"producer_epoch\":"
                    + epoch + ",\"error\":" + quoteOrNull(error) + "}");
            }
            OUT.flush();
            StringBuilder out = new StringBuilder("{\"list\":");
            out.append(listing(admin, new ListTransactionsOptions(), ids));
            out.append(",\"ongoing\":").append(listing(admin,
                new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), ids));
            if (o.containsKey("producer-id")) {
                out.append(",\"by_producer\":").append(listing(admin,
                    new ListTransactionsOptions().filterProducerIds(List.of(Long.parseLong(o.get("producer-id")))), ids));
            }
            out.append(",\"over_hour\":").append(listing(admin,
                new ListTransactionsOptions().filterOnDuration(3_600_000L), ids));
            out.append(",\"any_duration\":").append(listing(admin,
                new ListTransactionsOptions().filterOnDuration(0L), ids));
            if (o.containsKey("pattern")) {
                out.append(",\"pattern\":").append(listing(admin,
                    new ListTransactionsOptions().filterOnTransactionalIdPattern(o.get("pattern")), ids));
            }
            out.append(",\"describe\":{");
            Map<String, TransactionDescription> described =
                admin.describeTransactions(ids).all().get(WAIT_S, TimeUnit.SECONDS);
            String sep = "";
            for (String id : ids.stream().sorted().toList()) {
                TransactionDescription d = described.get(id);
                List<String> tps = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) {
                    tps.add(quote(tp.topic() + ":" + tp.partition()));
                }
                tps.sort(Comparator.naturalOrder());
                out.append(sep).append(quote(id)).append(":{\"state\":").append(quote(d.state().toString()))
                    .append(",\"producer_id\":").append(d.producerId())
                    .append(",\"producer_epoch\":").append(d.producerEpoch())
                    .append(",\"timeout_ms\":").append(d.transactionTimeoutMs())
                    .append(",\"start_time_ms\":").append(d.transactionStartTimeMs().orElse(-1))
                    .append(",\"partitions\":[").append(String.join(",", tps)).append("]}");
                sep = ",";
            }
            out.append("},\"producers\":{");
            Map<TopicPartition, org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState> states =
                admin.describeProducers(partitions).all().get(WAIT_S, TimeUnit.SECONDS);
            sep = "";
            for (TopicPartition tp : partitions) {
                List<ProducerState> ps = new ArrayList<>(states.get(tp).activeProducers());
                ps.sort(Comparator.comparingLong(ProducerState::producerId));
                List<String> rows = new ArrayList<>();
                for (ProducerState p : ps) {
                    rows.add("[" + p.producerId() + "," + p.producerEpoch() + "," + p.lastSequence() + ","
                        + p.lastTimestamp() + "," + p.coordinatorEpoch().orElse(-1) + ","
                        + p.currentTransactionStartOffset().orElse(-1) + "]");
                }
                out.append(sep).append(quote(tp.topic() + ":" + tp.partition())).append(":[")
                    .append(String.join(",", rows)).append("]");
                sep = ",";
            }
            OUT.println(out.append("}}"));
            OUT.flush();
        }
    }

    private static String listing(Admin admin, ListTransactionsOptions options, Collection<String> ids)
            throws Exception {
        List<String> rows = new ArrayList<>();
        for (TransactionListing t : admin.listTransactions(options).all().get(WAIT_S, TimeUnit.SECONDS)) {
            if (ids.contains(t.transactionalId())) {
                rows.add("[" + quote(t.transactionalId()) + "," + t.producerId() + "," + quote(t.state().toString()) + "]");
            }
        }
        rows.sort(Comparator.naturalOrder());
        return "[" + String.join(",", rows) + "]";
    }

    private static String quoteOrNull(String s) {
        return s == null ? "null" : quote(s);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
