module github.com/edictlog/edictlog

go 1.26.8

require (
	github.com/hashicorp/go-msgpack/v2 v2.1.5
	golang.org/x/sys v0.49.0
)
