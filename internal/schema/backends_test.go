package schema

// Every built-in backend, registered: the schema lists their names.
import _ "github.com/chaos-harness/chaos/internal/backend/all"
