package main

import (
	"fmt"
	"net"
)

// loopbackOnly refuses an address beyond this machine: --nats-listen takes
// a loopback host:port only.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q is not a loopback address", addr)
	}
	return nil
}
