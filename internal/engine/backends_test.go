package engine

// Every built-in backend, registered, as the binary has them.
import _ "github.com/chaos-harness/chaos/internal/backend/all"
