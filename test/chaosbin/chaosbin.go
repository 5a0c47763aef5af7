// Package chaosbin builds the chaos binary for the end-to-end tests, which
// run it as a user would.
package chaosbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build builds ./cmd/chaos of this repository into a new temporary
// directory named after prefix and returns the binary's path, and the
// directory's removal.
func Build(prefix string) (bin string, remove func(), err error) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(tmp) }
	bin = filepath.Join(tmp, "chaos")
	build := exec.Command("go", "build", "-o", bin, "./cmd/chaos")
	build.Dir = Root()
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("building chaos: %v\n%s", err, out)
	}
	return bin, remove, nil
}

// Root is the repository's top directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
