// Package prometheus holds tickcast's Prometheus alerting rules
// (alerts.yml) and their unit tests (alerts_test.yml); this test runs them
// with promtool.
package prometheus

import (
	"os/exec"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

// TestAlertRules checks the rules (promtool check rules) and runs their unit
// tests (promtool test rules). promtool comes with Debian's prometheus
// package; TICKCAST_REQUIRE=prometheus turns its absence into a failure.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	testenv.Need(t, "prometheus", err == nil, "promtool is not installed (Debian package prometheus)")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
