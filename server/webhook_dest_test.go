package server

import (
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// TestWebhookDestinations: a URL whose host is an address that is not
// public is refused at registration unless the server allows private
// webhooks; a host name is left to the sender, which checks the address it
// connects to.
func TestWebhookDestinations(t *testing.T) {
	t.Parallel()
	refused := map[string]string{
		"http://127.0.0.1:9000/hook":                  "127.0.0.1 is not a public address (loopback)",
		"http://[::1]/hook":                           "::1 is not a public address (loopback)",
		"http://[::ffff:127.0.0.1]/hook":              "(loopback)",
		"http://169.254.169.254/latest/meta-data/":    "169.254.169.254 is not a public address (link-local)",
		"https://10.0.0.8/hook":                       "(private)",
		"https://192.168.1.20/hook":                   "(private)",
		"https://[fd00:ec2::254]/hook":                "(private)",
		"http://[fe80::1%25eth0]/hook":                "(link-local)",
		"http://0.0.0.0:8080/hook":                    "(unspecified)",
		"http://224.0.0.1/hook":                       "(multicast)",
		"http://:8080/hook":                           "with a host",
		"/hook":                                       "absolute http or https URL",
		"file:///etc/passwd":                          "absolute http or https URL",
		"gopher://example.com/hook":                   "absolute http or https URL",
		"https://user:pass@93.184.215.14/hook":        "without credentials",
		"http://127.0.0.1:9000/hook?token=not-listed": "--allow-private-webhooks",
	}
	accepted := []string{
		"https://93.184.215.14/hook",
		"https://[2606:4700::6810:1]/hook",
		"https://example.com/hook",
		"http://localhost:9000/hook", // a name: checked when a delivery connects
	}

	f := newFixture(t)
	admin := f.key("acme", "root", store.RoleAdmin)
	for url, want := range refused {
		res := f.do("POST", "/v1/webhooks", admin, map[string]any{"url": url})
		if res.status != 400 || res.code(t) != "invalid_field" || !strings.Contains(string(res.body), want) {
			t.Errorf("POST %s: %d %s, want 400 saying %q", url, res.status, res.body, want)
		}
	}
	for _, url := range accepted {
		if res := f.do("POST", "/v1/webhooks", admin, map[string]any{"url": url}); res.status != 201 {
			t.Errorf("POST %s: %d %s, want 201", url, res.status, res.body)
		}
	}

	dev := newFixture(t, func(c *Config) { c.AllowPrivateWebhooks = true })
	admin = dev.key("acme", "root", store.RoleAdmin)
	for _, url := range []string{"http://127.0.0.1:9000/hook", "http://169.254.169.254/", "https://[fd00::1]/hook"} {
		if res := dev.do("POST", "/v1/webhooks", admin, map[string]any{"url": url}); res.status != 201 {
			t.Errorf("allowing private webhooks, POST %s: %d %s, want 201", url, res.status, res.body)
		}
	}
	for _, url := range []string{"ftp://127.0.0.1/hook", "http://:8080/hook"} {
		if res := dev.do("POST", "/v1/webhooks", admin, map[string]any{"url": url}); res.status != 400 {
			t.Errorf("allowing private webhooks, POST %s: %d %s, want 400", url, res.status, res.body)
		}
	}
}
