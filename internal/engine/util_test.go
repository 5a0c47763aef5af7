package engine

import (
	"fmt"
	"os"
	"strings"
)

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(strings.TrimSpace(s), v) }
