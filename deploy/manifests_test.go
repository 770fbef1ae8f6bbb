package deploy

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// compose is what the tests read of docker-compose.yaml.
type compose struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	ReadOnly        bool     `yaml:"read_only"`
	Tmpfs           []string `yaml:"tmpfs"`
	User            string   `yaml:"user"`
	DependsOn       map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	return c
}

// workers are the compose services built from the Dockerfile.
func (c compose) workers() []string {
	var out []string
	for name, s := range c.Services {
		if s.Build == "." || s.Build == "./" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// serve is how compose starts belay serve in service name: its command,
// else the image's CMD.
func (c compose) serve(t *testing.T, name string) invocation {
	t.Helper()
	s := c.Services[name]
	if len(s.Entrypoint) > 0 && !slices.Equal(s.Entrypoint, []string{"/belay"}) {
		t.Errorf("compose %s: entrypoint %q replaces /belay", name, s.Entrypoint)
	}
	inv := invocation{where: "compose " + name, env: s.Environment}
	if len(s.Command) > 0 {
		if s.Command[0] != "serve" {
			t.Fatalf("compose %s: command %q, want serve ...", name, s.Command)
		}
		inv.args = s.Command[1:]
		return inv
	}
	d, err := readDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	inv.args = dockerfileServe(t, d).args
	return inv
}

// TestComposeMatchesServe: docker-compose.yaml runs PostgreSQL and three
// belay serve workers of the Dockerfile's image on it, with flags,
// variables, health checks and stop periods belay serve takes, a read-only
// root, and the console published on the host.
func TestComposeMatchesServe(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	h := readServeHelp(t)
	var pg string
	for name, s := range c.Services {
		if strings.HasPrefix(s.Image, "postgres:") {
			pg = name
			if len(s.Healthcheck.Test) == 0 {
				t.Errorf("compose %s: no health check, so the workers cannot wait for it", name)
			}
		}
	}
	if pg == "" {
		t.Fatal("docker-compose.yaml has no PostgreSQL service")
	}
	workers := c.workers()
	if len(workers) != 3 {
		t.Fatalf("docker-compose.yaml builds %d workers from the Dockerfile (%v), want 3", len(workers), workers)
	}
	published := 0
	worlds := map[string]bool{}
	for _, name := range workers {
		s := c.Services[name]
		inv := c.serve(t, name)
		inv.check(t, h)
		u, err := url.Parse(inv.value(t, h, "database-url"))
		if err != nil || u.Hostname() != pg {
			t.Errorf("compose %s: the database URL's host is not the %s service", name, pg)
		}
		port := inv.port(t, h)
		if len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("compose %s: health check %q, want [CMD, /belay, probe, URL]", name, s.Healthcheck.Test)
		} else {
			checkProbe(t, "compose "+name+" healthcheck", s.Healthcheck.Test[1:], port)
		}
		stop, err := time.ParseDuration(s.StopGracePeriod)
		if grace := inv.duration(t, h, "grace"); err != nil || stop <= grace+httpShutdown {
			t.Errorf("compose %s: stop_grace_period %q, want more than --grace %s and the %s serve gives open requests",
				name, s.StopGracePeriod, grace, httpShutdown)
		}
		if !s.ReadOnly || !slices.Contains(s.Tmpfs, "/tmp") {
			t.Errorf("compose %s: read_only %v, tmpfs %v: want a read-only root with /tmp in memory", name, s.ReadOnly, s.Tmpfs)
		}
		if s.User != "" && strings.HasPrefix(s.User, "0") {
			t.Errorf("compose %s: runs as user %s", name, s.User)
		}
		for _, p := range s.Ports {
			if strings.HasSuffix(p, ":"+strconv.Itoa(port)) {
				published++
			}
		}
		if !dependsOn(c, name, pg) {
			t.Errorf("compose %s: does not wait for %s to be healthy", name, pg)
		}
		// The support desk's world is one file every worker reaches.
		world := inv.value(t, h, "world")
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if _, named := c.Volumes[src]; named && strings.HasPrefix(world, dst+"/") {
				worlds[src+":"+world] = true
			}
		}
	}
	if published == 0 {
		t.Error("compose publishes no worker's port: the console is not reachable from the host")
	}
	if len(worlds) != 1 {
		t.Errorf("the workers' worlds are %v, want one file on one named volume they share", worlds)
	}
}

// dependsOn reports whether service waits, directly or through another
// service, for on to be healthy.
func dependsOn(c compose, service, on string) bool {
	for dep, d := range c.Services[service].DependsOn {
		if d.Condition != "service_healthy" {
			continue
		}
		if dep == on || dependsOn(c, dep, on) {
			return true
		}
	}
	return false
}

// k8s is the Kubernetes manifests under kubernetes/, by kind.
type k8s struct {
	deployment  k8sDeployment
	service     k8sService
	pdb         k8sPDB
	secret      k8sSecret
	configMap   k8sConfigMap
	files       []string
	kustomized  []string
	deployments int
}

type k8sMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sSecurityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef    *struct{ Name string } `yaml:"secretRef"`
		ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe  *k8sProbe          `yaml:"readinessProbe"`
	LivenessProbe   *k8sProbe          `yaml:"livenessProbe"`
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sDeployment struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Replicas int         `yaml:"replicas"`
		Selector k8sSelector `yaml:"selector"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds *int               `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               k8sSecurityContext `yaml:"securityContext"`
				Containers                    []k8sContainer     `yaml:"containers"`
				Volumes                       []struct {
					Name      string                 `yaml:"name"`
					ConfigMap *struct{ Name string } `yaml:"configMap"`
					Secret    *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
					EmptyDir any `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int `yaml:"port"`
			TargetPort any `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPDB struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		MinAvailable   any         `yaml:"minAvailable"`
		MaxUnavailable any         `yaml:"maxUnavailable"`
		Selector       k8sSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type k8sSecret struct {
	Metadata   k8sMeta           `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
}

type k8sConfigMap struct {
	Metadata k8sMeta           `yaml:"metadata"`
	Data     map[string]string `yaml:"data"`
}

// readK8s reads every document of every file under kubernetes/.
func readK8s(t *testing.T) k8s {
	t.Helper()
	dir := filepath.Join(repoRoot, "deploy", "kubernetes")
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var k k8s
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(name)
		k.files = append(k.files, base)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			raw, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			var target any
			var kz struct {
				Resources []string `yaml:"resources"`
			}
			switch doc["kind"] {
			case "Deployment":
				k.deployments++
				target = &k.deployment
			case "Service":
				target = &k.service
			case "PodDisruptionBudget":
				target = &k.pdb
			case "Secret":
				target = &k.secret
			case "ConfigMap":
				target = &k.configMap
			case "Kustomization":
				target = &kz
			default:
				t.Errorf("%s: a %v the test does not know", base, doc["kind"])
				continue
			}
			if err := yaml.Unmarshal(raw, target); err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			if kz.Resources != nil {
				k.kustomized = kz.Resources
			}
		}
	}
	return k
}

// container is the Deployment's belay container.
func (k k8s) container(t *testing.T) k8sContainer {
	t.Helper()
	cs := k.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the Deployment has %d containers, want one", len(cs))
	}
	return cs[0]
}

// serve is how the Deployment starts belay serve, with the files it mounts
// where they are read: files maps each mounted file's path to its text.
func (k k8s) serve(t *testing.T) (inv invocation, files map[string]string) {
	t.Helper()
	c := k.container(t)
	if len(c.Command) > 0 && !slices.Equal(c.Command, []string{"/belay"}) {
		t.Errorf("the container's command %q replaces the image's /belay", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("the container's args %q, want serve ...", c.Args)
	}
	inv = invocation{where: "the Deployment", args: c.Args[1:], env: map[string]string{}}
	for _, e := range c.Env {
		inv.env[e.Name] = e.Value
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil && from.SecretRef.Name == k.secret.Metadata.Name:
			for name, v := range k.secret.StringData {
				inv.env[name] = v
			}
			for name := range k.secret.Data {
				inv.env[name] = "(secret)"
			}
		case from.ConfigMapRef != nil && from.ConfigMapRef.Name == k.configMap.Metadata.Name:
			for name, v := range k.configMap.Data {
				inv.env[name] = v
			}
		default:
			t.Errorf("the Deployment's envFrom %+v names no Secret or ConfigMap here", from)
		}
	}
	files = map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range k.deployment.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == k.configMap.Metadata.Name {
				for key, text := range k.configMap.Data {
					files[path.Join(m.MountPath, key)] = text
				}
			}
		}
	}
	h := readServeHelp(t)
	if cfg := inv.value(t, h, "config"); cfg != "" {
		text, ok := files[cfg]
		if !ok {
			t.Fatalf("--config %s is no file the Deployment mounts (it mounts %v)", cfg, files)
		}
		var f struct {
			Serve map[string]any `yaml:"serve"`
		}
		if err := yaml.Unmarshal([]byte(text), &f); err != nil {
			t.Fatalf("%s: %v", cfg, err)
		}
		inv.file = f.Serve
	}
	return inv, files
}

// TestKubernetesMatchesServe: the Deployment runs three belay serve pods
// with flags, variables and settings serve takes, probes on the paths and
// the port it serves, as a user that is not root on a read-only root, and
// gives SIGTERM longer than serve's grace; the Service and the
// PodDisruptionBudget select its pods, and the Secret holds what the pods
// read from it.
func TestKubernetesMatchesServe(t *testing.T) {
	t.Parallel()
	k := readK8s(t)
	h := readServeHelp(t)
	if k.deployments != 1 {
		t.Fatalf("%d Deployments under kubernetes/, want one", k.deployments)
	}
	d := k.deployment
	if d.Spec.Replicas != 3 {
		t.Errorf("the Deployment has %d replicas, want 3", d.Spec.Replicas)
	}
	pods := d.Spec.Template.Metadata.Labels
	if !selects(d.Spec.Selector.MatchLabels, pods) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, pods)
	}
	c := k.container(t)
	inv, _ := k.serve(t)
	inv.check(t, h)
	if _, ok := inv.env["BELAY_DATABASE_URL"]; !ok || k.secret.StringData["BELAY_DATABASE_URL"] == "" {
		t.Error("the database URL does not come from the Secret as $BELAY_DATABASE_URL")
	}
	if inv.file["database_url"] != nil {
		t.Error("the ConfigMap holds a database URL: it belongs in the Secret")
	}

	port := inv.port(t, h)
	portOf := func(p any) int {
		switch v := p.(type) {
		case string:
			for _, cp := range c.Ports {
				if cp.Name == v {
					return cp.ContainerPort
				}
			}
		case uint64:
			return int(v)
		case int:
			return v
		}
		return -1
	}
	for _, p := range []struct {
		name  string
		probe *k8sProbe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		switch {
		case p.probe == nil:
			t.Errorf("the container has no %s probe", p.name)
		case p.probe.HTTPGet.Path != p.path:
			t.Errorf("the %s probe gets %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		case portOf(p.probe.HTTPGet.Port) != port:
			t.Errorf("the %s probe asks port %v; serve listens on %d", p.name, p.probe.HTTPGet.Port, port)
		}
	}

	grace := inv.duration(t, h, "grace")
	tgp := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if tgp == nil {
		t.Errorf("no terminationGracePeriodSeconds: Kubernetes' 30 s default is not more than --grace %s and the %s serve gives open requests", grace, httpShutdown)
	} else if time.Duration(*tgp)*time.Second <= grace+httpShutdown {
		t.Errorf("terminationGracePeriodSeconds %d, want more than --grace %s and the %s serve gives open requests", *tgp, grace, httpShutdown)
	}

	pod, sc := d.Spec.Template.Spec.SecurityContext, c.SecurityContext
	nonRoot := func(s k8sSecurityContext) bool {
		return s.RunAsNonRoot != nil && *s.RunAsNonRoot && (s.RunAsUser == nil || *s.RunAsUser != 0)
	}
	if !nonRoot(pod) && !nonRoot(sc) {
		t.Error("neither the pod nor the container sets runAsNonRoot: true")
	}
	if (pod.RunAsUser != nil && *pod.RunAsUser == 0) || (sc.RunAsUser != nil && *sc.RunAsUser == 0) {
		t.Error("runAsUser 0")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the container's root filesystem is not read-only")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container may escalate privileges")
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if m.Name == v.Name && m.MountPath == "/tmp" && v.EmptyDir != nil {
				tmp = true
			}
		}
	}
	if !tmp {
		t.Error("no emptyDir on /tmp: with a read-only root, temporary files have nowhere to go")
	}

	if !selects(k.service.Spec.Selector, pods) {
		t.Errorf("the Service's selector %v does not select the pods %v", k.service.Spec.Selector, pods)
	}
	for _, p := range k.service.Spec.Ports {
		if portOf(p.TargetPort) != port {
			t.Errorf("the Service sends port %d to %v; serve listens on %d", p.Port, p.TargetPort, port)
		}
	}
	if !selects(k.pdb.Spec.Selector.MatchLabels, pods) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the pods %v", k.pdb.Spec.Selector.MatchLabels, pods)
	}
	switch {
	case k.pdb.Spec.MaxUnavailable != nil:
		if n, ok := k.pdb.Spec.MaxUnavailable.(uint64); !ok || n < 1 || int(n) >= d.Spec.Replicas {
			t.Errorf("the PodDisruptionBudget's maxUnavailable %v: want from 1 to fewer than the replicas", k.pdb.Spec.MaxUnavailable)
		}
	case k.pdb.Spec.MinAvailable != nil:
		if n, ok := k.pdb.Spec.MinAvailable.(uint64); !ok || n < 1 || int(n) >= d.Spec.Replicas {
			t.Errorf("the PodDisruptionBudget's minAvailable %v: want from 1 to fewer than the replicas", k.pdb.Spec.MinAvailable)
		}
	default:
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}

	// kubectl apply -k applies every manifest but the Secret's template.
	for _, f := range k.files {
		if f == "kustomization.yaml" {
			continue
		}
		if in := slices.Contains(k.kustomized, f); in == (f == "secret.yaml") {
			t.Errorf("kustomization.yaml resources %v: %s %s", k.kustomized, f, map[bool]string{true: "is listed", false: "is not listed"}[in])
		}
	}
}

// selects reports whether a selector's labels are all on the pods.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
