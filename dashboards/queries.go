package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Query is a PromQL expression of a dashboard, with its template variables
// replaced by TestValues, ready for a PromQL parser or a Prometheus.
type Query struct {
	Where string // the dashboard, panel and refId, or the variable, it comes from
	Expr  string
}

// TestValues are what Queries puts in place of the template variables: the
// instance and channel variables' "All" regex, and a one-minute window for
// Grafana's interval variables.
var TestValues = map[string]string{
	"instance":        ".+",
	"channel":         ".+",
	"__rate_interval": "1m",
	"__interval":      "1m",
	"__range":         "1m",
}

// variableRef matches $name, ${name} and ${name:format}.
var variableRef = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// labelValues matches a query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*\w+\s*\)\s*$`)

// Expand replaces the template variables of expr by TestValues; a variable
// it does not know is an error.
func Expand(expr string) (string, error) {
	var unknown []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := TestValues[name]
		if !ok {
			unknown = append(unknown, ref)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown template variables %v in %q", unknown, expr)
	}
	return out, nil
}

// jsonPanel is what Queries reads of a panel (rows nest their panels when
// collapsed).
type jsonPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []jsonPanel `json:"panels"`
}

// Queries returns every PromQL expression of a dashboard's JSON, expanded:
// each target of each panel, and the selector of each label_values query
// variable. It reads the JSON as Grafana would rather than as this package
// writes it, so that it also checks dashboards edited by hand.
func Queries(dashboardJSON []byte) ([]Query, error) {
	var d struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []jsonPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, err
	}
	var out []Query
	add := func(where, expr string) error {
		e, err := Expand(expr)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, Query{Where: where, Expr: e})
		return nil
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		query := v.Query
		if m, ok := query.(map[string]any); ok { // the newer {"query": ..., "refId": ...} form
			query = m["query"]
		}
		s, _ := query.(string)
		where := fmt.Sprintf("%s / variable %s", d.Title, v.Name)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("%s: query %q is not label_values(selector, label)", where, s)
		}
		if err := add(where, m[1]); err != nil {
			return nil, err
		}
	}
	var walk func([]jsonPanel) error
	walk = func(ps []jsonPanel) error {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s / %s / %s: empty expression", d.Title, p.Title, t.RefID)
				}
				if err := add(fmt.Sprintf("%s / %s / %s", d.Title, p.Title, t.RefID), t.Expr); err != nil {
					return err
				}
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}
