package plan

import (
	"os"
	"strings"
	"testing"
)

// Every hold kind has its section in docs/troubleshooting.md, headed by
// the name plan --json gives it: a new kind without one fails here.
func TestEveryHoldIsExplained(t *testing.T) {
	b, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	for k := HoldPaused; int(k) < len(holdNames); k++ {
		if !strings.Contains(string(b), "\n### `"+k.String()+"`\n") {
			t.Errorf("docs/troubleshooting.md has no section ### `%s`", k)
		}
	}
}
