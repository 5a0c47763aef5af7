package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoClientGoClientset keeps client-go's clientset, informers and
// discovery out of the binary: their scheme registers some fifty API
// groups at init, a sixth of the CPU of every start, whatever the command
// (internal/backend/kubernetes/kubeapi is the client the binary uses).
// client-go's testing package (which its generic typed client, gentype,
// links) is kept out too: its OpenAPI and merge packages cost ~0.7 ms of
// init a start.
func TestNoClientGoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"k8s.io/client-go/discovery",
		"k8s.io/client-go/testing",
	}
	for _, p := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("the chaos binary links %s", p)
				break
			}
		}
	}
}
