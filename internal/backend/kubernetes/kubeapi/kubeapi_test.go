package kubeapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// seen is one request as the API server received it.
type seen struct {
	method, path string
	query        url.Values
	header       http.Header
	body         runtime.Object // decoded with the package's own scheme
}

// TestRequests runs the real client against a server that speaks the API:
// each call must reach the path, query and body the API server expects, and
// its answer must decode into the typed result.
func TestRequests(t *testing.T) {
	var got seen
	var status int
	var answer string
	decode := serializer.NewCodecFactory(theCodecs().scheme).UniversalDeserializer()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{method: r.Method, path: r.URL.Path, query: r.URL.Query(), header: r.Header}
		if data, _ := io.ReadAll(r.Body); len(data) > 0 {
			obj, _, err := decode.Decode(data, nil, nil)
			if err != nil {
				t.Errorf("%s %s: undecodable body (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			}
			got.body = obj
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL, UserAgent: "chaos-test", QPS: 100, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	uid := types.UID("0f6b5a2c")
	grace := int64(2)
	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"0f6b5a2c","labels":{"chaos.run":"r1"}}}`
	const scale = `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"d","namespace":"ns"},"spec":{"replicas":3},"status":{"replicas":3}}`
	const ok = `{"apiVersion":"v1","kind":"Status","status":"Success"}`

	for _, tc := range []struct {
		name         string
		call         func() (any, error)
		status       int
		answer       string
		method, path string
		query        url.Values // that must be among the request's
		body         runtime.Object
		want         any // the call's result
		wantErr      func(error) bool
	}{
		{
			name:   "get a pod",
			call:   func() (any, error) { return c.Pods("ns").Get(ctx, "p", metav1.GetOptions{}) },
			answer: pod, method: "GET", path: "/api/v1/namespaces/ns/pods/p",
			// The decoder drops apiVersion and kind, as client-go's does.
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "0f6b5a2c", Labels: map[string]string{"chaos.run": "r1"}}},
		},
		{
			name:   "a pod that is not there",
			call:   func() (any, error) { return c.Pods("ns").Get(ctx, "gone", metav1.GetOptions{}) },
			status: http.StatusNotFound,
			answer: `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"details":{"name":"gone","kind":"pods"}}`,
			method: "GET", path: "/api/v1/namespaces/ns/pods/gone", wantErr: apierrors.IsNotFound,
		},
		{
			name: "list pods by label",
			call: func() (any, error) {
				l, err := c.Pods("ns").List(ctx, metav1.ListOptions{LabelSelector: "chaos.run=r1,chaos.instance=w-0"})
				return len(l.Items), err
			},
			answer: `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[` + pod + `,` + pod + `]}`,
			method: "GET", path: "/api/v1/namespaces/ns/pods",
			query: url.Values{"labelSelector": {"chaos.run=r1,chaos.instance=w-0"}}, want: 2,
		},
		{
			name: "an informer's list, with its tweak",
			call: func() (any, error) {
				lw := ListWatch(c.Pods("ns"), func(o *metav1.ListOptions) { o.LabelSelector = "chaos.run=r1" })
				l, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
				return len(l.(*corev1.PodList).Items), err
			},
			answer: `{"apiVersion":"v1","kind":"PodList","items":[` + pod + `]}`,
			method: "GET", path: "/api/v1/namespaces/ns/pods",
			query: url.Values{"labelSelector": {"chaos.run=r1"}, "resourceVersion": {"0"}}, want: 1,
		},
		{
			name: "list every namespace's nodes",
			call: func() (any, error) {
				l, err := c.Nodes().List(ctx, metav1.ListOptions{})
				return len(l.Items), err
			},
			answer: `{"apiVersion":"v1","kind":"NodeList","items":[{"metadata":{"name":"n"}}]}`,
			method: "GET", path: "/api/v1/nodes", want: 1,
		},
		{
			name: "delete a pod bound to its UID",
			call: func() (any, error) {
				return nil, c.Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
			},
			answer: ok, method: "DELETE", path: "/api/v1/namespaces/ns/pods/p",
			body: &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
				GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}},
		},
		{
			name:   "a deployment's scale",
			call:   func() (any, error) { return c.Deployments("ns").GetScale(ctx, "d", metav1.GetOptions{}) },
			answer: scale, method: "GET", path: "/apis/apps/v1/namespaces/ns/deployments/d/scale",
			want: &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}, Status: autoscalingv1.ScaleStatus{Replicas: 3}},
		},
		{
			name: "a statefulset scaled to zero",
			call: func() (any, error) {
				s, err := c.StatefulSets("ns").UpdateScale(ctx, "s", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "9"}}, metav1.UpdateOptions{})
				return s.Spec.Replicas, err
			},
			answer: scale, method: "PUT", path: "/apis/apps/v1/namespaces/ns/statefulsets/s/scale",
			body: &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
				ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "9"}},
			want: int32(3),
		},
		{
			name: "a campaign's Jobs deleted by label",
			call: func() (any, error) {
				bg := metav1.DeletePropagationBackground
				return nil, c.Jobs("ns").DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{LabelSelector: "chaos.campaign=c"})
			},
			answer: ok, method: "DELETE", path: "/apis/batch/v1/namespaces/ns/jobs",
			query: url.Values{"labelSelector": {"chaos.campaign=c"}},
			body: &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "DeleteOptions"},
				PropagationPolicy: new(metav1.DeletePropagationBackground)},
		},
		{
			name: "may the harness create pods",
			call: func() (any, error) {
				r, err := c.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
				return r.Status.Allowed, err
			},
			answer: `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","status":{"allowed":true}}`,
			method: "POST", path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
			body: &authorizationv1.SelfSubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "create", Resource: "pods"}}},
			want: true,
		},
		{
			name: "a container's last lines",
			call: func() (any, error) {
				n := int64(20)
				raw, err := c.Pods("ns").GetLogs("p", &corev1.PodLogOptions{Container: "chaos", TailLines: &n}).Do(ctx).Raw()
				return string(raw), err
			},
			answer: "line 1\nline 2\n", method: "GET", path: "/api/v1/namespaces/ns/pods/p/log",
			query: url.Values{"container": {"chaos"}, "tailLines": {"20"}}, want: "line 1\nline 2\n",
		},
		{
			name: "the server's version",
			call: func() (any, error) {
				v, err := c.ServerVersion(ctx)
				return v.GitVersion, err
			},
			answer: `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`, method: "GET", path: "/version", want: "v1.37.2",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, status, answer = seen{}, tc.status, tc.answer
			if status == 0 {
				status = http.StatusOK
			}
			res, err := tc.call()
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Errorf("error %v is not the one expected", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if !reflect.DeepEqual(res, tc.want) && (tc.want != nil || res != nil) {
				t.Errorf("got %#v, want %#v", res, tc.want)
			}
			if got.method != tc.method || got.path != tc.path {
				t.Errorf("request %s %s, want %s %s", got.method, got.path, tc.method, tc.path)
			}
			for k, v := range tc.query {
				if !reflect.DeepEqual(got.query[k], v) {
					t.Errorf("query %s=%q, want %q (all: %v)", k, got.query[k], v, got.query)
				}
			}
			if !reflect.DeepEqual(got.body, tc.body) {
				t.Errorf("body %#v, want %#v", got.body, tc.body)
			}
			if ua := got.header.Get("User-Agent"); ua != "chaos-test" {
				t.Errorf("User-Agent %q, want the config's", ua)
			}
			// Objects go as protobuf, as client-go's typed clients send them.
			if got.body != nil && got.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
				t.Errorf("body sent as %q", got.header.Get("Content-Type"))
			}
		})
	}
}

// A QPS with no burst is refused, as client-go refuses it.
func TestNewForConfigNeedsBurst(t *testing.T) {
	if _, err := NewForConfig(&rest.Config{Host: "http://127.0.0.1:1", QPS: 5}); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("QPS 5, burst 0: %v", err)
	}
}
