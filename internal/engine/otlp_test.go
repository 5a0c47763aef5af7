package engine

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSpansDriveASignalWait sends spans with the OpenTelemetry SDK's own
// exporter to the run's built-in receiver, as a gateway would, and waits in
// the flow for the one that ends a reconcile sweep.
func TestSpansDriveASignalWait(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(fmt.Sprintf("127.0.0.1:%d", port)), otlptracehttp.WithInsecure())
		if err != nil {
			return
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(context.Background())
		tr := tp.Tracer("gateway")
		for i := 0; ctx.Err() == nil; i++ {
			_, other := tr.Start(ctx, "reconcile.sandboxes")
			other.SetAttributes(attribute.String("driver.name", "kubernetes"))
			other.End()
			// A second of spans that match nothing first: the instance
			// must have written its endpoint before the kill, even on a
			// loaded machine.
			if i >= 10 {
				_, s := tr.Start(ctx, "reconcile.sandboxes")
				s.SetAttributes(attribute.String("driver.name", "docker"), attribute.Int("backend_count", 8))
				s.End()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	out, events := runWith(t, fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: traced
backend: process
otlp: {http: "127.0.0.1:%d", grpc: "off"}
signals:
  reconcile-sweep:
    watch: otel
    span: reconcile.sandboxes
    attributes: {driver.name: docker}
`, port), `apiVersion: chaos/v1alpha1
id: sweep
workloads:
  - {name: w, run: 'echo "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" > endpoint; sleep 2'}
operations:
  - {name: k, uses: kill, target: {workload: w}}
flow:
  parallel: [w, {serial: [{wait: {signal: reconcile-sweep, delay: 50ms, timeout: 10s}}, k]}]
`)
	m := find(events, "signal.matched")
	if len(m) != 1 || !strings.Contains(m[0].String("line"), `"driver.name":"docker"`) {
		t.Fatalf("signal.matched %v; errors %v", m, out.Verdict.Errors)
	}
	spans, _ := readFile(out.Dir.Path("system", "watch", "otel.jsonl"))
	if !strings.Contains(spans, `"name":"reconcile.sandboxes"`) || !strings.Contains(spans, `"kubernetes"`) {
		t.Fatalf("otel.jsonl lacks the spans:\n%.500s", spans)
	}
	endpoint, _ := readFile(out.Dir.Path("workloads", "w", "instances", "w-0", "output", "endpoint"))
	if want := fmt.Sprintf("http://127.0.0.1:%d/v1/traces", port); strings.TrimSpace(endpoint) != want {
		t.Fatalf("instances see OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=%q, want %q", endpoint, want)
	}
}
