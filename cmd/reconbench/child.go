package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aviate-labs/agent-go"

	"github.com/reconciled/reconciled/ledgertest"
)

// The ledger can run in a child process (this binary with -serve-ledger),
// so that this process's RSS and CPU time are the daemon's and the
// baseline's alone: an in-process ledger of a million blocks is resident
// throughout, serves every page on our CPU, and its live heap raises the
// garbage collector's target for everything else.

// ledgerChild is a running ledger child process.
type ledgerChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startLedgerChild starts the child and reads its facts. The child lives
// until its stdin closes (stop, or this process dying).
func startLedgerChild(cfg config, logw io.Writer) (*scenario, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("ledger child: %w", err)
	}
	cmd := exec.Command(exe, "-serve-ledger", "-blocks", strconv.Itoa(cfg.Blocks),
		"-span", cfg.Span.String(), "-seed", strconv.FormatInt(cfg.Seed, 10), "-rtt", cfg.RTT.String())
	cmd.Stderr = logw
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("ledger child: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ledger child: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ledger child: %w", err)
	}
	ch := &ledgerChild{cmd: cmd, stdin: in}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		_ = ch.stop()
		return nil, fmt.Errorf("ledger child: no facts: %w", err)
	}
	sc := &scenario{child: ch}
	if err := json.Unmarshal(line, &sc.facts); err != nil {
		_ = ch.stop()
		return nil, fmt.Errorf("ledger child: facts: %w", err)
	}
	if err := sc.init(); err != nil {
		_ = ch.stop()
		return nil, err
	}
	return sc, nil
}

func (c *ledgerChild) stop() error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return errors.New("ledger child: did not exit; killed")
	}
}

// rss is the child's resident memory.
func (c *ledgerChild) rss() uint64 {
	rss, _, err := procMem(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return rss
}

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture the project builds for).
const userHZ = 100

// cpu is the child's user+system CPU time so far (10 ms resolution), or
// -1 when it cannot be read.
func (c *ledgerChild) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// fields are counted from the last ')'. utime and stime are fields 14
	// and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	fs := strings.Fields(string(b[i+1:]))
	if len(fs) < 13 {
		return -1
	}
	var ticks uint64
	for _, f := range fs[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// serveLedger is the child's side: build the ledger, print its facts as
// one JSON line, serve until stdin closes.
func serveLedger(cfg config, stdin io.Reader, stdout io.Writer) error {
	sc, err := buildScenario(cfg.Blocks, cfg.Span, cfg.Seed)
	if err != nil {
		return err
	}
	defer sc.close()
	sc.injectRTT(cfg.RTT)
	// Building leaves garbage; what stays resident is the ledger itself.
	runtime.GC()
	debug.FreeOSMemory()
	b, err := json.Marshal(sc.facts)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(append(b, '\n')); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, stdin)
	return err
}

// newAgent is an agent for the scenario's replica as production runs it:
// root key fetched from the local replica's status, signed-query
// verification on, an HTTP client that stays on loopback.
func (sc *scenario) newAgent() (*agent.Agent, error) {
	u, err := url.Parse(sc.URL)
	if err != nil {
		return nil, fmt.Errorf("replica url: %w", err)
	}
	a, err := agent.New(agent.Config{
		FetchRootKey: true,
		PollDelay:    10 * time.Millisecond,
		ClientConfig: []agent.ClientOption{agent.WithHostURL(u), agent.WithHttpClient(ledgertest.LoopbackHTTPClient())},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return a, nil
}

// blocksServed is the ledger's count of blocks served, known only when
// the ledger is in this process.
func (sc *scenario) blocksServed() uint64 {
	if sc.ledger == nil {
		return 0
	}
	return sc.ledger.Counters().BlocksServed
}
