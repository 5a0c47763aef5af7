package otlp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// lockedBuffer is Options.Out for tests: the receiver writes from its
// handlers while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// spans parses every line written so far; each must be one JSON object.
func (l *lockedBuffer) spans(t testing.TB) []Span {
	t.Helper()
	var out []Span
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s Span
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, s)
	}
	return out
}

func start(t testing.TB, opt Options) *Receiver {
	t.Helper()
	r, err := Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Generous: a loaded machine drains slowly; a hang still fails.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return r
}

func byName(t *testing.T, spans []Span, name string) Span {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q in %d spans", name, len(spans))
	return Span{}
}

var t0 = time.Date(2026, 10, 29, 12, 40, 32, 123456789, time.UTC)

// sdkSpans sends two spans through exp with the OpenTelemetry SDK: a server
// span "parent" and its child "reconcile.sandboxes". It returns their span
// contexts.
func sdkSpans(t *testing.T, exp sdktrace.SpanExporter) (parent, child trace.SpanContext) {
	t.Helper()
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "openshell-gateway"),
			attribute.String("host.name", "lab-1"),
		)),
	)
	tr := tp.Tracer("openshell_server::compute")
	ctx, ps := tr.Start(ctx, "parent", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(t0))
	_, cs := tr.Start(ctx, "reconcile.sandboxes",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(t0.Add(time.Millisecond)),
		trace.WithAttributes(
			attribute.String("driver.name", "docker"),
			attribute.Int("backend_count", 8),
			attribute.Bool("dry_run", false),
			attribute.Float64("load", 0.75),
			attribute.StringSlice("phases", []string{"Starting", "Error"}),
			attribute.Int64Slice("ticks", []int64{1, 2, 3}),
		))
	cs.AddEvent("Sandbox phase changed",
		trace.WithTimestamp(t0.Add(2*time.Millisecond)),
		trace.WithAttributes(attribute.String("new_phase", "Error")))
	cs.SetStatus(otelcodes.Error, "ContainerExited")
	cs.End(trace.WithTimestamp(t0.Add(time.Millisecond + 1500250*time.Microsecond)))
	ps.SetStatus(otelcodes.Ok, "")
	ps.End(trace.WithTimestamp(t0.Add(2 * time.Second)))
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("SDK shutdown (export): %v", err)
	}
	return ps.SpanContext(), cs.SpanContext()
}

// checkSDKSpans checks what sdkSpans sent arrived intact.
func checkSDKSpans(t *testing.T, spans []Span, pc, cc trace.SpanContext) {
	t.Helper()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	p, c := byName(t, spans, "parent"), byName(t, spans, "reconcile.sandboxes")

	if c.TraceID != cc.TraceID().String() || c.SpanID != cc.SpanID().String() {
		t.Errorf("child ids = %s/%s, want %s/%s", c.TraceID, c.SpanID, cc.TraceID(), cc.SpanID())
	}
	if p.SpanID != pc.SpanID().String() || p.ParentSpanID != "" {
		t.Errorf("parent span id %q parent %q, want %s and none", p.SpanID, p.ParentSpanID, pc.SpanID())
	}
	if c.ParentSpanID != p.SpanID || c.TraceID != p.TraceID {
		t.Errorf("child not linked to parent: child %+v parent %+v", c, p)
	}
	if p.Kind != "server" || c.Kind != "internal" {
		t.Errorf("kinds = %q, %q", p.Kind, c.Kind)
	}
	wantStart := t0.Add(time.Millisecond).Format(time.RFC3339Nano)
	wantEnd := t0.Add(time.Millisecond + 1500250*time.Microsecond).Format(time.RFC3339Nano)
	if c.Start != wantStart || c.End != wantEnd || c.DurationMS != 1500.25 {
		t.Errorf("child start/end/duration = %s %s %v, want %s %s 1500.25", c.Start, c.End, c.DurationMS, wantStart, wantEnd)
	}
	if p.DurationMS != 2000 {
		t.Errorf("parent duration = %v", p.DurationMS)
	}
	if c.Status != "error" || c.StatusMessage != "ContainerExited" || p.Status != "ok" {
		t.Errorf("status = %q %q / %q", c.Status, c.StatusMessage, p.Status)
	}
	if c.Service != "openshell-gateway" || c.Resource["host.name"] != "lab-1" || c.Resource["service.name"] != "openshell-gateway" {
		t.Errorf("service %q resource %v", c.Service, c.Resource)
	}
	if c.Scope != "openshell_server::compute" {
		t.Errorf("scope = %q", c.Scope)
	}
	want := map[string]string{
		"driver.name":   "docker",
		"backend_count": "8",
		"dry_run":       "false",
		"load":          "0.75",
		"phases":        `["Starting","Error"]`,
		"ticks":         "[1,2,3]",
	}
	got := map[string]string{}
	for k, v := range c.Attributes {
		got[k] = ValueText(v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attributes = %v, want %v", got, want)
	}
	// JSON types survive: number, bool, list.
	if _, ok := c.Attributes["backend_count"].(float64); !ok {
		t.Errorf("backend_count is %T", c.Attributes["backend_count"])
	}
	if _, ok := c.Attributes["dry_run"].(bool); !ok {
		t.Errorf("dry_run is %T", c.Attributes["dry_run"])
	}
	if _, ok := c.Attributes["phases"].([]any); !ok {
		t.Errorf("phases is %T", c.Attributes["phases"])
	}
	if len(c.Events) != 1 || c.Events[0].Name != "Sandbox phase changed" ||
		c.Events[0].Time != t0.Add(2*time.Millisecond).Format(time.RFC3339Nano) ||
		c.Events[0].Attributes["new_phase"] != "Error" {
		t.Errorf("events = %+v", c.Events)
	}
	for _, s := range spans {
		ts, err := time.Parse(time.RFC3339Nano, s.TS)
		if err != nil || !strings.HasSuffix(s.TS, "Z") || len(s.TS) != len(tsLayout) {
			t.Errorf("ts %q: %v", s.TS, err)
		}
		if s.T < 0 || s.T > 60 || time.Since(ts) > time.Minute {
			t.Errorf("t = %v, ts = %v", s.T, ts)
		}
	}
}

func TestGRPCExporter(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			out := &lockedBuffer{}
			r := start(t, Options{GRPCAddr: "127.0.0.1:0", Out: out})
			opts := []otlptracegrpc.Option{otlptracegrpc.WithInsecure(), otlptracegrpc.WithEndpoint(r.GRPCAddr())}
			if gz {
				opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
			}
			exp, err := otlptracegrpc.New(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			pc, cc := sdkSpans(t, exp)
			checkSDKSpans(t, out.spans(t), pc, cc)
			if r.Spans() != 2 {
				t.Errorf("Spans() = %d", r.Spans())
			}
		})
	}
}

func TestHTTPExporter(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []otlptracehttp.Option
	}{
		{"protobuf", nil},
		{"protobuf+gzip", []otlptracehttp.Option{otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}},
		{"json", []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON)}},
		{"json+gzip", []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON), otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &lockedBuffer{}
			r := start(t, Options{HTTPAddr: "127.0.0.1:0", Out: out})
			opts := append([]otlptracehttp.Option{otlptracehttp.WithInsecure(), otlptracehttp.WithEndpoint(r.HTTPAddr())}, tc.opts...)
			exp, err := otlptracehttp.New(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			pc, cc := sdkSpans(t, exp)
			checkSDKSpans(t, out.spans(t), pc, cc)
			if r.Spans() != 2 {
				t.Errorf("Spans() = %d", r.Spans())
			}
		})
	}
}

// post sends body to the receiver's /v1/traces as a curl would.
func post(t testing.TB, r *Receiver, contentType, encoding string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr()+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

func gzipped(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestHTTPJSONBody(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "traces.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			out := &lockedBuffer{}
			r := start(t, Options{HTTPAddr: "127.0.0.1:0", Out: out, Start: time.Now().Add(-90 * time.Second)})
			b, enc := body, ""
			if gz {
				b, enc = gzipped(t, body), "gzip"
			}
			resp, data := post(t, r, "application/json; charset=utf-8", enc, b)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("response content type %q", ct)
			}
			var er coltracepb.ExportTraceServiceResponse
			if err := protojson.Unmarshal(data, &er); err != nil {
				t.Errorf("response %q is not an ExportTraceServiceResponse: %v", data, err)
			}

			spans := out.spans(t)
			if len(spans) != 2 {
				t.Fatalf("got %d spans: %s", len(spans), out.String())
			}
			rs := byName(t, spans, "reconcile.sandboxes")
			if rs.TraceID != "5b8efff798038103d269b633813fc60c" || rs.SpanID != "eee19b7ec3c1b174" || rs.ParentSpanID != "" {
				t.Errorf("ids = %s %s %q", rs.TraceID, rs.SpanID, rs.ParentSpanID)
			}
			if rs.Kind != "internal" || rs.Status != "error" || rs.StatusMessage != "ContainerExited" {
				t.Errorf("kind/status = %q %q %q", rs.Kind, rs.Status, rs.StatusMessage)
			}
			if rs.Start != "2026-10-29T12:40:32.1Z" || rs.End != "2026-10-29T12:40:32.274891Z" || rs.DurationMS != 174.891 {
				t.Errorf("start/end/duration = %s %s %v", rs.Start, rs.End, rs.DurationMS)
			}
			if rs.Service != "openshell-gateway" || rs.Resource["service.version"] != "0.9.0" || rs.Scope != "openshell_server::compute" {
				t.Errorf("service/resource/scope = %q %v %q", rs.Service, rs.Resource, rs.Scope)
			}
			for k, want := range map[string]string{"driver.name": "docker", "backend_count": "8", "dry_run": "false", "load": "0.75", "phases": `["Starting","Error"]`} {
				if got := ValueText(rs.Attributes[k]); got != want {
					t.Errorf("attribute %s = %q, want %q", k, got, want)
				}
			}
			if len(rs.Events) != 1 || rs.Events[0].Time != "2026-10-29T12:40:32.27484Z" || rs.Events[0].Attributes["old_phase"] != "Starting" {
				t.Errorf("events = %+v", rs.Events)
			}
			di := byName(t, spans, "docker.inspect")
			if di.ParentSpanID != rs.SpanID || di.TraceID != rs.TraceID || di.Kind != "client" || di.Status != "ok" || di.DurationMS != 10.5 {
				t.Errorf("docker.inspect = %+v", di)
			}
			if len(di.Links) != 1 || di.Links[0].TraceID != "0af7651916cd43dd8448eb211c80319c" || di.Links[0].SpanID != "b7ad6b7169203331" {
				t.Errorf("links = %+v", di.Links)
			}
			if rs.T < 90 || rs.T > 150 {
				t.Errorf("t = %v, want about 90 (seconds since Options.Start)", rs.T)
			}
		})
	}
}

// The line format itself: field names, ids as hex, omitted empties.
func TestLineFormat(t *testing.T) {
	out := &lockedBuffer{}
	var mu sync.Mutex
	var got []Span
	r := start(t, Options{HTTPAddr: "127.0.0.1:0", Out: out, Start: time.Now(), OnSpan: func(s Span) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}})
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{0xab}, 16), SpanId: bytes.Repeat([]byte{0x01}, 8),
			Name: "GET /a?b&c<d>", StartTimeUnixNano: 1, EndTimeUnixNano: 2,
			Attributes: []*commonpb.KeyValue{
				{Key: "nan", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: nan()}}},
				{Key: "big", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1 << 62}}},
				{Key: "raw", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte("hi")}}},
				{Key: "kv", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
					Values: []*commonpb.KeyValue{{Key: "x", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}}}}}}},
				{Key: "empty"},
			},
		}}}},
	}}}
	data, _ := proto.Marshal(req)
	if resp, body := post(t, r, "application/x-protobuf", "", data); resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	line := strings.TrimSpace(out.String())
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got := strings.Join(keys, ","); got != "attributes,duration_ms,end,kind,name,parent_span_id,span_id,start,t,trace_id,ts" {
		t.Errorf("keys = %s\n%s", got, line)
	}
	for _, want := range []string{
		`"name":"GET /a?b&c<d>"`, `"trace_id":"abababababababababababababababab"`, `"span_id":"0101010101010101"`,
		`"parent_span_id":""`, `"kind":"unspecified"`, `"start":"1970-01-01T00:00:00.000000001Z"`, `"duration_ms":0.000001`,
		`"nan":"NaN"`, `"big":4611686018427387904`, `"raw":"aGk="`, `"kv":{"x":1}`, `"empty":null`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %s:\n%s", want, line)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// OnSpan's Span is the line (read back through float64, the big int
	// would not be).
	if len(got) != 1 || string(got[0].JSON()) != line {
		t.Errorf("OnSpan got %d spans; Span.JSON() = %s\nline = %s", len(got), got[0].JSON(), line)
	}
}

func nan() float64 { var z float64; return z / z }

// The reconcile-sweep signal: the span the gateway exports at the end of
// each sweep, seen through OnSpan.
func TestReconcileSignal(t *testing.T) {
	sweep := Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"driver.name": "docker"}}
	other := Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"driver.name": "kubernetes"}}
	matched := make(chan Span, 10)
	var mu sync.Mutex
	var seen []string
	out := &lockedBuffer{}
	r := start(t, Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Out: out, OnSpan: func(s Span) {
		mu.Lock()
		seen = append(seen, s.Name)
		mu.Unlock()
		if other.Match(s) {
			t.Errorf("driver.name=kubernetes matched %+v", s)
		}
		if sweep.Match(s) {
			// Written before OnSpan sees it.
			if !strings.Contains(out.String(), `"span_id":"`+s.SpanID+`"`) {
				t.Errorf("OnSpan before the line was written")
			}
			matched <- s
		}
	}})
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithInsecure(), otlptracehttp.WithEndpoint(r.HTTPAddr()))
	if err != nil {
		t.Fatal(err)
	}
	_, cc := sdkSpans(t, exp)
	select {
	case s := <-matched:
		if s.SpanID != cc.SpanID().String() {
			t.Errorf("matched span %s, want %s", s.SpanID, cc.SpanID())
		}
	default:
		t.Fatal("reconcile.sandboxes with driver.name=docker was not matched")
	}
	if len(matched) != 0 {
		t.Errorf("%d more matches", len(matched))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"reconcile.sandboxes", "parent"}) {
		t.Errorf("OnSpan saw %v", seen)
	}
}

func TestMatcher(t *testing.T) {
	s := Span{
		Name:       "reconcile.sandboxes",
		Attributes: map[string]any{"driver.name": "docker", "backend_count": int64(8), "load": 2.0, "ok": true, "phases": []any{"a", "b"}, "tags": []any{"<a>&b"}},
		Resource:   map[string]any{"service.name": "openshell-gateway", "driver.name": "ignored"},
	}
	for _, tc := range []struct {
		m    Matcher
		want bool
	}{
		{Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"driver.name": "docker"}}, true},
		{Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"driver.name": "podman"}}, false},
		{Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"driver.kind": "docker"}}, false},
		{Matcher{Name: "reconcile", Attributes: map[string]string{"driver.name": "docker"}}, false},
		{Matcher{NameRegexp: regexp.MustCompile(`^reconcile\.`)}, true},
		{Matcher{Name: "nope", NameRegexp: regexp.MustCompile(`sandboxes$`)}, true},
		{Matcher{NameRegexp: regexp.MustCompile(`^sandboxes`)}, false},
		{Matcher{}, true},
		{Matcher{Attributes: map[string]string{"backend_count": "8", "load": "2", "ok": "true", "phases": `["a","b"]`}}, true},
		{Matcher{Attributes: map[string]string{"backend_count": "8.0"}}, false},
		{Matcher{Attributes: map[string]string{"tags": `["<a>&b"]`}}, true},
		{Matcher{Attributes: map[string]string{"service.name": "openshell-gateway"}}, true},
		{Matcher{Attributes: map[string]string{"service.name": "other"}}, false},
	} {
		if got := tc.m.Match(s); got != tc.want {
			t.Errorf("%+v.Match = %v, want %v", tc.m, got, tc.want)
		}
	}
	// The same span read back from its line matches the same way.
	var back Span
	if err := json.Unmarshal(s.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	m := Matcher{Name: "reconcile.sandboxes", Attributes: map[string]string{"backend_count": "8", "load": "2", "phases": `["a","b"]`}}
	if !m.Match(back) {
		t.Errorf("read-back span %+v not matched", back)
	}
}

func TestBadRequests(t *testing.T) {
	out := &lockedBuffer{}
	r := start(t, Options{HTTPAddr: "127.0.0.1:0", Out: out})
	good, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{})

	for _, tc := range []struct {
		name, ct, ce string
		body         []byte
		status       int
		statusBody   bool // a google.rpc.Status in the request's encoding
	}{
		{"text/plain", "text/plain", "", good, 415, false},
		{"no content type", "", "", good, 415, false},
		{"protobuf garbage", "application/x-protobuf", "", []byte{0xff, 0xff, 0xff}, 400, true},
		{"json garbage", "application/json", "", []byte(`{"resourceSpans": [`), 400, true},
		{"json wrong type", "application/json", "", []byte(`{"resourceSpans": 3}`), 400, true},
		{"json trailing", "application/json", "", []byte(`{} {}`), 400, true},
		{"bad gzip", "application/x-protobuf", "gzip", []byte("not gzip"), 400, true},
		{"unknown encoding", "application/x-protobuf", "br", good, 400, true},
		{"empty protobuf", "application/x-protobuf", "", nil, 200, false},
		{"empty json object", "application/json", "", []byte(`{}`), 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := post(t, r, tc.ct, tc.ce, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			if tc.statusBody {
				var st spb.Status
				var err error
				if tc.ct == "application/json" {
					err = protojson.Unmarshal(data, &st)
				} else {
					err = proto.Unmarshal(data, &st)
				}
				if err != nil || st.Message == "" || resp.Header.Get("Content-Type") != tc.ct {
					t.Errorf("body %q (%s): not a google.rpc.Status: %v", data, resp.Header.Get("Content-Type"), err)
				}
			}
		})
	}
	// Wrong method and path.
	resp, err := http.Get("http://" + r.HTTPAddr() + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	resp, err = http.Post("http://"+r.HTTPAddr()+"/v1/metrics", "application/x-protobuf", bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/v1/metrics: %d", resp.StatusCode)
	}
	if r.Spans() != 0 || out.String() != "" {
		t.Errorf("bad requests recorded spans: %d %q", r.Spans(), out.String())
	}
}

func oneSpan(name string) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: name,
		}}}},
	}}}
}

// Stop waits for an export in flight, which still gets written and
// answered; afterwards the receiver accepts nothing.
func TestStopDrains(t *testing.T) {
	for _, transport := range []string{"http", "grpc"} {
		t.Run(transport, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			out := &lockedBuffer{}
			r, err := Start(Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Out: out, OnSpan: func(Span) {
				close(entered)
				<-release
			}})
			if err != nil {
				t.Fatal(err)
			}
			exported := make(chan error, 1)
			switch transport {
			case "http":
				data, _ := proto.Marshal(oneSpan("in-flight"))
				go func() {
					resp, err := http.Post("http://"+r.HTTPAddr()+"/v1/traces", "application/x-protobuf", bytes.NewReader(data))
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					exported <- err
				}()
			case "grpc":
				conn, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				go func() {
					_, err := coltracepb.NewTraceServiceClient(conn).Export(context.Background(), oneSpan("in-flight"))
					exported <- err
				}()
			}
			<-entered
			stopped := make(chan error, 1)
			go func() { stopped <- r.Stop(context.Background()) }()
			select {
			case err := <-stopped:
				t.Fatalf("Stop returned (%v) with an export in flight", err)
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
			if err := <-stopped; err != nil {
				t.Errorf("Stop: %v", err)
			}
			if err := <-exported; err != nil {
				t.Errorf("in-flight export: %v", err)
			}
			if r.Spans() != 1 || !strings.Contains(out.String(), `"name":"in-flight"`) {
				t.Errorf("in-flight span not recorded: %d %q", r.Spans(), out.String())
			}
			for _, addr := range []string{r.HTTPAddr(), r.GRPCAddr()} {
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					c.Close()
					t.Errorf("%s still accepts connections after Stop", addr)
				}
			}
			if err := r.Stop(context.Background()); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

// A client that never finishes its request cannot hold Stop past its
// context; nothing of it is recorded.
func TestStopForced(t *testing.T) {
	out := &lockedBuffer{}
	r, err := Start(Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", r.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\n0123456789")
	time.Sleep(100 * time.Millisecond) // let the handler start reading
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = r.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want deadline exceeded", err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if r.Spans() != 0 || out.String() != "" {
		t.Errorf("recorded %d spans", r.Spans())
	}
}

func TestEnv(t *testing.T) {
	both := start(t, Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	g, h := both.GRPCAddr(), both.HTTPAddr()
	if g == "" || h == "" || g == h {
		t.Fatalf("addresses %q %q", g, h)
	}
	want := []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + h + "/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + h,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"CHAOS_OTLP_GRPC=" + g,
		"CHAOS_OTLP_HTTP=" + h,
	}
	if got := both.Env(); !slices.Equal(got, want) {
		t.Errorf("Env() = %q\nwant    %q", got, want)
	}

	grpcOnly := start(t, Options{GRPCAddr: "127.0.0.1:0"})
	g = grpcOnly.GRPCAddr()
	want = []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + g,
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + g,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"CHAOS_OTLP_GRPC=" + g,
	}
	if got := grpcOnly.Env(); !slices.Equal(got, want) {
		t.Errorf("gRPC only: Env() = %q\nwant    %q", got, want)
	}
	if grpcOnly.HTTPAddr() != "" {
		t.Errorf("HTTPAddr() = %q with HTTP disabled", grpcOnly.HTTPAddr())
	}
}

func TestListen(t *testing.T) {
	if _, err := Start(Options{}); err == nil {
		t.Error("Start with no address succeeded")
	}
	r := start(t, Options{HTTPAddr: ":0", GRPCAddr: ":0"})
	for _, a := range []string{r.HTTPAddr(), r.GRPCAddr()} {
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Errorf("%q: a missing host must mean loopback", a)
		}
	}
	// A busy port fails Start and leaves nothing listening.
	if _, err := Start(Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: r.HTTPAddr()}); err == nil {
		t.Error("Start on a busy port succeeded")
	}
}

// Concurrent exports: every span becomes exactly one whole line.
func TestConcurrentExports(t *testing.T) {
	const clients, requests, perRequest = 4, 25, 40
	out := &lockedBuffer{}
	r := start(t, Options{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Out: out})
	conn, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for q := range requests {
				req := benchRequest(perRequest, fmt.Sprintf("c%d-q%d", c, q))
				if c%2 == 0 {
					if _, err := coltracepb.NewTraceServiceClient(conn).Export(context.Background(), req); err != nil {
						t.Error(err)
					}
					continue
				}
				data, _ := proto.Marshal(req)
				if resp, body := post(t, r, "application/x-protobuf", "", data); resp.StatusCode != 200 {
					t.Errorf("status %d %s", resp.StatusCode, body)
				}
			}
		})
	}
	wg.Wait()
	spans := out.spans(t)
	if len(spans) != clients*requests*perRequest || r.Spans() != len(spans) {
		t.Fatalf("%d lines, Spans() = %d, want %d", len(spans), r.Spans(), clients*requests*perRequest)
	}
	seen := map[string]bool{}
	for _, s := range spans {
		k := s.Name + "/" + s.SpanID
		if seen[k] {
			t.Fatalf("span %s twice", k)
		}
		seen[k] = true
	}
}

// benchRequest is one export of n spans of a typical service.
func benchRequest(n int, prefix string) *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	num := func(k string, v int64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
	}
	now := uint64(time.Now().UnixNano())
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "openshell_server::compute"}}
	for i := range n {
		id := []byte{0, 0, 0, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		ss.Spans = append(ss.Spans, &tracepb.Span{
			TraceId: bytes.Repeat([]byte{7}, 16), SpanId: id, ParentSpanId: bytes.Repeat([]byte{9}, 8),
			Name: prefix, Kind: tracepb.Span_SPAN_KIND_INTERNAL,
			StartTimeUnixNano: now, EndTimeUnixNano: now + 1234567,
			Attributes: []*commonpb.KeyValue{
				str("driver.name", "docker"), num("backend_count", 8), str("sandbox_id", "fa1e623d-aaa3-4167-8ce4-234328ff13d3"),
				str("sandbox_name", "cdb22-2133161399"), str("old_phase", "Starting"), str("new_phase", "Error"),
			},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
		})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "openshell-gateway"), str("service.version", "0.9.0")}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
}

// BenchmarkReceiveHTTP measures the per-span cost of receiving an OTLP/HTTP
// protobuf export of 100 spans and writing the lines (to nothing, and to a
// file as the engine does), including the loopback HTTP round trip.
func BenchmarkReceiveHTTP(b *testing.B) {
	const perRequest = 100
	data, err := proto.Marshal(benchRequest(perRequest, "reconcile.sandboxes"))
	if err != nil {
		b.Fatal(err)
	}
	for _, sink := range []string{"discard", "file"} {
		b.Run(sink, func(b *testing.B) {
			var w io.Writer = io.Discard
			if sink == "file" {
				f, err := os.Create(filepath.Join(b.TempDir(), "otel.jsonl"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				w = f
			}
			r := start(b, Options{HTTPAddr: "127.0.0.1:0", Out: w})
			url := "http://" + r.HTTPAddr() + "/v1/traces"
			client := &http.Client{}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				n++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*perRequest), "ns/span")
			if r.Spans() != n*perRequest {
				b.Fatalf("Spans() = %d, want %d", r.Spans(), n*perRequest)
			}
		})
	}
}
