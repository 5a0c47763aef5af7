package kubernetes

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chaos-harness/chaos/internal/backend"
)

// ownerOf is the owner annotations of a harness: this process (alive), or
// a child that has exited (gone).
func ownerOf(t *testing.T, alive bool) map[string]string {
	t.Helper()
	o := backend.CurrentOwner()
	if !alive {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		o.Pid, o.PidStart = cmd.Process.Pid, "1"
	}
	return map[string]string{AnnotationPid: strconv.Itoa(o.Pid), AnnotationPidStart: o.PidStart, AnnotationPidNS: o.PidNS, AnnotationHost: o.Host}
}

func meta(ns, name string, labels, ann map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: ann}
}

// chaos cleanup on what runs and campaigns left: a start hook's Deployment
// (labelled chaos.run, no owner annotations) goes with its run when the
// run's own objects say its harness is gone (issue 32, point 5), and a
// campaign's namespace, Jobs and ConfigMap go with no argument, with the
// campaign's id, never while its harness runs (point 4).
func TestCleanupLeftovers(t *testing.T) {
	dead, alive := ownerOf(t, false), ownerOf(t, true)
	run := func(id string) map[string]string { return map[string]string{LabelRun: id} }
	camp := func(id string) map[string]string { return map[string]string{LabelCampaign: id} }
	objects := []runtime.Object{
		// Run a: its harness is gone; its Deployment came from a hook.
		&corev1.Pod{ObjectMeta: meta("apps", "a-pod", run("20261202T010000Z-000a"), dead)},
		&appsv1.Deployment{ObjectMeta: meta("apps", "a-gateway", run("20261202T010000Z-000a"), nil)},
		// Run b: its harness runs.
		&corev1.Pod{ObjectMeta: meta("apps", "b-pod", run("20261202T010000Z-000b"), alive)},
		&appsv1.Deployment{ObjectMeta: meta("apps", "b-gateway", run("20261202T010000Z-000b"), nil)},
		// Run c: nothing says whose it is.
		&appsv1.Deployment{ObjectMeta: meta("apps", "c-gateway", run("20261202T010000Z-000c"), nil)},
		// Campaign d, killed, in its own namespace; campaign e, killed, in
		// a namespace it was given; campaign f runs.
		&corev1.Namespace{ObjectMeta: meta("", "chaos-campaign-20261202t010000z-000d", camp("20261202t010000z-000d"), dead)},
		&batchv1.Job{ObjectMeta: meta("chaos-campaign-20261202t010000z-000d", "d-0", camp("20261202t010000z-000d"), dead)},
		&batchv1.Job{ObjectMeta: meta("given", "e-0", camp("20261202t010000z-000e"), dead)},
		&corev1.ConfigMap{ObjectMeta: meta("given", "e-cm", camp("20261202t010000z-000e"), dead)},
		&corev1.Namespace{ObjectMeta: meta("", "chaos-campaign-20261202t010000z-000f", camp("20261202t010000z-000f"), alive)},
		&batchv1.Job{ObjectMeta: meta("chaos-campaign-20261202t010000z-000f", "f-0", camp("20261202t010000z-000f"), alive)},
	}
	for _, tc := range []struct {
		name  string
		runID string
		want  []string
	}{
		{name: "every run whose harness is gone", want: []string{
			"deployment apps/a-gateway", "pod apps/a-pod",
			"namespace chaos-campaign-20261202t010000z-000d", "job given/e-0", "configmap given/e-cm"}},
		{name: "a run by id", runID: "20261202T010000Z-000b", want: []string{"deployment apps/b-gateway", "pod apps/b-pod"}},
		{name: "a run known by its hook's Deployment alone", runID: "20261202T010000Z-000c", want: []string{"deployment apps/c-gateway"}},
		{name: "a campaign by id (its directory's name)", runID: "20261202T010000Z-000F", want: []string{"namespace chaos-campaign-20261202t010000z-000f"}},
		{name: "a campaign in a given namespace by id", runID: "20261202T010000Z-000e", want: []string{"job given/e-0", "configmap given/e-cm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(objects...)
			var got []string
			err := cleanupWith(context.Background(), fakeClient{CS: cs}, backend.Cleanup{RunID: tc.runID, Found: func(s string) { got = append(got, s) }})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, "deleted "+w)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("removed\n  %q\nwant\n  %q", got, want)
			}
		})
	}
}
