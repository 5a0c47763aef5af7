package manifest

import (
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/limits"
)

// ReadFile reads a manifest file, refusing one larger than
// limits.MaxManifestBytes before reading it whole.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limits.MaxManifestBytes {
		return nil, tooBig(fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, limits.MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limits.MaxManifestBytes {
		return nil, tooBig(int64(len(data)))
	}
	return data, nil
}

func tooBig(n int64) error {
	return fmt.Errorf("the file is %s; a manifest is at most %d MiB", sizeText(n), limits.MaxManifestBytes>>20)
}

func sizeText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

// TopLevelKeys parses a YAML document and returns its top-level keys, in
// linear time: it walks the node tree instead of decoding into Go maps,
// which yaml.v3 does in time quadratic in the number of keys of each map.
func TopLevelKeys(data []byte) ([]string, error) {
	if len(data) > limits.MaxManifestBytes {
		return nil, tooBig(int64(len(data)))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	m := doc.Content[0]
	keys := make([]string, 0, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		keys = append(keys, m.Content[i].Value)
	}
	return keys, nil
}
