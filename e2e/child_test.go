package e2e_test

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// child is one subprocess of an end-to-end test: a daemon binary or a
// nats-server. It dies with the test binary (Pdeathsig: a timeout or a
// broken pipe skips the cleanups) and is killed at the test's cleanup if
// it is still running, so no test leaves a process behind.
type child struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	waitErr error         // how it exited, once done is closed
}

// startChild starts bin with args, its stdout and stderr to out; closeOut,
// if set, runs once the process has exited. Only the flags and env
// configure it: no RECONCILED_* variable of the test's own environment is
// passed on.
func startChild(t testing.TB, bin string, args, env []string, out io.Writer, closeOut func()) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECONCILED_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		if closeOut != nil {
			closeOut()
		}
		t.Fatalf("start %s: %v", bin, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		if closeOut != nil {
			closeOut()
		}
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

// signal sends sig unless the process has exited.
func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(sig)
	}
}

// kill is kill -9 (no drain, no deferred cleanup, nothing flushed), and
// waits for the exit.
func (c *child) kill() {
	c.signal(syscall.SIGKILL)
	<-c.done
}
