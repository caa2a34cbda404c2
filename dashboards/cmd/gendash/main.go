// Command gendash writes tickcast's Grafana dashboards (package dashboards)
// as JSON files:
//
//	go run ./dashboards/cmd/gendash [-dir dashboards]
//
// Run it from the module root after changing the dashboards' code, and
// commit the JSON files with the code; the dashboards test fails while they
// differ.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tickcast/tickcast/dashboards"
)

func main() {
	dir := flag.String("dir", "dashboards", "directory to write the dashboards' JSON files to")
	flag.Parse()
	if err := write(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gendash:", err)
		os.Exit(1)
	}
}

// write writes every dashboard to its file in dir.
func write(dir string) error {
	for _, f := range dashboards.All() {
		b, err := f.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
