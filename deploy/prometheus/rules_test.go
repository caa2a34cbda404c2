// Package prometheus holds tickcast's Prometheus alerting rules
// (alerts.yml) and their unit tests (alerts_test.yml); this test runs them
// with promtool.
package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
	"gopkg.in/yaml.v3"
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

// TestRuleJobsScraped checks that every job a rule selects (job="NAME") is
// a scrape job of prometheus.yml: a renamed job would leave such a rule,
// TickcastFeedHandlerDown among them, watching nothing.
func TestRuleJobsScraped(t *testing.T) {
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfgText, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(cfgText, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	used := regexp.MustCompile(`job="([^"]+)"`).FindAllStringSubmatch(string(rules), -1)
	if len(used) == 0 {
		t.Fatal(`alerts.yml selects no job="..."`)
	}
	for _, m := range used {
		if !slices.Contains(jobs, m[1]) {
			t.Errorf("alerts.yml selects job %q; prometheus.yml scrapes %v", m[1], jobs)
		}
	}
}
