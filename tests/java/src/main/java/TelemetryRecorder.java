import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

/**
 * A broker-side KIP-714 metrics plugin for the tests: Apache Kafka accepts PushTelemetry only when
 * a metrics reporter that is a client telemetry exporter is configured ({@code metric.reporters}).
 * Each push a client makes is appended to the file named by the broker config
 * {@code telemetry.recorder.file}, one line: client id, client instance id, terminating, content
 * type, push interval, and the OTLP MetricsData bytes in base64. The tests decode the bytes.
 */
public class TelemetryRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
    private String file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object f = configs.get("telemetry.recorder.file");
        file = f == null ? null : f.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private synchronized void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        if (file == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String line = String.join("\t",
            context.authorizableRequestContext().clientId(),
            payload.clientInstanceId().toString(),
            Boolean.toString(payload.isTerminating()),
            String.valueOf(payload.contentType()),
            Integer.toString(context.pushIntervalMs()),
            Base64.getEncoder().encodeToString(bytes)) + "\n";
        try (FileOutputStream out = new FileOutputStream(file, true)) {
            out.write(line.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
