// Package all links every built-in backend into the binary: importing it
// registers them. Adding a backend is one package under internal/backend
// and one line here.
package all

import (
	_ "github.com/chaos-harness/chaos/internal/backend/docker"
	_ "github.com/chaos-harness/chaos/internal/backend/hooks"
	_ "github.com/chaos-harness/chaos/internal/backend/kubernetes"
	_ "github.com/chaos-harness/chaos/internal/backend/local"
)
