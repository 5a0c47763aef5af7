// Package kubeapi is a minimal typed Kubernetes client over client-go's
// rest package. Its scheme has only the API groups the harness uses and is
// made with the first client: client-go's clientset registers some fifty
// groups at every start of the binary, whatever the command.
package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is every call the harness makes to a cluster. The methods
// have the signatures of client-go's typed clients, so that a fake
// clientset can stand in for it in tests.
type Interface interface {
	Pods(namespace string) PodInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Events(namespace string) EventInterface
	Namespaces() NamespaceInterface
	Nodes() NodeInterface
	Deployments(namespace string) ScalableInterface[*appsv1.Deployment, *appsv1.DeploymentList]
	ReplicaSets(namespace string) ScalableInterface[*appsv1.ReplicaSet, *appsv1.ReplicaSetList]
	StatefulSets(namespace string) ScalableInterface[*appsv1.StatefulSet, *appsv1.StatefulSetList]
	Jobs(namespace string) JobInterface
	SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface
	// Leases are a run's lease with the node agents (coordination.k8s.io).
	Leases(namespace string) LeaseInterface
	// CoreRESTClient is core/v1's REST client, for the requests no typed
	// call makes (a pod's exec).
	CoreRESTClient() rest.Interface
	// ServerVersion asks the API server its version (GET /version).
	ServerVersion(ctx context.Context) (*version.Info, error)
}

// The calls of the typed clients, one each.
type (
	Getter[T any] interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	}
	Lister[L any] interface {
		List(ctx context.Context, opts metav1.ListOptions) (L, error)
	}
	Watcher interface {
		Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	}
	Creator[T any] interface {
		Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	}
	Deleter interface {
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	}
	// ListWatcher is what an informer needs.
	ListWatcher[L any] interface {
		Lister[L]
		Watcher
	}
)

// The resources, with what the harness does to each.
type (
	PodInterface interface {
		Getter[*corev1.Pod]
		ListWatcher[*corev1.PodList]
		Creator[*corev1.Pod]
		Deleter
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
		GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
	}
	ConfigMapInterface interface {
		Lister[*corev1.ConfigMapList]
		Creator[*corev1.ConfigMap]
		Deleter
	}
	EventInterface     = ListWatcher[*corev1.EventList]
	NamespaceInterface interface {
		Getter[*corev1.Namespace]
		Lister[*corev1.NamespaceList]
		Creator[*corev1.Namespace]
		Deleter
	}
	NodeInterface = Lister[*corev1.NodeList]
	// ScalableInterface is a controller with a scale subresource.
	ScalableInterface[T, L any] interface {
		Getter[T]
		Lister[L]
		Deleter
		Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
		GetScale(ctx context.Context, name string, opts metav1.GetOptions) (*autoscalingv1.Scale, error)
		UpdateScale(ctx context.Context, name string, scale *autoscalingv1.Scale, opts metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	}
	JobInterface interface {
		Lister[*batchv1.JobList]
		Creator[*batchv1.Job]
		Deleter
		DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	}
	SelfSubjectAccessReviewInterface = Creator[*authorizationv1.SelfSubjectAccessReview]
	LeaseInterface                   interface {
		Getter[*coordinationv1.Lease]
		Lister[*coordinationv1.LeaseList]
		Creator[*coordinationv1.Lease]
		Deleter
		Update(ctx context.Context, obj *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	}
)

// ListWatch lists and watches through c for an informer, with tweak (when
// not nil) applied to the options of every request.
func ListWatch[L runtime.Object](c ListWatcher[L], tweak func(*metav1.ListOptions)) *cache.ListWatch {
	opts := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, opts(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, opts(o))
		},
	}
}

// codecs are the scheme's serializers, made on first use: a command that
// never talks to a cluster does not pay for them.
type codecs struct {
	scheme     *runtime.Scheme
	serializer runtime.NegotiatedSerializer
	params     runtime.ParameterCodec
}

var theCodecs = sync.OnceValue(func() *codecs {
	s := runtime.NewScheme()
	// As client-go's scheme: the unversioned meta types (Status, the
	// options) once for the legacy group, then each group's own.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	groups := runtime.SchemeBuilder{corev1.AddToScheme, appsv1.AddToScheme, autoscalingv1.AddToScheme,
		authorizationv1.AddToScheme, batchv1.AddToScheme, coordinationv1.AddToScheme}
	utilruntime.Must(groups.AddToScheme(s))
	return &codecs{
		scheme:     s,
		serializer: rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion(),
		params:     runtime.NewParameterCodec(s),
	}
})

// ParameterCodec turns options (PodExecOptions, ListOptions) into a
// request's query parameters.
func ParameterCodec() runtime.ParameterCodec { return theCodecs().params }

// Client is Interface over the API server's REST API.
type Client struct {
	core, apps, batch, authorization, coordination *rest.RESTClient
}

var _ Interface = (*Client)(nil)

// NewForConfig makes a client as client-go's kubernetes.NewForConfig
// does: every group's REST client shares one HTTP client (so one pool of
// connections) and one rate limiter of cfg.QPS and cfg.Burst.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	hc, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, err
	}
	cd := theCodecs()
	group := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		g := c
		g.GroupVersion, g.APIPath, g.NegotiatedSerializer = &gv, "/apis", cd.serializer
		if gv.Group == "" {
			g.APIPath = "/api"
		}
		return rest.RESTClientForConfigAndClient(&g, hc)
	}
	var out Client
	for _, x := range []struct {
		into **rest.RESTClient
		gv   schema.GroupVersion
	}{
		{&out.core, corev1.SchemeGroupVersion},
		{&out.apps, appsv1.SchemeGroupVersion},
		{&out.batch, batchv1.SchemeGroupVersion},
		{&out.authorization, authorizationv1.SchemeGroupVersion},
		{&out.coordination, coordinationv1.SchemeGroupVersion},
	} {
		if *x.into, err = group(x.gv); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// resource is the typed calls on one resource, built as client-go's
// generic typed client (gentype) builds them, asking for protobuf as the
// clients of the built-in types do. gentype itself is not used: it links
// client-go's testing package, whose fifty-odd packages (OpenAPI,
// structured-merge-diff) cost every start of the binary ~0.7 ms of init.
type resource[T, L runtime.Object] struct {
	c       rest.Interface
	name    string
	ns      string // "" for a cluster-scoped resource
	newObj  func() T
	newList func() L
}

// object is an API object of struct type T.
type object[T any] interface {
	*T
	runtime.Object
}

// newResource is the resource called name, T and L being the structs of
// its object and its list.
func newResource[T, L any, PT object[T], PL object[L]](c rest.Interface, name, ns string) *resource[PT, PL] {
	return &resource[PT, PL]{c: c, name: name, ns: ns, newObj: func() PT { return new(T) }, newList: func() PL { return new(L) }}
}

// on starts a request to the resource; protobuf goes first, as the body
// is encoded when it is set.
func (r *resource[T, L]) on(req *rest.Request) *rest.Request {
	return req.UseProtobufAsDefault().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name)
}

// timeout is the server's timeout for a list or watch, also the request's.
func timeout(o metav1.ListOptions) time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}

func (r *resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.on(r.c.Get()).Name(name).VersionedParams(&opts, ParameterCodec()).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.on(r.c.Get()).VersionedParams(&opts, ParameterCodec()).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.on(r.c.Get()).VersionedParams(&opts, ParameterCodec()).Timeout(timeout(opts)).Watch(ctx)
}

func (r *resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.on(r.c.Post()).VersionedParams(&opts, ParameterCodec()).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObj()
	err := r.on(r.c.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, ParameterCodec()).Body(data).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return r.newObj(), err
	}
	out := r.newObj()
	err = r.on(r.c.Put()).Name(m.GetName()).VersionedParams(&opts, ParameterCodec()).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.on(r.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (r *resource[T, L]) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return r.on(r.c.Delete()).VersionedParams(&listOpts, ParameterCodec()).Timeout(timeout(listOpts)).Body(&opts).Do(ctx).Error()
}

// scalable is a controller's resource, with its scale subresource.
type scalable[T, L runtime.Object] struct{ *resource[T, L] }

func newScalable[T, L any, PT object[T], PL object[L]](c rest.Interface, name, ns string) scalable[PT, PL] {
	return scalable[PT, PL]{newResource[T, L, PT, PL](c, name, ns)}
}

func (s scalable[T, L]) GetScale(ctx context.Context, name string, opts metav1.GetOptions) (*autoscalingv1.Scale, error) {
	out := &autoscalingv1.Scale{}
	err := s.on(s.c.Get()).Name(name).SubResource("scale").VersionedParams(&opts, ParameterCodec()).Do(ctx).Into(out)
	return out, err
}

func (s scalable[T, L]) UpdateScale(ctx context.Context, name string, scale *autoscalingv1.Scale, opts metav1.UpdateOptions) (*autoscalingv1.Scale, error) {
	out := &autoscalingv1.Scale{}
	err := s.on(s.c.Put()).Name(name).SubResource("scale").VersionedParams(&opts, ParameterCodec()).Body(scale).Do(ctx).Into(out)
	return out, err
}

// pods is the pods resource, with their logs.
type pods struct {
	*resource[*corev1.Pod, *corev1.PodList]
}

// GetLogs is a request for a container's log, to Do or Stream; it asks for
// no protobuf: a log is text.
func (p pods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.c.Get().Namespace(p.ns).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, ParameterCodec())
}

func (c *Client) Pods(ns string) PodInterface {
	return pods{newResource[corev1.Pod, corev1.PodList](c.core, "pods", ns)}
}

func (c *Client) ConfigMaps(ns string) ConfigMapInterface {
	return newResource[corev1.ConfigMap, corev1.ConfigMapList](c.core, "configmaps", ns)
}

func (c *Client) Events(ns string) EventInterface {
	return newResource[corev1.Event, corev1.EventList](c.core, "events", ns)
}

func (c *Client) Namespaces() NamespaceInterface {
	return newResource[corev1.Namespace, corev1.NamespaceList](c.core, "namespaces", "")
}

func (c *Client) Nodes() NodeInterface {
	return newResource[corev1.Node, corev1.NodeList](c.core, "nodes", "")
}

func (c *Client) Deployments(ns string) ScalableInterface[*appsv1.Deployment, *appsv1.DeploymentList] {
	return newScalable[appsv1.Deployment, appsv1.DeploymentList](c.apps, "deployments", ns)
}

func (c *Client) ReplicaSets(ns string) ScalableInterface[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
	return newScalable[appsv1.ReplicaSet, appsv1.ReplicaSetList](c.apps, "replicasets", ns)
}

func (c *Client) StatefulSets(ns string) ScalableInterface[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
	return newScalable[appsv1.StatefulSet, appsv1.StatefulSetList](c.apps, "statefulsets", ns)
}

func (c *Client) Jobs(ns string) JobInterface {
	return newResource[batchv1.Job, batchv1.JobList](c.batch, "jobs", ns)
}

func (c *Client) SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface {
	// One is only ever created: it has no list.
	return &resource[*authorizationv1.SelfSubjectAccessReview, runtime.Object]{c: c.authorization, name: "selfsubjectaccessreviews",
		newObj: func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} }}
}

func (c *Client) Leases(ns string) LeaseInterface {
	return newResource[coordinationv1.Lease, coordinationv1.LeaseList](c.coordination, "leases", ns)
}

func (c *Client) CoreRESTClient() rest.Interface { return c.core }

// ServerVersion gives up after 15 s: the client's own requests have no
// timeout, for the informers' watches.
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body, err := c.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("unable to parse the server version: %w", err)
	}
	return &v, nil
}
