package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCurrentBuild(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.modified", Value: "true"},
	}}
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.2"}}
	for _, c := range []struct {
		name              string
		ldVersion, ldComm string
		bi                *debug.BuildInfo
		ok                bool
		want              buildInfo
	}{
		{"no build info", "dev", "unknown", nil, false, buildInfo{Version: "dev", Commit: "unknown"}},
		{"ldflags win over vcs", "v2.0.0", "feedface", vcs, true, buildInfo{Version: "v2.0.0", Commit: "feedface"}},
		{"vcs fallback", "dev", "unknown", vcs, true,
			buildInfo{Version: "dev", Commit: "0123456789abcdef0123456789abcdef01234567", Modified: true}},
		{"module version from go install", "dev", "unknown", installed, true, buildInfo{Version: "v1.4.2", Commit: "unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := currentBuild(c.ldVersion, c.ldComm, c.bi, c.ok)
			c.want.GoVersion = runtime.Version()
			c.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var b buildInfo
	if err := json.Unmarshal(out.Bytes(), &b); err != nil {
		t.Fatalf("version --json: %v: %q", err, out.String())
	}
	if b.GoVersion != runtime.Version() || b.Version == "" || b.Commit == "" {
		t.Fatalf("version --json = %+v", b)
	}

	out.Reset()
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "reconciled "+b.Version || !strings.HasPrefix(lines[1], "commit "+b.Commit) ||
		!strings.HasPrefix(lines[2], runtime.Version()+" ") {
		t.Fatalf("version printed %q", out.String())
	}

	err := runVersion(context.Background(), []string{"extra"}, &out, &errb)
	if !errors.Is(err, errUsage) {
		t.Fatalf("version extra: got %v, want a usage error", err)
	}
}
