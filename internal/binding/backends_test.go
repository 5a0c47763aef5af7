package binding

// Every built-in backend, registered: binding asks them what they support.
import _ "github.com/chaos-harness/chaos/internal/backend/all"
