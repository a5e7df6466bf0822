//go:build tools

// Package tools pins the build tools the project runs (nfpm builds the deb and
// rpm packages) in a module of their own, so that none of their dependencies
// enter the product's go.mod. Build them with
//
//	cd hack/tools && go build -o ../../_output/bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm
//
// (hack/package.sh does this).
//
// nfpm is pinned at v2.45.0: v2.46 and later import go.digitalxero.dev
// modules that the Go module proxy reachable here refuses (403), and v2.45.0
// builds with Go 1.25/1.26.
package tools

import (
	_ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
)
