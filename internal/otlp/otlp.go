// Package otlp is the harness's built-in OpenTelemetry trace receiver, so
// that users need no OpenTelemetry Collector. It accepts OTLP trace exports
// over gRPC (opentelemetry.proto.collector.trace.v1.TraceService/Export) and
// over HTTP (POST /v1/traces, protobuf or JSON, optionally gzip-compressed),
// flattens every span to one JSON line (a Span) and writes it to Options.Out,
// which the engine points at system/watch/otel.jsonl. Options.OnSpan sees
// every span after it is written, which is where signals such as
// reconcile-sweep are matched (see Matcher).
package otlp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gRPC clients may compress exports with gzip
)

// tsLayout is the run directory's timestamp format (UTC, microseconds).
const tsLayout = "2006-01-02T15:04:05.000000Z"

// MaxRequestBytes bounds one export request, after decompression, on both
// transports.
const MaxRequestBytes = 32 << 20

// Span is one flattened span: one JSON line in system/watch/otel.jsonl.
// Its maps are shared with other spans of the same export; treat them as
// read-only.
type Span struct {
	// T is the time the harness received the span, in seconds since
	// Options.Start, rounded to milliseconds.
	T float64 `json:"t"`
	// TS is the time the harness received the span, UTC RFC 3339 with
	// microseconds (the run directory's format).
	TS string `json:"ts"`

	Name         string `json:"name"`
	TraceID      string `json:"trace_id"`       // hex
	SpanID       string `json:"span_id"`        // hex
	ParentSpanID string `json:"parent_span_id"` // hex; "" for a root span
	// Kind is server, client, internal, producer, consumer, or unspecified.
	Kind string `json:"kind"`
	// Start and End are the span's own start and end, UTC RFC 3339 with
	// nanoseconds ("" when the exporter sent none).
	Start      string  `json:"start"`
	End        string  `json:"end"`
	DurationMS float64 `json:"duration_ms"`
	// Status is "ok" or "error", omitted when unset.
	Status        string `json:"status,omitempty"`
	StatusMessage string `json:"status_message,omitempty"`
	// Service is the resource's service.name.
	Service string `json:"service,omitempty"`
	// Scope is the instrumentation scope's name.
	Scope string `json:"scope,omitempty"`
	// Attributes are the span's attributes. Values are string, int64,
	// float64 (NaN and infinities as the strings "NaN", "+Inf", "-Inf"),
	// bool, []any, map[string]any (key-value lists), or a base64 string
	// (bytes).
	Attributes map[string]any `json:"attributes,omitempty"`
	// Resource holds the resource attributes, service.name included.
	Resource map[string]any `json:"resource,omitempty"`
	Events   []SpanEvent    `json:"events,omitempty"`
	Links    []SpanLink     `json:"links,omitempty"`
}

// SpanEvent is one event of a span.
type SpanEvent struct {
	Name       string         `json:"name"`
	Time       string         `json:"time"` // UTC RFC 3339 with nanoseconds
	Attributes map[string]any `json:"attributes,omitempty"`
}

// SpanLink is one link from a span to another span.
type SpanLink struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// JSON returns the span as written to Options.Out, without the newline.
func (s Span) JSON() []byte {
	var b bytes.Buffer
	s.encode(&b)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// encode appends the span's line, newline included, to b.
func (s Span) encode(b *bytes.Buffer) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		// Unreachable: every value flatten produces is encodable.
		fmt.Fprintf(b, "{\"t\":%v,\"ts\":%q,\"name\":%q,\"error\":%q}\n", s.T, s.TS, s.Name, err.Error())
	}
}

// Options configures a Receiver.
type Options struct {
	// GRPCAddr is the gRPC listen address, e.g. "127.0.0.1:0" or
	// "127.0.0.1:4317"; "" disables gRPC. A missing host (":4317") means
	// loopback, not every interface; ask for "0.0.0.0:4317" explicitly.
	GRPCAddr string
	// HTTPAddr is the HTTP listen address, with the same rules.
	HTTPAddr string
	// Out receives one JSON line per span. Writes are serialised: one
	// Write per export request, whole lines only. Nil discards.
	Out io.Writer
	// Start is the time T counts from; zero means when Start is called.
	Start time.Time
	// OnSpan, if set, is called for every span after it is written, one
	// call at a time and in the order of the lines in Out. It must not
	// block for long (it holds up every export) and must not call Stop.
	OnSpan func(Span)
}

// Receiver is a running OTLP trace receiver.
type Receiver struct {
	opt   Options
	start time.Time

	grpcLis, httpLis net.Listener
	grpcSrv          *grpc.Server
	httpSrv          *http.Server
	served           sync.WaitGroup

	mu     sync.Mutex // serialises writes to Out and calls to OnSpan
	closed bool       // set by Stop: later spans are dropped
	err    error      // first write error

	n atomic.Int64

	stopOnce sync.Once
	stopErr  error
}

// Start listens on the enabled addresses and serves until Stop.
func Start(opt Options) (*Receiver, error) {
	if opt.GRPCAddr == "" && opt.HTTPAddr == "" {
		return nil, errors.New("otlp: neither a gRPC nor an HTTP address to listen on")
	}
	r := &Receiver{opt: opt, start: opt.Start}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	if opt.GRPCAddr != "" {
		lis, err := listen(opt.GRPCAddr)
		if err != nil {
			return nil, fmt.Errorf("otlp: gRPC: %w", err)
		}
		r.grpcLis = lis
	}
	if opt.HTTPAddr != "" {
		lis, err := listen(opt.HTTPAddr)
		if err != nil {
			if r.grpcLis != nil {
				r.grpcLis.Close()
			}
			return nil, fmt.Errorf("otlp: HTTP: %w", err)
		}
		r.httpLis = lis
	}
	if r.grpcLis != nil {
		r.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(MaxRequestBytes))
		coltracepb.RegisterTraceServiceServer(r.grpcSrv, traceService{r: r})
		r.served.Go(func() { _ = r.grpcSrv.Serve(r.grpcLis) })
	}
	if r.httpLis != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/v1/traces", r.serveTraces)
		r.httpSrv = &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
		}
		r.served.Go(func() { _ = r.httpSrv.Serve(r.httpLis) })
	}
	return r, nil
}

// listen binds addr, on loopback when addr names no host.
func listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

// GRPCAddr returns the bound gRPC address (host:port), or "" when disabled.
func (r *Receiver) GRPCAddr() string {
	if r.grpcLis == nil {
		return ""
	}
	return r.grpcLis.Addr().String()
}

// HTTPAddr returns the bound HTTP address (host:port), or "" when disabled.
func (r *Receiver) HTTPAddr() string {
	if r.httpLis == nil {
		return ""
	}
	return r.httpLis.Addr().String()
}

// Env returns environment variables that point an OpenTelemetry SDK at the
// receiver, as NAME=value. With HTTP enabled, the standard variables name the
// HTTP endpoint with protocol http/protobuf; with only gRPC, they name the
// gRPC endpoint with protocol grpc. CHAOS_OTLP_GRPC and CHAOS_OTLP_HTTP give
// each enabled address (host:port).
func (r *Receiver) Env() []string {
	var env []string
	switch g, h := r.GRPCAddr(), r.HTTPAddr(); {
	case h != "":
		env = append(env,
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+h+"/v1/traces",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+h,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		)
	case g != "":
		env = append(env,
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+g,
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+g,
			"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		)
	}
	if g := r.GRPCAddr(); g != "" {
		env = append(env, "CHAOS_OTLP_GRPC="+g)
	}
	if h := r.HTTPAddr(); h != "" {
		env = append(env, "CHAOS_OTLP_HTTP="+h)
	}
	return env
}

// Spans returns the number of spans received and recorded so far.
func (r *Receiver) Spans() int { return int(r.n.Load()) }

// Err returns the first error writing to Options.Out, if any. A failed
// write does not fail the export (a retry would not help); the span still
// counts and still reaches OnSpan.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Stop shuts the receiver down gracefully: it stops accepting connections
// and requests, and waits for in-flight exports to be written. If ctx ends
// first, it closes every connection, drops whatever spans are still in
// flight and returns ctx's error. Either way nothing is written to Out and
// OnSpan is not called once Stop has returned. Later calls return the first
// call's result.
func (r *Receiver) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() { r.stopErr = r.stop(ctx) })
	return r.stopErr
}

func (r *Receiver) stop(ctx context.Context) error {
	var wg sync.WaitGroup
	var httpErr error
	if r.httpSrv != nil {
		wg.Go(func() { httpErr = r.httpSrv.Shutdown(ctx) })
	}
	if r.grpcSrv != nil {
		grpcDone := make(chan struct{})
		go func() {
			r.grpcSrv.GracefulStop()
			close(grpcDone)
		}()
		wg.Go(func() {
			select {
			case <-grpcDone:
			case <-ctx.Done():
				r.grpcSrv.Stop()
				<-grpcDone
			}
		})
	}
	wg.Wait()
	err := httpErr
	if err != nil {
		r.httpSrv.Close()
	}
	if err == nil && ctx.Err() != nil {
		// gRPC was cut short; HTTP may have finished just in time.
		err = context.Cause(ctx)
	}
	// Handlers cut off by a forced stop may still be running: from now on
	// they record nothing.
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.served.Wait()
	return err
}

// export records every span of one export request.
func (r *Receiver) export(req *coltracepb.ExportTraceServiceRequest) {
	recv := time.Now()
	spans := flatten(req, recv, r.start)
	if len(spans) == 0 {
		return
	}
	var b bytes.Buffer
	for i := range spans {
		spans[i].encode(&b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.n.Add(int64(len(spans)))
	if r.opt.Out != nil {
		if _, err := r.opt.Out.Write(b.Bytes()); err != nil && r.err == nil {
			r.err = err
		}
	}
	if r.opt.OnSpan != nil {
		for _, s := range spans {
			r.opt.OnSpan(s)
		}
	}
}

// traceService is the gRPC TraceService.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.export(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
