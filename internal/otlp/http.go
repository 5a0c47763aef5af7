package otlp

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	ctProtobuf = "application/x-protobuf"
	ctJSON     = "application/json"
)

// serveTraces is POST /v1/traces (OTLP/HTTP). The answer uses the request's
// encoding: an ExportTraceServiceResponse on success, a google.rpc.Status
// on a bad request.
func (r *Receiver) serveTraces(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "OTLP traces are POSTed", http.StatusMethodNotAllowed)
		return
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if mt != ctProtobuf && mt != ctJSON {
		http.Error(w, fmt.Sprintf("unsupported content type %q: use %s or %s", req.Header.Get("Content-Type"), ctProtobuf, ctJSON), http.StatusUnsupportedMediaType)
		return
	}
	body := io.Reader(http.MaxBytesReader(w, req.Body, MaxRequestBytes))
	switch ce := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); ce {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			writeStatus(w, mt, http.StatusBadRequest, codes.InvalidArgument, "bad gzip body: "+err.Error())
			return
		}
		defer zr.Close()
		body = zr
	default:
		writeStatus(w, mt, http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf("unsupported content encoding %q: use gzip or none", ce))
		return
	}
	data, err := io.ReadAll(io.LimitReader(body, MaxRequestBytes+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || len(data) > MaxRequestBytes:
		writeStatus(w, mt, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, fmt.Sprintf("request larger than %d bytes", MaxRequestBytes))
		return
	case err != nil:
		writeStatus(w, mt, http.StatusBadRequest, codes.InvalidArgument, "reading body: "+err.Error())
		return
	}
	msg := &coltracepb.ExportTraceServiceRequest{}
	if mt == ctJSON {
		err = unmarshalJSON(data, msg)
	} else {
		err = proto.Unmarshal(data, msg)
	}
	if err != nil {
		writeStatus(w, mt, http.StatusBadRequest, codes.InvalidArgument, "bad ExportTraceServiceRequest: "+err.Error())
		return
	}
	r.export(msg)
	writeMessage(w, mt, http.StatusOK, &coltracepb.ExportTraceServiceResponse{})
}

func writeStatus(w http.ResponseWriter, mt string, code int, c codes.Code, msg string) {
	writeMessage(w, mt, code, &spb.Status{Code: int32(c), Message: msg})
}

func writeMessage(w http.ResponseWriter, mt string, code int, m proto.Message) {
	var data []byte
	var err error
	if mt == ctJSON {
		data, err = protojson.Marshal(m)
	} else {
		data, err = proto.Marshal(m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(code)
	w.Write(data)
}

// unmarshalJSON decodes OTLP/JSON. It differs from protojson in one way:
// trace and span ids are hex, not base64. Unknown fields are ignored, as
// the OTLP specification asks of receivers.
func unmarshalJSON(data []byte, m proto.Message) error {
	data, err := hexIDsToBase64(data)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
}

// hexIDsToBase64 rewrites the hex ids of spans and their links as base64,
// which protojson expects for bytes fields. Ids that are not hex of the
// right length are left for protojson to judge.
func hexIDsToBase64(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	changed := false
	fix := func(o map[string]any, size int, keys ...string) {
		for _, k := range keys {
			s, ok := o[k].(string)
			if !ok || len(s) != 2*size {
				continue
			}
			b, err := hex.DecodeString(s)
			if err != nil {
				continue
			}
			o[k] = base64.StdEncoding.EncodeToString(b)
			changed = true
		}
	}
	for _, rs := range list(root, "resourceSpans", "resource_spans") {
		for _, ss := range list(rs, "scopeSpans", "scope_spans") {
			for _, sp := range list(ss, "spans") {
				o, ok := sp.(map[string]any)
				if !ok {
					continue
				}
				fix(o, 16, "traceId", "trace_id")
				fix(o, 8, "spanId", "span_id", "parentSpanId", "parent_span_id")
				for _, l := range list(o, "links") {
					if lo, ok := l.(map[string]any); ok {
						fix(lo, 16, "traceId", "trace_id")
						fix(lo, 8, "spanId", "span_id")
					}
				}
			}
		}
	}
	if !changed {
		return data, nil
	}
	return json.Marshal(root)
}

// list returns the array under the first of keys present in object v.
func list(v any, keys ...string) []any {
	o, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range keys {
		if l, ok := o[k].([]any); ok {
			return l
		}
	}
	return nil
}
