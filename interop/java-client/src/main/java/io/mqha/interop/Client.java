package io.mqha.interop;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.SessionCredentialsProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * Drives the official RocketMQ 5 Java client against one proxy endpoint, printing one JSON line per
 * event on stdout (the contract of the Python and Node scripts in tests/integration/rocketmq_clients):
 *
 * <pre>
 *   every mode prints {"started":true,"t"} once its client is built, then:
 *   produce  ENDPOINT TOPIC COUNT [SENDERS [BODY_BYTES]]   {"seq","ok","msgId","t","error"?} ... {"done","ok","failed"}
 *   simple   ENDPOINT TOPIC GROUP COUNT TIMEOUT_S          {"seq","msgId","t"} ... {"done","received","distinct"}
 *   push     ENDPOINT TOPIC GROUP COUNT TIMEOUT_S          the same, through a PushConsumer
 *   load     ENDPOINT TOPIC SECONDS SENDERS BODY_BYTES [STOP_FILE]
 *            {"seq","ok","t","ms","error"?} ... {"done","ok","failed","seconds"}
 *   drain    ENDPOINT TOPIC GROUP IDLE_S TIMEOUT_S          {"seq","t"} ... {"done","received","distinct"}
 * </pre>
 *
 * {@code load} (mqha bench rocketmq) keeps SENDERS threads sending one message at a time each, with
 * sequence numbers 0, 1, 2, ... across them, until SECONDS have passed or STOP_FILE exists; every
 * answer is a line with its time t (s) and its latency ms. {@code drain} receives (SimpleConsumer) and
 * acks until nothing came for IDLE_S seconds after the first message, or TIMEOUT_S passed: what a
 * no-loss check reads back when it cannot know how many of the failed sends were stored.
 *
 * Message i carries tag "TagN", key "k<i>", property seq=<i> and a body starting "seq-<i>" (padded to
 * BODY_BYTES). Credentials come from MQ_ACCESS_KEY and MQ_SECRET_KEY when set; MQ_SEND_INTERVAL_MS
 * (default 0) makes each sender pause that long after each send, a steady load for failover runs;
 * MQ_REQUEST_TIMEOUT_MS sets the client's request timeout (default 3000, RocketMQ's).
 */
public final class Client {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private Client() {
    }

    public static void main(String[] args) throws Exception {
        int code;
        switch (args[0]) {
            case "produce":
                code = produce(args[1], args[2], Integer.parseInt(args[3]),
                    args.length > 4 ? Integer.parseInt(args[4]) : 1, args.length > 5 ? Integer.parseInt(args[5]) : 0);
                break;
            case "load":
                code = load(args[1], args[2], Double.parseDouble(args[3]), Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]), args.length > 6 ? args[6] : null);
                break;
            case "drain":
                code = drain(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
                break;
            case "simple":
            case "push":
                code = consume(args[0], args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
                break;
            default:
                System.err.println("usage: produce|simple|push|load ...");
                code = 2;
        }
        System.out.flush();
        // The client's own threads may linger after shutdown; the result is already printed.
        Runtime.getRuntime().halt(code);
    }

    private static ClientConfiguration configuration(String endpoint) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(Boolean.parseBoolean(System.getenv().getOrDefault("MQ_SSL", "false")))
            .setRequestTimeout(Duration.ofMillis(Long.parseLong(System.getenv().getOrDefault("MQ_REQUEST_TIMEOUT_MS", "3000"))));
        String accessKey = System.getenv("MQ_ACCESS_KEY");
        if (accessKey != null && !accessKey.isEmpty()) {
            SessionCredentialsProvider credentials =
                new StaticSessionCredentialsProvider(accessKey, System.getenv().getOrDefault("MQ_SECRET_KEY", ""));
            builder.setCredentialProvider(credentials);
        }
        return builder.build();
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
    }

    private static final int START_ATTEMPTS =
        Integer.parseInt(System.getenv().getOrDefault("MQ_START_ATTEMPTS", "5"));

    /**
     * Builds a client (its route fetched within the request timeout), then prints {"started":true,"t"}.
     * A JVM starting on a busy machine can miss that first deadline while it loads gRPC: each failed
     * attempt prints {"startError"} and the build is tried again, up to MQ_START_ATTEMPTS (default 5) times.
     */
    private static <T> T start(Callable<T> build) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                T client = build.call();
                emit("{\"started\":true,\"t\":" + now() + "}");
                return client;
            } catch (Exception error) {
                if (attempt >= START_ATTEMPTS) {
                    throw error;
                }
                emit("{\"startError\":" + quote(String.valueOf(error)) + ",\"t\":" + now() + "}");
            }
        }
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    private static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static byte[] body(int seq, int size) {
        byte[] head = ("seq-" + seq).getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[Math.max(size, head.length)];
        java.util.Arrays.fill(out, (byte) 'x');
        System.arraycopy(head, 0, out, 0, head.length);
        if (out.length > head.length) {
            out[head.length] = ' ';
        }
        return out;
    }

    private static int produce(String endpoint, String topic, int count, int senders, int bodyBytes) throws Exception {
        Producer producer = start(() -> PROVIDER.newProducerBuilder()
            .setClientConfiguration(configuration(endpoint)).setTopics(topic).build());
        AtomicInteger next = new AtomicInteger();
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        long intervalMs = Long.parseLong(System.getenv().getOrDefault("MQ_SEND_INTERVAL_MS", "0"));
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < senders; i++) {
            Thread thread = new Thread(() -> {
                for (int seq = next.getAndIncrement(); seq < count; seq = next.getAndIncrement()) {
                    Message message = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagN")
                        .setKeys("k" + seq).addProperty("seq", Integer.toString(seq))
                        .setBody(body(seq, bodyBytes)).build();
                    try {
                        SendReceipt receipt = producer.send(message);
                        ok.incrementAndGet();
                        emit("{\"seq\":" + seq + ",\"ok\":true,\"msgId\":" + quote(receipt.getMessageId().toString())
                            + ",\"t\":" + now() + "}");
                    } catch (Exception error) {
                        failed.incrementAndGet();
                        emit("{\"seq\":" + seq + ",\"ok\":false,\"t\":" + now() + ",\"error\":"
                            + quote(String.valueOf(error)) + "}");
                    }
                    if (intervalMs > 0) {
                        try {
                            Thread.sleep(intervalMs);
                        } catch (InterruptedException stop) {
                            return;
                        }
                    }
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        producer.close();
        emit("{\"done\":true,\"ok\":" + ok.get() + ",\"failed\":" + failed.get() + "}");
        return failed.get() == 0 ? 0 : 1;
    }

    private static int load(String endpoint, String topic, double seconds, int senders, int bodyBytes,
        String stopFile) throws Exception {
        Producer producer = start(() -> PROVIDER.newProducerBuilder()
            .setClientConfiguration(configuration(endpoint)).setTopics(topic).build());
        AtomicInteger next = new AtomicInteger();
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        long started = System.nanoTime();
        long end = started + (long) (seconds * 1e9);
        java.io.File stop = stopFile == null ? null : new java.io.File(stopFile);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < senders; i++) {
            Thread thread = new Thread(() -> {
                while (System.nanoTime() < end && (stop == null || !stop.exists())) {
                    int seq = next.getAndIncrement();
                    Message message = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagN")
                        .setKeys("k" + seq).addProperty("seq", Integer.toString(seq))
                        .setBody(body(seq, bodyBytes)).build();
                    long sent = System.nanoTime();
                    try {
                        producer.send(message);
                        ok.incrementAndGet();
                        emit("{\"seq\":" + seq + ",\"ok\":true,\"t\":" + now() + ",\"ms\":"
                            + (System.nanoTime() - sent) / 1e6 + "}");
                    } catch (Exception error) {
                        failed.incrementAndGet();
                        emit("{\"seq\":" + seq + ",\"ok\":false,\"t\":" + now() + ",\"ms\":"
                            + (System.nanoTime() - sent) / 1e6 + ",\"error\":" + quote(String.valueOf(error)) + "}");
                    }
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        double elapsed = (System.nanoTime() - started) / 1e9;
        producer.close();
        emit("{\"done\":true,\"ok\":" + ok.get() + ",\"failed\":" + failed.get() + ",\"seconds\":" + elapsed + "}");
        return 0;
    }

    private static int drain(String endpoint, String topic, String group, int idleS, int timeoutS) throws Exception {
        SimpleConsumer consumer = start(() -> PROVIDER.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration(endpoint)).setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(
                Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .build());
        Set<Integer> seen = new HashSet<>();
        int received = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        long last = 0;
        while (System.nanoTime() < deadline && (last == 0 || System.nanoTime() - last < TimeUnit.SECONDS.toNanos(idleS))) {
            List<MessageView> views;
            try {
                views = consumer.receive(32, Duration.ofSeconds(30));
            } catch (Exception error) {
                emit("{\"error\":" + quote(String.valueOf(error)) + ",\"t\":" + now() + "}");
                Thread.sleep(200);
                continue;
            }
            List<java.util.concurrent.CompletableFuture<Void>> acks = new ArrayList<>();
            for (MessageView view : views) {
                int seq = seqOf(view);
                received++;
                seen.add(seq);
                last = System.nanoTime();
                emit("{\"seq\":" + seq + ",\"t\":" + now() + "}");
                acks.add(consumer.ackAsync(view));  // a batch's acks in parallel, not one RPC after another
            }
            for (java.util.concurrent.CompletableFuture<Void> ack : acks) {
                try {
                    ack.join();
                } catch (Exception error) {
                    emit("{\"error\":" + quote("ack: " + error) + ",\"t\":" + now() + "}");
                }
            }
        }
        consumer.close();
        emit("{\"done\":true,\"received\":" + received + ",\"distinct\":" + seen.size() + "}");
        return 0;
    }

    private static int seqOf(MessageView view) {
        String seq = view.getProperties().get("seq");
        if (seq != null) {
            return Integer.parseInt(seq);
        }
        ByteBuffer body = view.getBody();
        byte[] bytes = new byte[Math.min(body.remaining(), 32)];
        body.get(bytes);
        String text = new String(bytes, StandardCharsets.US_ASCII);
        return Integer.parseInt(text.substring(4).split(" ")[0]);
    }

    private static int consume(String kind, String endpoint, String topic, String group, int count, int timeoutS)
        throws Exception {
        Map<String, FilterExpression> subscription =
            Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG));
        Set<Integer> seen = Collections.synchronizedSet(new HashSet<>());
        AtomicInteger received = new AtomicInteger();
        CountDownLatch all = new CountDownLatch(1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        java.util.function.Consumer<MessageView> record = view -> {
            int seq = seqOf(view);
            received.incrementAndGet();
            seen.add(seq);
            emit("{\"seq\":" + seq + ",\"msgId\":" + quote(view.getMessageId().toString()) + ",\"t\":" + now() + "}");
            if (seen.size() >= count) {
                all.countDown();
            }
        };
        if (kind.equals("push")) {
            PushConsumer consumer = start(() -> PROVIDER.newPushConsumerBuilder()
                .setClientConfiguration(configuration(endpoint)).setConsumerGroup(group)
                .setSubscriptionExpressions(subscription)
                .setMessageListener(view -> {
                    record.accept(view);
                    return ConsumeResult.SUCCESS;
                }).build());
            all.await(timeoutS, TimeUnit.SECONDS);
            consumer.close();
        } else {
            SimpleConsumer consumer = start(() -> PROVIDER.newSimpleConsumerBuilder()
                .setClientConfiguration(configuration(endpoint)).setConsumerGroup(group)
                .setAwaitDuration(Duration.ofSeconds(5)).setSubscriptionExpressions(subscription).build());
            while (seen.size() < count && System.nanoTime() < deadline) {
                List<MessageView> views;
                try {
                    views = consumer.receive(16, Duration.ofSeconds(30));
                } catch (Exception error) {
                    emit("{\"error\":" + quote(String.valueOf(error)) + ",\"t\":" + now() + "}");
                    Thread.sleep(200);
                    continue;
                }
                for (MessageView view : views) {
                    record.accept(view);
                    consumer.ack(view);
                }
            }
            consumer.close();
        }
        emit("{\"done\":true,\"received\":" + received.get() + ",\"distinct\":" + seen.size() + "}");
        return seen.size() >= count ? 0 : 1;
    }
}
