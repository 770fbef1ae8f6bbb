package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func TestAddrKind(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		// IPv4
		"127.0.0.1":       "loopback",
		"127.255.255.254": "loopback",
		"10.1.2.3":        "private",
		"172.16.0.1":      "private",
		"172.31.255.255":  "private",
		"192.168.1.1":     "private",
		"169.254.169.254": "link-local",
		"0.0.0.0":         "unspecified",
		"0.1.2.3":         "unspecified",
		"100.64.0.1":      "carrier-grade NAT",
		"224.0.0.1":       "multicast",
		"239.255.255.250": "multicast",
		"255.255.255.255": "reserved",
		"240.0.0.1":       "reserved",
		"192.0.0.8":       "reserved",
		"192.0.2.10":      "documentation",
		"198.18.0.1":      "benchmarking",
		"8.8.8.8":         "",
		"1.1.1.1":         "",
		"172.32.0.1":      "",
		"192.169.0.1":     "",
		"100.128.0.1":     "",
		"11.0.0.1":        "",
		// IPv6
		"::1":                    "loopback",
		"::":                     "unspecified",
		"::ffff:127.0.0.1":       "loopback",
		"::ffff:169.254.169.254": "link-local",
		"::ffff:10.0.0.1":        "private",
		"::ffff:0.0.0.0":         "unspecified",
		"::ffff:8.8.8.8":         "",
		"::127.0.0.1":            "reserved", // IPv4-compatible, deprecated
		"fe80::1":                "link-local",
		"fe80::1%eth0":           "link-local",
		"fd00::1":                "private",
		"fd00:ec2::254":          "private", // EC2's metadata over IPv6
		"fc00::1":                "private",
		"fec0::1":                "site-local",
		"ff02::1":                "multicast",
		"ff05::1:3":              "multicast",
		"2001:db8::1":            "documentation",
		"2001::1":                "reserved", // Teredo
		"100::1":                 "reserved",
		"4000::1":                "reserved",
		"64:ff9b::7f00:1":        "loopback", // NAT64 of 127.0.0.1
		"64:ff9b::a9fe:a9fe":     "link-local",
		"64:ff9b::808:808":       "",
		"2002:7f00:1::1":         "loopback", // 6to4 of 127.0.0.1
		"2002:a00:1::1":          "private",
		"2002:808:808::1":        "",
		"2606:4700:4700::1111":   "",
		"2001:4860:4860::8888":   "",
	}
	for s, want := range cases {
		addr := netip.MustParseAddr(s)
		if got := addrKind(addr); got != want {
			t.Errorf("addrKind(%s) = %q, want %q", s, got, want)
		}
		err := CheckDestination(addr)
		de, ok := errors.AsType[*DestinationError](err)
		if (want == "") != (err == nil) || (want != "" && (!ok || de.Kind != want || de.Addr != addr.String())) {
			t.Errorf("CheckDestination(%s) = %v", s, err)
		}
	}
	if got := addrKind(netip.Addr{}); got != "invalid" {
		t.Errorf("addrKind of the zero Addr = %q", got)
	}
}

func TestCheckDial(t *testing.T) {
	t.Parallel()
	for addr, refused := range map[string]bool{
		"127.0.0.1:80":            true,
		"[::ffff:127.0.0.1]:443":  true,
		"[fe80::1%eth0]:80":       true,
		"169.254.169.254:80":      true,
		"not-an-address":          true,
		"93.184.215.14:443":       false,
		"[2606:4700::6810:1]:443": false,
	} {
		err := checkDial("tcp", addr, nil)
		if _, ok := errors.AsType[*DestinationError](err); ok != refused || (err != nil) != refused {
			t.Errorf("checkDial(%s) = %v, want refused %v", addr, err, refused)
		}
	}
}

// TestPrivateDestinations delivers to a receiver on 127.0.0.1 by a name:
// refused at the dial unless private destinations are allowed. The name is
// resolved by the sender's own dialer (localhost) or by the dialer of the
// caller's transport (httptest maps example.com to its listener).
func TestPrivateDestinations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		url    func(srv *httptest.Server) string
		client func(srv *httptest.Server) *http.Client
	}{
		{"own dialer", func(srv *httptest.Server) string {
			return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hook?token=sekrit"
		}, func(*httptest.Server) *http.Client { return nil }},
		{"caller's dialer", func(*httptest.Server) string {
			return "http://hooks.example.com/hook?token=sekrit"
		}, (*httptest.Server).Client},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, allow := range []bool{false, true} {
				var hits atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					w.WriteHeader(http.StatusNoContent)
				}))
				defer srv.Close()
				f := newFixture(t, c.url(srv))
				run := f.notify(t, "run_finished", json.RawMessage(`{}`))
				s := f.sender(c.client(srv), Options{AllowPrivateDestinations: allow})
				sendDue(t, s, 1)
				d := f.delivery(t, run.ID)
				if allow {
					if d.State != store.DeliveryDelivered || hits.Load() != 1 {
						t.Errorf("allowed: state %s, error %q, %d requests", d.State, d.LastError, hits.Load())
					}
					continue
				}
				if d.State != store.DeliveryFailed || d.Attempts != 1 {
					t.Errorf("refused: state %s after %d attempts, want failed after 1", d.State, d.Attempts)
				}
				for _, want := range []string{"refused to connect: 127.0.0.1 is not a public address (loopback)", "--allow-private-webhooks"} {
					if !strings.Contains(d.LastError, want) {
						t.Errorf("refused: error %q, want it to say %q", d.LastError, want)
					}
				}
				if strings.Contains(d.LastError, "sekrit") {
					t.Errorf("refused: error %q shows the URL", d.LastError)
				}
				f.clock.Set(t0.Add(24 * time.Hour))
				sendDue(t, s, 0)
				if n := hits.Load(); n != 0 {
					t.Errorf("refused: the receiver got %d requests", n)
				}
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
