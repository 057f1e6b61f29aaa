// Command goclient drives the official RocketMQ 5 Go client against one proxy endpoint, printing one
// JSON line per event on stdout (the contract of the Python, Node and Java drivers):
//
//	goclient produce ENDPOINT TOPIC COUNT [SENDERS [BODY_BYTES]]
//	goclient simple  ENDPOINT TOPIC GROUP COUNT TIMEOUT_S
//
// Every mode prints {"started":true,"t"} once its client started. Message i carries tag "TagN",
// key "k<i>", property seq=<i> and a body starting "seq-<i>".
// Credentials come from MQ_ACCESS_KEY and MQ_SECRET_KEY when set; MQ_SEND_INTERVAL_MS (default 0)
// makes each sender pause that long after each send, a steady load for failover runs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

var out sync.Mutex

func emit(fields map[string]any) {
	line, _ := json.Marshal(fields)
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(line))
}

func now() float64 { return float64(time.Now().UnixMilli()) / 1000 }

func config(endpoint, group string) *rmq.Config {
	return &rmq.Config{
		Endpoint:      endpoint,
		ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{
			AccessKey:    os.Getenv("MQ_ACCESS_KEY"),
			AccessSecret: os.Getenv("MQ_SECRET_KEY"),
		},
	}
}

func body(seq, size int) []byte {
	head := fmt.Sprintf("seq-%d", seq)
	if size <= len(head) {
		return []byte(head)
	}
	return []byte(head + " " + strings.Repeat("x", size-len(head)-1))
}

func produce(endpoint, topic string, count, senders, bodyBytes int) int {
	producer, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics(topic))
	if err == nil {
		err = producer.Start()
	}
	if err != nil {
		emit(map[string]any{"done": true, "ok": 0, "failed": -1, "error": err.Error()})
		return 1
	}
	emit(map[string]any{"started": true, "t": now()})
	var next, ok, failed int64
	interval := time.Duration(envInt("MQ_SEND_INTERVAL_MS")) * time.Millisecond
	var wg sync.WaitGroup
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int(atomic.AddInt64(&next, 1) - 1); seq < count; seq = int(atomic.AddInt64(&next, 1) - 1) {
				message := &rmq.Message{Topic: topic, Body: body(seq, bodyBytes)}
				message.SetTag("TagN")
				message.SetKeys(fmt.Sprintf("k%d", seq))
				message.AddProperty("seq", strconv.Itoa(seq))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				receipts, err := producer.Send(ctx, message)
				cancel()
				if err != nil || len(receipts) == 0 {
					atomic.AddInt64(&failed, 1)
					emit(map[string]any{"seq": seq, "ok": false, "t": now(), "error": fmt.Sprint(err)})
					time.Sleep(interval)
					continue
				}
				atomic.AddInt64(&ok, 1)
				emit(map[string]any{"seq": seq, "ok": true, "msgId": receipts[0].MessageID, "t": now()})
				time.Sleep(interval)
			}
		}()
	}
	wg.Wait()
	_ = producer.GracefulStop()
	emit(map[string]any{"done": true, "ok": ok, "failed": failed})
	if failed > 0 {
		return 1
	}
	return 0
}

func seqOf(view *rmq.MessageView) int {
	if seq, found := view.GetProperties()["seq"]; found {
		if n, err := strconv.Atoi(seq); err == nil {
			return n
		}
	}
	text := strings.TrimPrefix(strings.SplitN(string(view.GetBody()), " ", 2)[0], "seq-")
	n, _ := strconv.Atoi(text)
	return n
}

func simple(endpoint, topic, group string, count, timeoutS int) int {
	consumer, err := rmq.NewSimpleConsumer(config(endpoint, group),
		rmq.WithAwaitDuration(5*time.Second),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
	)
	if err == nil {
		err = consumer.Start()
	}
	if err != nil {
		emit(map[string]any{"done": true, "received": 0, "distinct": 0, "error": err.Error()})
		return 1
	}
	emit(map[string]any{"started": true, "t": now()})
	seen := map[int]bool{}
	received := 0
	deadline := time.Now().Add(time.Duration(timeoutS) * time.Second)
	for len(seen) < count && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		views, err := consumer.Receive(ctx, 16, 30*time.Second)
		cancel()
		if err != nil {
			if !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") {
				emit(map[string]any{"error": err.Error(), "t": now()})
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, view := range views {
			seq := seqOf(view)
			received++
			seen[seq] = true
			emit(map[string]any{"seq": seq, "msgId": view.GetMessageId(), "t": now()})
			_ = consumer.Ack(context.Background(), view)
		}
	}
	_ = consumer.GracefulStop()
	emit(map[string]any{"done": true, "received": received, "distinct": len(seen)})
	if len(seen) < count {
		return 1
	}
	return 0
}

func atoi(text string) int {
	n, err := strconv.Atoi(text)
	if err != nil {
		fmt.Fprintf(os.Stderr, "not a number: %q\n", text)
		os.Exit(2)
	}
	return n
}

func envInt(name string) int {
	if text := os.Getenv(name); text != "" {
		return atoi(text)
	}
	return 0
}

func main() {
	os.Setenv("mq.consoleAppender.enabled", "false")
	if os.Getenv("rocketmq.client.logRoot") == "" {
		// The client's default is $user.home/logs/rocketmqlogs, which Go reads as /logs/rocketmqlogs.
		home, _ := os.UserHomeDir()
		os.Setenv("rocketmq.client.logRoot", home+"/logs/rocketmqlogs")
	}
	rmq.ResetLogger()
	args := os.Args[1:]
	code := 2
	switch {
	case len(args) >= 4 && args[0] == "produce":
		senders, bodyBytes := 1, 0
		if len(args) > 4 {
			senders = atoi(args[4])
		}
		if len(args) > 5 {
			bodyBytes = atoi(args[5])
		}
		code = produce(args[1], args[2], atoi(args[3]), senders, bodyBytes)
	case len(args) == 6 && args[0] == "simple":
		code = simple(args[1], args[2], args[3], atoi(args[4]), atoi(args[5]))
	default:
		fmt.Fprintln(os.Stderr, "usage: goclient produce ENDPOINT TOPIC COUNT [SENDERS [BODY_BYTES]] | simple ENDPOINT TOPIC GROUP COUNT TIMEOUT_S")
	}
	os.Exit(code)
}
