package tickcast

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestNoPrometheusDependency checks that embedding the client does not link
// Prometheus: the collectors live in package tickprom, and nothing this
// package imports, directly or not, may import client_golang.
func TestNoPrometheusDependency(t *testing.T) {
	goTool := testenv.NeedTool(t, "go")
	out, err := exec.Command(goTool, "list", "-deps", "github.com/tickcast/tickcast").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/tickcast/tickcast") || !slices.Contains(deps, "github.com/tickcast/tickcast/seqgap") {
		t.Fatalf("go list -deps does not list the package and its imports: %q", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/prometheus/") {
			t.Errorf("github.com/tickcast/tickcast depends on %s", d)
		}
	}
}
