module github.com/tickcast/tickcast

go 1.26.0

require golang.org/x/sys v0.50.0

require gopkg.in/yaml.v3 v3.0.1 // indirect
