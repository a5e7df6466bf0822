package main

import (
	"fmt"
	"io"
)

// run dispatches the subcommands; it is replaced by the real wiring.
func run(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nodeagent: not wired yet")
	return 2
}
