import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java {@code Admin} client's view of one share group (KafkaOracle's {@code share-admin}
 * subcommand), for comparing aiokafka_lite's share-group admin calls with it.
 *
 * <p>{@code share-admin --bootstrap B --group G}: one JSON line,
 * {@code {"listed": [{"group_id", "state"}...], "group_id", "state", "group_epoch",
 * "assignment_epoch", "members": [{"member_id", "member_epoch", "client_id", "host", "rack",
 * "assignment": [[topic, partition]...]}...], "offsets": [{"topic", "partition",
 * "start_offset", "leader_epoch", "lag"}...]}}: {@code listed} is every share group
 * {@code listGroups} reports (share type only), then {@code describeShareGroups} and
 * {@code listShareGroupOffsets} of G. Members are sorted by id, partitions by topic and number;
 * an absent leader epoch or lag is -1.
 */
final class ShareAdminOracle {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private ShareAdminOracle() {
    }

    static void run(String[] args) throws Exception {
        Map<String, String> options = ShareOracle.options(args, "bootstrap", "group");
        String group = options.get("group");
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, "kafka-oracle-share-admin");
        try (Admin admin = Admin.create(config)) {
            StringBuilder out = new StringBuilder("{\"listed\":[");
            List<GroupListing> listed = new ArrayList<>(admin.listGroups(
                new ListGroupsOptions().withTypes(Set.of(GroupType.SHARE))).all().get(30, TimeUnit.SECONDS));
            listed.sort(Comparator.comparing(GroupListing::groupId));
            String sep = "";
            for (GroupListing g : listed) {
                out.append(sep).append("{\"group_id\":").append(quote(g.groupId()))
                    .append(",\"state\":").append(quote(g.groupState().map(Object::toString).orElse("")))
                    .append('}');
                sep = ",";
            }
            ShareGroupDescription desc = admin.describeShareGroups(List.of(group))
                .describedGroups().get(group).get(30, TimeUnit.SECONDS);
            out.append("],\"group_id\":").append(quote(desc.groupId()))
                .append(",\"state\":").append(quote(desc.groupState().toString()))
                .append(",\"group_epoch\":").append(desc.groupEpoch())
                .append(",\"assignment_epoch\":").append(desc.targetAssignmentEpoch())
                .append(",\"members\":[");
            List<ShareMemberDescription> members = new ArrayList<>(desc.members());
            members.sort(Comparator.comparing(ShareMemberDescription::consumerId));
            sep = "";
            for (ShareMemberDescription mb : members) {
                out.append(sep).append("{\"member_id\":").append(quote(mb.consumerId()))
                    .append(",\"member_epoch\":").append(mb.memberEpoch())
                    .append(",\"client_id\":").append(quote(mb.clientId()))
                    .append(",\"host\":").append(quote(mb.host()))
                    .append(",\"rack\":").append(mb.rackId().map(ShareAdminOracle::quote).orElse("null"))
                    .append(",\"assignment\":[");
                String psep = "";
                for (TopicPartition tp : sorted(mb.assignment().topicPartitions())) {
                    out.append(psep).append('[').append(quote(tp.topic())).append(',')
                        .append(tp.partition()).append(']');
                    psep = ",";
                }
                out.append("]}");
                sep = ",";
            }
            out.append("],\"offsets\":[");
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group)
                .get(30, TimeUnit.SECONDS);
            sep = "";
            for (TopicPartition tp : sorted(offsets.keySet())) {
                SharePartitionOffsetInfo info = offsets.get(tp);
                if (info == null) {  // a partition the broker answered with an error for
                    continue;
                }
                out.append(sep).append("{\"topic\":").append(quote(tp.topic()))
                    .append(",\"partition\":").append(tp.partition())
                    .append(",\"start_offset\":").append(info.startOffset())
                    .append(",\"leader_epoch\":").append(info.leaderEpoch().orElse(-1))
                    .append(",\"lag\":").append(info.lag().orElse(-1L))
                    .append('}');
                sep = ",";
            }
            out.append("]}");
            OUT.println(out);
            OUT.flush();
        }
    }

    private static List<TopicPartition> sorted(java.util.Collection<TopicPartition> tps) {
        List<TopicPartition> list = new ArrayList<>(tps);
        list.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        return list;
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
