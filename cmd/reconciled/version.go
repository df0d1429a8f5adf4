package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by the release build: -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

func init() {
	register(command{
		Name:    "version",
		Summary: "print the version, commit and Go version",
		Run:     runVersion,
	})
}

// buildInfo is what `reconciled version` reports.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// currentBuild resolves the version: ldflags win; without them a binary
// built from a checkout still names its commit through the VCS stamp the
// go command embeds (absent under -buildvcs=false or `go run`).
func currentBuild(ldVersion, ldCommit string, bi *debug.BuildInfo, ok bool) buildInfo {
	b := buildInfo{Version: ldVersion, Commit: ldCommit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return b
	}
	if b.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		// `go install module@version` records the module version.
		b.Version = bi.Main.Version
	}
	if b.Commit == "unknown" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	b := currentBuild(version, commit, bi, ok)
	if *asJSON {
		out, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("encode version: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	c := b.Commit
	if b.Modified {
		c += " (modified)"
	}
	_, err := fmt.Fprintf(stdout, "reconciled %s\ncommit %s\n%s %s\n", b.Version, c, b.GoVersion, b.Platform)
	return err
}
