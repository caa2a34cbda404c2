// Package dashboards generates tickcast's Grafana dashboards: one for the
// feed handler (publisher, packets, recovery server and stores) and one for
// subscribers (stream, loss, transport, latency). The dashboards are Go
// values built here and written as JSON by `go run ./dashboards/cmd/gendash`
// (or `go generate ./dashboards`); the JSON files are committed next to this
// code, and a test fails when they differ from what the code generates.
//
// Every panel queries the Prometheus datasource chosen by the `datasource`
// variable and is filtered by the `instance` and `channel` variables where
// its metric has those labels. internal/e2e/prometheus_test.go checks every
// query against a real Prometheus scraping both binaries.
package dashboards

//go:generate go run ./cmd/gendash -dir .

// The types below are the part of Grafana's dashboard JSON model the
// dashboards use (schemaVersion 39, Grafana 10 and later).

// Dashboard is a Grafana dashboard.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description,omitempty"`
	Tags          []string   `json:"tags"`
	Timezone      string     `json:"timezone"`
	Editable      bool       `json:"editable"`
	GraphTooltip  int        `json:"graphTooltip"`
	Refresh       string     `json:"refresh"`
	SchemaVersion int        `json:"schemaVersion"`
	Version       int        `json:"version"`
	Time          TimeRange  `json:"time"`
	Templating    Templating `json:"templating"`
	Annotations   struct {
		List []any `json:"list"`
	} `json:"annotations"`
	Links  []any    `json:"links"`
	Panels []*Panel `json:"panels"`
}

// TimeRange is a dashboard's default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds a dashboard's template variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable: the datasource or a label's values.
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      string         `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Datasource *DatasourceRef `json:"datasource,omitempty"`
	Refresh    int            `json:"refresh"`
	Regex      string         `json:"regex"`
	Sort       int            `json:"sort"`
	Multi      bool           `json:"multi"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue,omitempty"`
	Current    map[string]any `json:"current"`
	Options    []any          `json:"options"`
	Hide       int            `json:"hide"`
}

// DatasourceRef names a datasource by type and UID (here the datasource
// variable).
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a dashboard panel: a row header, a time series or a stat.
type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     GridPos        `json:"gridPos"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Panels      []*Panel       `json:"panels,omitempty"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
}

// GridPos places a panel on the dashboard's 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string         `json:"refId"`
	Datasource   *DatasourceRef `json:"datasource"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Range        bool           `json:"range"`
	Instant      bool           `json:"instant"`
}

// FieldConfig sets how a panel shows its values.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the display settings of every field of a panel.
type FieldDefaults struct {
	Unit       string         `json:"unit"`
	Min        *float64       `json:"min,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Color      map[string]any `json:"color,omitempty"`
}

// Thresholds colour a value by the steps it reaches.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is a threshold: from Value (nil: from minus infinity) on, Color.
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}
