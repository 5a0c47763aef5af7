package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// engine skips the test when Docker is unreachable, unless $CI is set.
func engine(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Docker engine is unreachable and $CI is set: %v", err)
		}
		t.Skipf("skipping: the Docker engine is unreachable (set CI=true to make this a failure): %v", err)
	}
}

func TestBusybox(t *testing.T) {
	engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref, err := Busybox(ctx)
	if errors.Is(err, ErrNoBusybox) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, BusyboxRepo+":") {
		t.Fatalf("ref %q", ref)
	}
	want, _ := BusyboxRef()
	if ref != want {
		t.Fatalf("Busybox() = %s, BusyboxRef() = %s", ref, want)
	}
	// Cached: the second call is answered without building.
	again, err := Busybox(ctx)
	if err != nil || again != ref {
		t.Fatalf("second call: %s, %v", again, err)
	}
	if !strings.Contains(BuildCommand(ref), "docker build -t "+ref) {
		t.Fatalf("BuildCommand: %s", BuildCommand(ref))
	}
}

func TestReadBuildOutput(t *testing.T) {
	ok := `{"stream":"Step 1/2"}` + "\n" + `{"stream":"Successfully built"}` + "\n"
	if err := readBuildOutput(strings.NewReader(ok), "x"); err != nil {
		t.Fatal(err)
	}
	bad := `{"stream":"Step 1/2 : RUN nope\n"}` + "\n" + `{"errorDetail":{"message":"exec failed"},"error":"exec failed"}` + "\n"
	err := readBuildOutput(strings.NewReader(bad), "x")
	if err == nil || !strings.Contains(err.Error(), "exec failed") || !strings.Contains(err.Error(), "RUN nope") {
		t.Fatalf("got %v", err)
	}
}
