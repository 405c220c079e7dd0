/*
 * The archive path's compiled-client limit (bench/compiled_limit.py runs it): what the
 * Java clients, with nothing of the product's guarantees, do on the same local stack.
 *
 *   to-s3    reads a topic with the Java consumer (read_committed, from the beginning to
 *            the end offsets it found at start) and writes each partition's records as
 *            Kafka record batches (v2, uncompressed, the records' own offsets and
 *            timestamps), concatenated into objects of about --object-bytes, with HTTP
 *            PUTs to the S3 endpoint (at most --in-flight at a time). The object keys go
 *            to --keys, one "partition key" line each, in offset order.
 *   from-s3  reads the objects of --keys back (GETs, --in-flight ahead) and produces
 *            every record with the Java producer (acks=all, idempotent) into --into-topic,
 *            partition for partition, key, value, timestamp and headers kept.
 *
 * Each prints one JSON line: records, bytes (keys, values and headers), objects, and
 * seconds, timed from the first fetch or GET to the last PUT or acknowledgement (set-up
 * excluded, as the baselines' barrier excludes theirs).
 *
 * Requests are signed with AWS Signature Version 4 (--access-key, --secret-key,
 * --region), the payload left unsigned (x-amz-content-sha256: UNSIGNED-PAYLOAD, as S3
 * allows): the local endpoint (moto) refuses an anonymous GET of the objects it stored.
 * Compiled with javac against the local broker's kafka-clients jar (bench/peers.py).
 */

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicReference;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class CompiledLimit {
    private static final int BATCH_BYTES = 1 << 20;

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            throw new IllegalArgumentException("usage: CompiledLimit to-s3|from-s3 --name value ...");
        }
        Map<String, String> options = options(Arrays.copyOfRange(args, 1, args.length));
        switch (args[0]) {
            case "to-s3" -> toS3(options);
            case "from-s3" -> fromS3(options);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> found = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name, found " + args[i]);
            }
            found.put(args[i].substring(2), args[i + 1]);
        }
        return found;
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    // ------------------------------------------------------------------ Kafka -> S3

    /** One partition's open object and open batch. */
    private static final class OpenObject {
        final int partition;
        final ByteBuffer buffer = ByteBuffer.allocate(BATCH_BYTES);
        final ByteArrayOutputStream object = new ByteArrayOutputStream();
        MemoryRecordsBuilder batch;
        long firstOffset = -1;
        long lastOffset = -1;

        OpenObject(int partition) {
            this.partition = partition;
        }

        /** Appends a record, into a new batch when the open one is full. */
        void append(ConsumerRecord<byte[], byte[]> record) {
            Header[] headers = record.headers().toArray();
            if (batch != null && !batch.hasRoomFor(record.timestamp(), record.key(), record.value(), headers)) {
                closeBatch();
            }
            if (batch == null) {
                buffer.clear();
                batch = MemoryRecords.builder(buffer, Compression.NONE, TimestampType.CREATE_TIME, record.offset());
            }
            if (firstOffset < 0) {
                firstOffset = record.offset();
            }
            lastOffset = record.offset();
            batch.appendWithOffset(record.offset(), record.timestamp(), record.key(), record.value(), headers);
        }

        void closeBatch() {
            if (batch == null) {
                return;
            }
            ByteBuffer built = batch.build().buffer();
            object.write(built.array(), built.arrayOffset() + built.position(), built.remaining());
            batch = null;
        }
    }

    private static void toS3(Map<String, String> options) throws Exception {
        String topic = required(options, "topic");
        int partitions = Integer.parseInt(required(options, "partitions"));
        long objectBytes = Long.parseLong(required(options, "object-bytes"));
        String prefix = required(options, "prefix");
        S3 s3 = new S3(required(options, "endpoint"), required(options, "bucket"),
                Integer.parseInt(options.getOrDefault("in-flight", "4")), Signer.from(options));
        Properties config = new Properties();
        config.put("bootstrap.servers", required(options, "bootstrap"));
        config.put("enable.auto.commit", "false");
        config.put("isolation.level", "read_committed");
        config.put("max.partition.fetch.bytes", Integer.toString(8 << 20));
        config.put("fetch.max.bytes", Integer.toString(64 << 20));
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        List<String> keys = new ArrayList<>();
        long records = 0;
        long bytes = 0;
        long started;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> assigned = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assigned.add(new TopicPartition(topic, p));
            }
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            Map<TopicPartition, Long> ends = consumer.endOffsets(assigned);
            Set<TopicPartition> reading = new HashSet<>();
            for (TopicPartition tp : assigned) {
                if (ends.get(tp) > 0) {
                    reading.add(tp);
                }
            }
            OpenObject[] open = new OpenObject[partitions];
            for (int p = 0; p < partitions; p++) {
                open[p] = new OpenObject(p);
            }
            started = System.nanoTime();
            while (!reading.isEmpty()) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    OpenObject object = open[record.partition()];
                    object.append(record);
                    records++;
                    bytes += size(record);
                    if (object.object.size() + object.batch.estimatedSizeInBytes() >= objectBytes) {
                        object.closeBatch();
                        open[record.partition()] = put(s3, prefix, topic, object, keys);
                    }
                }
                for (TopicPartition tp : new ArrayList<>(reading)) {
                    if (consumer.position(tp) >= ends.get(tp)) {
                        reading.remove(tp);
                        OpenObject object = open[tp.partition()];
                        object.closeBatch();
                        if (object.object.size() > 0) {
                            open[tp.partition()] = put(s3, prefix, topic, object, keys);
                        }
                    }
                }
            }
            s3.awaitAll();
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        Files.write(Path.of(required(options, "keys")), keys, StandardCharsets.UTF_8);
        System.out.printf("{\"records\": %d, \"bytes\": %d, \"objects\": %d, \"seconds\": %.6f}%n",
                records, bytes, keys.size(), seconds);
    }

    private static long size(ConsumerRecord<byte[], byte[]> record) {
        long size = (record.key() == null ? 0 : record.key().length) + (record.value() == null ? 0 : record.value().length);
        for (Header header : record.headers()) {
            size += header.key().length() + (header.value() == null ? 0 : header.value().length);
        }
        return size;
    }

    /** PUTs the object (asynchronously), notes its key; returns the partition's next object. */
    private static OpenObject put(S3 s3, String prefix, String topic, OpenObject object, List<String> keys)
            throws InterruptedException {
        String key = String.format("%s/%s/%d/%020d-%020d.batches", prefix, topic, object.partition,
                object.firstOffset, object.lastOffset);
        s3.put(key, object.object.toByteArray());
        keys.add(object.partition + " " + key);
        return new OpenObject(object.partition);
    }

    // ------------------------------------------------------------------ S3 -> Kafka

    private static void fromS3(Map<String, String> options) throws Exception {
        String topic = required(options, "into-topic");
        int ahead = Integer.parseInt(options.getOrDefault("in-flight", "4"));
        S3 s3 = new S3(required(options, "endpoint"), required(options, "bucket"), ahead, Signer.from(options));
        List<String[]> objects = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(required(options, "keys")), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                objects.add(line.split(" ", 2));
            }
        }
        Properties config = new Properties();
        config.put("bootstrap.servers", required(options, "bootstrap"));
        config.put("acks", "all");
        config.put("enable.idempotence", "true");
        config.put("linger.ms", "5");
        config.put("batch.size", Integer.toString(BATCH_BYTES));
        config.put("buffer.memory", Long.toString(128L << 20));
        config.put("compression.type", "none");
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        AtomicReference<Exception> failed = new AtomicReference<>();
        long records = 0;
        long bytes = 0;
        long started;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            producer.partitionsFor(topic); // metadata before the clock starts
            started = System.nanoTime();
            ArrayDeque<CompletableFuture<byte[]>> fetching = new ArrayDeque<>();
            int next = 0;
            for (String[] object : objects) {
                while (next < objects.size() && fetching.size() < ahead) {
                    fetching.add(s3.get(objects.get(next++)[1]));
                }
                int partition = Integer.parseInt(object[0]);
                byte[] body = fetching.remove().join();
                for (Record record : MemoryRecords.readableRecords(ByteBuffer.wrap(body)).records()) {
                    byte[] key = copy(record.key());
                    byte[] value = copy(record.value());
                    Header[] headers = record.headers();
                    producer.send(new ProducerRecord<>(topic, partition, record.timestamp(), key, value,
                            Arrays.asList(headers)), (metadata, error) -> {
                                if (error != null) {
                                    failed.compareAndSet(null, error);
                                }
                            });
                    records++;
                    bytes += (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
                    for (Header header : headers) {
                        bytes += header.key().length() + (header.value() == null ? 0 : header.value().length);
                    }
                }
                if (failed.get() != null) {
                    throw failed.get();
                }
            }
            producer.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.printf("{\"records\": %d, \"bytes\": %d, \"objects\": %d, \"seconds\": %.6f}%n",
                records, bytes, objects.size(), seconds);
    }

    private static byte[] copy(ByteBuffer buffer) {
        if (buffer == null) {
            return null;
        }
        byte[] out = new byte[buffer.remaining()];
        buffer.get(out);
        return out;
    }

    // ------------------------------------------------------------------ S3 over HTTP

    /** Path-style PUTs and GETs on one bucket, at most ``inFlight`` PUTs at a time. */
    private static final class S3 {
        private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        private final String bucketUrl;
        private final Signer signer;
        private final Semaphore slots;
        private final int inFlight;
        private final List<CompletableFuture<Void>> puts = new ArrayList<>();
        private final AtomicReference<String> failed = new AtomicReference<>();

        S3(String endpoint, String bucket, int inFlight, Signer signer) {
            this.bucketUrl = endpoint.replaceAll("/+$", "") + "/" + bucket + "/";
            this.signer = signer;
            this.inFlight = inFlight;
            this.slots = new Semaphore(inFlight);
        }

        void put(String key, byte[] body) throws InterruptedException {
            if (failed.get() != null) {
                throw new IllegalStateException(failed.get());
            }
            slots.acquire();
            URI uri = URI.create(bucketUrl + key);
            HttpRequest request = signer.sign(HttpRequest.newBuilder(uri), "PUT", uri)
                    .header("Content-Type", "application/octet-stream")
                    .PUT(HttpRequest.BodyPublishers.ofByteArray(body))
                    .build();
            puts.add(http.sendAsync(request, HttpResponse.BodyHandlers.ofString()).handle((response, error) -> {
                slots.release();
                if (error != null) {
                    failed.compareAndSet(null, "PUT " + key + ": " + error);
                } else if (response.statusCode() != 200) {
                    failed.compareAndSet(null, "PUT " + key + ": HTTP " + response.statusCode() + " " + response.body());
                }
                return null;
            }));
        }

        void awaitAll() throws InterruptedException {
            slots.acquire(inFlight);
            slots.release(inFlight);
            CompletableFuture.allOf(puts.toArray(new CompletableFuture[0])).join();
            if (failed.get() != null) {
                throw new IllegalStateException(failed.get());
            }
        }

        CompletableFuture<byte[]> get(String key) {
            URI uri = URI.create(bucketUrl + key);
            HttpRequest request = signer.sign(HttpRequest.newBuilder(uri), "GET", uri).GET().build();
            return http.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray()).thenApply(response -> {
                if (response.statusCode() != 200) {
                    throw new IllegalStateException("GET " + key + ": HTTP " + response.statusCode() + " "
                            + new String(response.body(), StandardCharsets.UTF_8));
                }
                return response.body();
            });
        }
    }

    /** AWS Signature Version 4 of a request without query or body hash (S3's UNSIGNED-PAYLOAD). */
    private static final class Signer {
        private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");
        private final String accessKey;
        private final String secretKey;
        private final String region;

        Signer(String accessKey, String secretKey, String region) {
            this.accessKey = accessKey;
            this.secretKey = secretKey;
            this.region = region;
        }

        static Signer from(Map<String, String> options) {
            return new Signer(required(options, "access-key"), required(options, "secret-key"),
                    required(options, "region"));
        }

        HttpRequest.Builder sign(HttpRequest.Builder request, String method, URI uri) {
            String stamp = ZonedDateTime.now(ZoneOffset.UTC).format(STAMP);
            String day = stamp.substring(0, 8);
            String host = uri.getPort() < 0 ? uri.getHost() : uri.getHost() + ":" + uri.getPort();
            String signed = "host;x-amz-content-sha256;x-amz-date";
            String canonical = method + "\n" + uri.getRawPath() + "\n\n"
                    + "host:" + host + "\nx-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:" + stamp + "\n\n"
                    + signed + "\nUNSIGNED-PAYLOAD";
            String scope = day + "/" + region + "/s3/aws4_request";
            String toSign = "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n" + hex(sha256(canonical));
            byte[] key = hmac(("AWS4" + secretKey).getBytes(StandardCharsets.UTF_8), day);
            key = hmac(hmac(hmac(key, region), "s3"), "aws4_request");
            String signature = hex(hmac(key, toSign));
            return request.header("x-amz-date", stamp)
                    .header("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
                    .header("Authorization", "AWS4-HMAC-SHA256 Credential=" + accessKey + "/" + scope
                            + ", SignedHeaders=" + signed + ", Signature=" + signature);
        }

        private static byte[] hmac(byte[] key, String data) {
            try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(new SecretKeySpec(key, "HmacSHA256"));
                return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
            } catch (java.security.GeneralSecurityException e) {
                throw new IllegalStateException(e);
            }
        }

        private static byte[] sha256(String data) {
            try {
                return MessageDigest.getInstance("SHA-256").digest(data.getBytes(StandardCharsets.UTF_8));
            } catch (java.security.GeneralSecurityException e) {
                throw new IllegalStateException(e);
            }
        }

        private static String hex(byte[] bytes) {
            StringBuilder out = new StringBuilder(bytes.length * 2);
            for (byte b : bytes) {
                out.append(String.format("%02x", b));
            }
            return out.toString();
        }
    }
}
