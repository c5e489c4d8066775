package testenv

import (
	"context"
	"net"
	"testing"
)

// NXDOMAIN starts a DNS server on 127.0.0.1 that answers every query with
// an authoritative "no such name" (NXDOMAIN), and returns a resolver that
// asks only it: Go's own resolver then fails a look-up with a
// *net.DNSError whose IsNotFound is true, as for a name that does not
// exist, without a packet leaving the machine (its configured name server
// is never asked). The server stops when t ends.
func NXDOMAIN(t testing.TB) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if ans := nxAnswer(buf[:n]); ans != nil {
				_, _ = pc.WriteTo(ans, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr) // wherever the resolver meant to ask
	}}
}

// nxAnswer is the NXDOMAIN answer to query (its header and question, with
// no records), or nil if query is not one.
func nxAnswer(query []byte) []byte {
	const header = 12
	if len(query) < header || query[4] != 0 || query[5] != 1 { // one question
		return nil
	}
	end := header
	for end < len(query) && query[end] != 0 { // the name's labels
		end += 1 + int(query[end])
	}
	end += 1 + 4 // the root label, QTYPE, QCLASS
	if end > len(query) {
		return nil
	}
	ans := append([]byte(nil), query[:end]...)
	ans[2] = 0x80 | 0x04 | query[2]&0x01 // a response, authoritative, recursion as asked
	ans[3] = 0x80 | 0x03                 // recursion available; NXDOMAIN
	clear(ans[6:header])                 // no answer, authority or additional records
	return ans
}
