package docker

// The images instances run from are built through the Docker Engine API and
// without a registry: nothing is ever pulled.
//
// The busybox image is FROM scratch with Debian's statically linked busybox
// (the host package busybox-static) installed as /bin/busybox, its applets
// linked into /bin at build time, and an empty /tmp. It is tagged with a hash
// of what went into it, so it is built once per busybox binary and reused.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// BusyboxPath is where Debian's busybox-static package installs the binary.
const BusyboxPath = "/bin/busybox"

// BusyboxRepo is the repository part of the busybox image's reference.
const BusyboxRepo = "chaos-test/busybox"

// Dockerfile is the busybox image's Dockerfile; its build context holds
// only the busybox binary.
const Dockerfile = `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && /bin/busybox mkdir -p /tmp /chaos/output && /bin/busybox chmod 1777 /tmp"]
ENV PATH=/bin
CMD ["/bin/sh"]
`

// ErrNoBusybox is returned when the busybox-static binary is not installed.
var ErrNoBusybox = errors.New(BusyboxPath + " is missing: install Debian's busybox-static package (apt-get install -y busybox-static); scripts/test.sh does")

// BusyboxRef returns the reference the busybox image has for the binary at
// BusyboxPath, without building anything.
func BusyboxRef() (string, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", ErrNoBusybox
		}
		return "", err
	}
	return refFor(bin), nil
}

func refFor(bin []byte) string {
	h := sha256.New()
	h.Write([]byte(Dockerfile))
	h.Write([]byte{0})
	h.Write(bin)
	return BusyboxRepo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
}

// BuildCommand is the shell command that builds the busybox image by hand
// with the docker CLI; preflight prints it when the image is missing.
func BuildCommand(ref string) string {
	if ref == "" {
		ref = BusyboxRepo + ":<hash>"
	}
	return fmt.Sprintf("apt-get install -y busybox-static && d=$(mktemp -d) && cp %s \"$d/busybox\" && printf '%%s' %s > \"$d/Dockerfile\" && docker build -t %s \"$d\"  # or: chaos build-image",
		BusyboxPath, shellQuote(Dockerfile), ref)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var (
	buildMu sync.Mutex
	built   = map[string]bool{}
)

// Busybox returns the busybox image's reference, building it first when the
// engine does not have it yet. It connects with the usual DOCKER_*
// environment variables.
func Busybox(ctx context.Context) (string, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", ErrNoBusybox
		}
		return "", err
	}
	ref := refFor(bin)
	buildMu.Lock()
	defer buildMu.Unlock()
	if built[ref] {
		return ref, nil
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		built[ref] = true
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspecting %s: %w", ref, err)
	}
	if err := build(ctx, cli, ref, bin); err != nil {
		return "", err
	}
	built[ref] = true
	return ref, nil
}

func build(ctx context.Context, cli *client.Client, ref string, bin []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(Dockerfile)}, {"busybox", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{"chaos.testimage": "busybox"},
	})
	if err != nil {
		return fmt.Errorf("building %s: %w", ref, err)
	}
	defer res.Body.Close()
	return readBuildOutput(res.Body, ref)
}

// readBuildOutput reads the engine's JSON progress stream to its end and
// returns the first error it reports, with the output that led to it.
func readBuildOutput(r io.Reader, ref string) error {
	dec := json.NewDecoder(r)
	var log strings.Builder
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("building %s: reading the engine's output: %w", ref, err)
		}
		log.WriteString(m.Stream)
		if m.Error != "" || m.ErrorDetail.Message != "" {
			msg := m.ErrorDetail.Message
			if msg == "" {
				msg = m.Error
			}
			return fmt.Errorf("building %s: %s\n%s", ref, msg, strings.TrimSpace(log.String()))
		}
	}
}
