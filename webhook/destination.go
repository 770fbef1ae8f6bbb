package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DestinationError is the error of a connection the sender refused because
// its address is not public. A delivery refused this way fails at once.
type DestinationError struct {
	// Addr is the address refused, as the dialer had it.
	Addr string
	// Kind says what the address is: "loopback", "private", "link-local",
	// "unspecified", "multicast", ...
	Kind string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("%s is not a public address (%s)", e.Addr, e.Kind)
}

// CheckDestination returns a *DestinationError if addr is not a public
// unicast address, nil if it is. An IPv4-mapped IPv6 address is checked as
// the IPv4 address it maps, and a NAT64 or 6to4 address as the IPv4 address
// it embeds.
func CheckDestination(addr netip.Addr) error {
	if kind := addrKind(addr); kind != "" {
		return &DestinationError{Addr: addr.String(), Kind: kind}
	}
	return nil
}

var (
	// nat64 (RFC 6052) and sixToFour (RFC 3056) carry an IPv4 address that
	// a gateway or relay connects to.
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// globalUnicast6 holds every public IPv6 address; what lies outside it
	// is reserved.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// nonPublic lists the ranges of the IANA special-purpose address registries
// a webhook must not reach. The first range holding an address names its
// kind.
var nonPublic = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // 255.255.255.255 included
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("2001::/23"), "reserved"}, // Teredo included
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// addrKind says what addr is, or "" if it is public.
func addrKind(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid"
	}
	addr = addr.WithZone("").Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		return addrKind(netip.AddrFrom4([4]byte(b[12:16])))
	}
	if sixToFour.Contains(addr) {
		b := addr.As16()
		return addrKind(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(addr) {
			return r.kind
		}
	}
	if addr.Is6() && !globalUnicast6.Contains(addr) {
		return "reserved"
	}
	return ""
}

// checkDial is a net.Dialer's Control: it runs once the name is resolved,
// on each address the dialer is about to connect to, so a name that
// resolves to a public address when checked and to a private one when
// dialled (DNS rebinding) is still refused.
func checkDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DestinationError{Addr: address, Kind: "not an IP address"}
	}
	return CheckDestination(ap.Addr())
}

// checkConn refuses a connection whose peer is not a public address: the
// check of a dialer the sender does not own, after it connected.
func checkConn(c net.Conn) error {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return &DestinationError{Addr: c.RemoteAddr().String(), Kind: "not an IP address"}
	}
	return CheckDestination(ap.Addr())
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// checkedDial wraps a dialer of the caller's transport: a connection to an
// address that is not public is closed before anything is sent on it.
func checkedDial(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := checkConn(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// guardTransport returns a copy of rt (nil: http.DefaultTransport) that
// connects only to public addresses. Its own dialer checks each address
// before connecting; a dialer rt brings is checked once connected.
func guardTransport(rt http.RoundTripper) (http.RoundTripper, error) {
	defaultTransport := rt == nil
	if defaultTransport {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil, errors.New("webhook options: the sender checks destinations only through an *http.Transport; " +
			"give HTTPClient one, or set AllowPrivateDestinations")
	}
	t = t.Clone()
	if defaultTransport || (t.DialContext == nil && t.Dial == nil) {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: checkDial}
		t.DialContext, t.Dial = d.DialContext, nil
	} else {
		dial := t.DialContext
		if dial == nil {
			plain := t.Dial
			dial = func(_ context.Context, network, addr string) (net.Conn, error) { return plain(network, addr) }
		}
		t.DialContext, t.Dial = checkedDial(dial), nil
	}
	if t.DialTLSContext != nil || t.DialTLS != nil {
		dial := t.DialTLSContext
		if dial == nil {
			plain := t.DialTLS
			dial = func(_ context.Context, network, addr string) (net.Conn, error) { return plain(network, addr) }
		}
		t.DialTLSContext, t.DialTLS = checkedDial(dial), nil
	}
	return t, nil
}
