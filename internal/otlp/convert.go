package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// flatten turns an export request into Spans, all received at recv.
func flatten(req *coltracepb.ExportTraceServiceRequest, recv, start time.Time) []Span {
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	if n == 0 {
		return nil
	}
	t := roundT(recv.Sub(start).Seconds())
	ts := recv.UTC().Format(tsLayout)
	out := make([]Span, 0, n)
	for _, rs := range req.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		service, _ := res["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			scope := ss.GetScope().GetName()
			for _, sp := range ss.GetSpans() {
				s := Span{
					T:            t,
					TS:           ts,
					Name:         sp.GetName(),
					TraceID:      hex.EncodeToString(sp.GetTraceId()),
					SpanID:       hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Kind:         kind(sp.GetKind()),
					Start:        nanoTime(sp.GetStartTimeUnixNano()),
					End:          nanoTime(sp.GetEndTimeUnixNano()),
					Service:      service,
					Scope:        scope,
					Attributes:   attributes(sp.GetAttributes()),
					Resource:     res,
				}
				if st, en := sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano(); st != 0 && en > st {
					s.DurationMS = float64(en-st) / 1e6
				}
				switch sp.GetStatus().GetCode() {
				case tracepb.Status_STATUS_CODE_OK:
					s.Status = "ok"
				case tracepb.Status_STATUS_CODE_ERROR:
					s.Status = "error"
				}
				s.StatusMessage = sp.GetStatus().GetMessage()
				for _, e := range sp.GetEvents() {
					s.Events = append(s.Events, SpanEvent{
						Name:       e.GetName(),
						Time:       nanoTime(e.GetTimeUnixNano()),
						Attributes: attributes(e.GetAttributes()),
					})
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, SpanLink{
						TraceID:    hex.EncodeToString(l.GetTraceId()),
						SpanID:     hex.EncodeToString(l.GetSpanId()),
						Attributes: attributes(l.GetAttributes()),
					})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func kind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "unspecified"
}

// nanoTime formats nanoseconds since the Unix epoch; 0 is "".
func nanoTime(ns uint64) string {
	if ns == 0 {
		return ""
	}
	if ns > math.MaxInt64 {
		ns = math.MaxInt64
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

// attributes flattens key-values to a map; nil when there are none. A
// repeated key keeps its last value.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value flattens one AnyValue to what encoding/json writes as a string,
// number, bool, list or object. An empty value is nil (JSON null).
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		switch f := x.DoubleValue; {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "+Inf"
		case math.IsInf(f, -1):
			return "-Inf"
		default:
			return f
		}
	case *commonpb.AnyValue_ArrayValue:
		vs := x.ArrayValue.GetValues()
		l := make([]any, len(vs))
		for i, e := range vs {
			l[i] = value(e)
		}
		return l
	case *commonpb.AnyValue_KvlistValue:
		m := attributes(x.KvlistValue.GetValues())
		if m == nil {
			m = map[string]any{}
		}
		return m
	case *commonpb.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	}
	return nil
}

func roundT(t float64) float64 { return math.Round(t*1e3) / 1e3 }
