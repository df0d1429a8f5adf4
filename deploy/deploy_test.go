// Package deploy_test holds the container and Kubernetes examples to what
// the daemon needs: they parse, they carry the security and lifecycle
// settings the docs promise, and the names that tie them together (ports,
// paths, Secret keys, labels, environment variables) agree.
package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The parts of the Kubernetes objects the checks look at; yaml.v3 ignores
// the rest. A misspelt field leaves its Go field empty, which the checks
// then report.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		// Deployment and PodDisruptionBudget: {matchLabels: …};
		// Service: the labels themselves. See selects.
		Selector yaml.Node `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Type  string        `yaml:"type"`
		Ports []servicePort `yaml:"ports"`
		// PodDisruptionBudget
		MaxUnavailable             *int   `yaml:"maxUnavailable"`
		MinAvailable               *int   `yaml:"minAvailable"`
		UnhealthyPodEvictionPolicy string `yaml:"unhealthyPodEvictionPolicy"`
		// NetworkPolicy
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []ingressRule `yaml:"ingress"`
	} `yaml:"spec"`
	Resources []string `yaml:"resources"` // Kustomization
	Images    []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
		Digest  string `yaml:"digest"`
	} `yaml:"images"` // Kustomization
}

type ingressRule struct {
	From []struct {
		PodSelector       *yaml.Node `yaml:"podSelector"`
		NamespaceSelector *yaml.Node `yaml:"namespaceSelector"`
		IPBlock           *yaml.Node `yaml:"ipBlock"`
	} `yaml:"from"`
	Ports []struct {
		Protocol string `yaml:"protocol"`
		Port     int    `yaml:"port"`
		EndPort  int    `yaml:"endPort"`
	} `yaml:"ports"`
}

// admits reports whether the rule lets TCP traffic to port through, and
// whether it does so from anywhere (no from clause).
func (r ingressRule) admits(port int) (admitted, fromAnywhere bool) {
	if len(r.Ports) == 0 {
		return true, len(r.From) == 0
	}
	for _, p := range r.Ports {
		if p.Protocol != "" && p.Protocol != "TCP" {
			continue
		}
		end := p.EndPort
		if end == 0 {
			end = p.Port
		}
		if p.Port <= port && port <= end {
			return true, len(r.From) == 0
		}
	}
	return false, false
}

// selects reports whether the object's selector picks pods with labels.
func (o object) selects(labels map[string]string) bool {
	var sel map[string]string
	if o.Kind == "Service" {
		if o.Spec.Selector.Decode(&sel) != nil {
			return false
		}
	} else {
		var ml struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		if o.Spec.Selector.Decode(&ml) != nil {
			return false
		}
		sel = ml.MatchLabels
	}
	return subset(sel, labels)
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	TopologySpreadConstraints     []struct {
		MaxSkew           int    `yaml:"maxSkew"`
		TopologyKey       string `yaml:"topologyKey"`
		WhenUnsatisfiable string `yaml:"whenUnsatisfiable"`
		LabelSelector     struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"labelSelector"`
	} `yaml:"topologySpreadConstraints"`
	SecurityContext struct {
		RunAsNonRoot   *bool           `yaml:"runAsNonRoot"`
		RunAsUser      *int            `yaml:"runAsUser"`
		FSGroup        *int            `yaml:"fsGroup"`
		SeccompProfile *seccompProfile `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []volume    `yaml:"volumes"`
}

type seccompProfile struct {
	Type string `yaml:"type"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Args          []string `yaml:"args"`
	Env           []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ResourceFieldRef *struct {
				ContainerName string `yaml:"containerName"`
				Resource      string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		RunAsNonRoot             *bool           `yaml:"runAsNonRoot"`
		RunAsUser                *int            `yaml:"runAsUser"`
		RunAsGroup               *int            `yaml:"runAsGroup"`
		ReadOnlyRootFilesystem   *bool           `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool           `yaml:"allowPrivilegeEscalation"`
		SeccompProfile           *seccompProfile `yaml:"seccompProfile"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type keyPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type volume struct {
	Name     string `yaml:"name"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
	Secret *struct {
		SecretName string    `yaml:"secretName"`
		Items      []keyPath `yaml:"items"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name  string    `yaml:"name"`
		Items []keyPath `yaml:"items"`
	} `yaml:"configMap"`
}

const manifestDir = "kubernetes"

// loadManifests parses every document of every YAML file.
func loadManifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	out := map[string][]object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var node yaml.Node
			err := dec.Decode(&node)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			var o object
			if err := node.Decode(&o); err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if o.APIVersion == "" || o.Kind == "" || (o.Kind != "Kustomization" && o.Metadata.Name == "") {
				t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", f, i)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], o)
		}
	}
	return out
}

func findKind(t *testing.T, m map[string][]object, kind string) object {
	t.Helper()
	var found []object
	for _, docs := range m {
		for _, o := range docs {
			if o.Kind == kind {
				found = append(found, o)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s in %s, found %d", kind, manifestDir, len(found))
	}
	return found[0]
}

// dockerfile is what the checks need from the Dockerfile.
type dockerfile struct {
	froms                         []string
	user, entrypoint, cmd, volume string
	expose                        string
	env                           map[string]string
	args                          map[string]bool
	labels                        map[string]string
	run                           string
	copies                        []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, drop comments.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	d := dockerfile{env: map[string]string{}, args: map[string]bool{}, labels: map[string]string{}}
	kv := regexp.MustCompile(`([A-Za-z0-9_.]+)=("[^"]*"|\S+)`)
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.froms = append(d.froms, rest)
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "CMD":
			d.cmd = rest
		case "VOLUME":
			d.volume = rest
		case "EXPOSE":
			d.expose = rest
		case "ARG":
			name, _, _ := strings.Cut(rest, "=")
			d.args[name] = true
		case "ENV", "LABEL":
			for _, m := range kv.FindAllStringSubmatch(rest, -1) {
				v := strings.Trim(m[2], `"`)
				if strings.EqualFold(instr, "ENV") {
					d.env[m[1]] = v
				} else {
					d.labels[m[1]] = v
				}
			}
		case "RUN":
			d.run += rest + "\n"
		case "COPY":
			d.copies = append(d.copies, rest)
		}
	}
	return d
}

func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	// Fully qualified names: podman and buildah refuse short names unless
	// configured otherwise.
	if len(d.froms) != 2 || !strings.HasPrefix(d.froms[0], "docker.io/library/golang:"+string(m[1])+" ") ||
		!strings.HasPrefix(d.froms[1], "gcr.io/distroless/static-debian12:nonroot") {
		t.Errorf("stages %q: want docker.io/library/golang:%s builder and distroless static nonroot", d.froms, m[1])
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-X main.version=${VERSION}", "-X main.commit=${COMMIT}", "./cmd/reconciled"} {
		if !strings.Contains(d.run, want) {
			t.Errorf("the build does not use %q", want)
		}
	}
	for _, a := range []string{"VERSION", "COMMIT"} {
		if !d.args[a] {
			t.Errorf("no build argument %s", a)
		}
	}
	for k, want := range map[string]string{"user": "65532:65532", "entrypoint": `["/reconciled"]`, "cmd": `["serve"]`, "volume": "/data", "expose": "8080"} {
		got := map[string]string{"user": d.user, "entrypoint": d.entrypoint, "cmd": d.cmd, "volume": d.volume, "expose": d.expose}[k]
		if got != want {
			t.Errorf("%s is %q, want %q", strings.ToUpper(k), got, want)
		}
	}
	if d.env["RECONCILED_DATA"] != "/data" {
		t.Errorf("RECONCILED_DATA is %q, want /data", d.env["RECONCILED_DATA"])
	}
	if !strings.HasSuffix(d.env["RECONCILED_HTTP"], ":"+d.expose) {
		t.Errorf("RECONCILED_HTTP %q does not listen on the exposed port %s", d.env["RECONCILED_HTTP"], d.expose)
	}
	for _, l := range []string{"version", "revision", "source", "title", "description", "licenses"} {
		if d.labels["org.opencontainers.image."+l] == "" {
			t.Errorf("no OCI label org.opencontainers.image.%s", l)
		}
	}
}

// documentedEnv reads the environment variables of the configuration
// table (docs/configuration.md), which a test in cmd/reconciled holds to
// the code.
func documentedEnv(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--[a-z0-9-]+` \\| `(RECONCILED_[A-Z0-9_]+)` \\|").FindAllSubmatch(b, -1) {
		env[string(m[1])] = true
	}
	if len(env) < 10 {
		t.Fatalf("docs/configuration.md: the configuration table yields only %d variables", len(env))
	}
	return env
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	dep := findKind(t, m, "Deployment")
	pod := dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Metadata.Labels
	if !dep.selects(podLabels) {
		t.Fatalf("Deployment selector does not select its own pods")
	}

	// The sidecar: a native one (init container that keeps running).
	var rc *container
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "reconciled" {
			rc = &pod.InitContainers[i]
		}
	}
	if rc == nil {
		t.Fatal("no init container named reconciled")
	}
	if rc.RestartPolicy != "Always" {
		t.Errorf("reconciled restartPolicy %q: a native sidecar needs Always", rc.RestartPolicy)
	}
	if len(pod.Containers) == 0 {
		t.Error("no tool-layer container")
	}
	for _, c := range pod.Containers {
		if strings.Contains(c.Image, "reconciled") {
			t.Errorf("container %s runs reconciled as a main container; it belongs in initContainers", c.Name)
		}
	}
	if len(rc.Args) == 0 || rc.Args[0] != "serve" {
		t.Errorf("reconciled args %q: want serve", rc.Args)
	}

	env := map[string]string{}
	fromSecret := map[string][2]string{}
	known := documentedEnv(t)
	for _, e := range rc.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret[e.Name] = [2]string{e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key}
		}
		if strings.HasPrefix(e.Name, "RECONCILED_") && !known[e.Name] {
			t.Errorf("env %s is no serve setting (not in the configuration table of docs/configuration.md)", e.Name)
		}
	}

	// The HTTP port: probes, listen address, Service, image.
	port := 0
	for _, p := range rc.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port == 0 || !strings.HasSuffix(env["RECONCILED_HTTP"], ":"+strconv.Itoa(port)) ||
		strings.HasPrefix(env["RECONCILED_HTTP"], "127.") || strings.HasPrefix(env["RECONCILED_HTTP"], "localhost") {
		t.Errorf("port http %d and RECONCILED_HTTP %q: want a non-loopback listener on that port", port, env["RECONCILED_HTTP"])
	}
	if df := readDockerfile(t); df.expose != strconv.Itoa(port) {
		t.Errorf("the image exposes %s, the pod uses %d", df.expose, port)
	}
	for _, c := range []struct {
		name string
		p    *probe
		path string
	}{{"startup", rc.StartupProbe, "/healthz"}, {"liveness", rc.LivenessProbe, "/healthz"}, {"readiness", rc.ReadinessProbe, "/readyz"}} {
		if c.p == nil || c.p.HTTPGet == nil {
			t.Errorf("no %s probe", c.name)
			continue
		}
		if c.p.HTTPGet.Path != c.path || (c.p.HTTPGet.Port != "http" && c.p.HTTPGet.Port != strconv.Itoa(port)) {
			t.Errorf("%s probe GET %s on %s, want %s on http", c.name, c.p.HTTPGet.Path, c.p.HTTPGet.Port, c.path)
		}
	}

	// Resources and hardening.
	for _, r := range []string{"cpu", "memory"} {
		if rc.Resources.Requests[r] == "" {
			t.Errorf("no %s request", r)
		}
	}
	if rc.Resources.Limits["memory"] == "" {
		t.Error("no memory limit")
	}
	sc := rc.SecurityContext
	if !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("want readOnlyRootFilesystem: true and allowPrivilegeEscalation: false")
	}
	if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.SecurityContext.RunAsNonRoot) {
		t.Error("want runAsNonRoot: true")
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities drop %q, want [ALL]", sc.Capabilities.Drop)
	}
	if (sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault") &&
		(pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault") {
		t.Error("want seccompProfile RuntimeDefault")
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = pod.SecurityContext.RunAsUser
	}
	if uid == nil || strconv.Itoa(*uid)+":"+strconv.Itoa(*uid) != readDockerfile(t).user {
		t.Errorf("runAsUser does not match the image's USER %s", readDockerfile(t).user)
	}

	// Volumes: /data on a local volume, files from the Secret and the ConfigMap.
	vols := map[string]volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{} // mount path -> volume
	for _, vm := range rc.VolumeMounts {
		if _, ok := vols[vm.Name]; !ok {
			t.Errorf("mount %s: no volume %s", vm.MountPath, vm.Name)
		}
		mounts[vm.MountPath] = vm.Name
	}
	if env["RECONCILED_DATA"] != "/data" {
		t.Errorf("RECONCILED_DATA %q, want /data", env["RECONCILED_DATA"])
	}
	if v := vols[mounts["/data"]]; v.EmptyDir == nil && v.PersistentVolumeClaim == nil {
		t.Error("/data is not an emptyDir or a PVC")
	}
	if isTrue(sc.ReadOnlyRootFilesystem) {
		if v := vols[mounts["/tmp"]]; v.EmptyDir == nil || env["TMPDIR"] != "/tmp" {
			t.Error("a read-only root needs a writable /tmp (emptyDir) and TMPDIR=/tmp for SQLite's temporary files")
		}
	}
	secrets := map[string]map[string]string{}
	configMaps := map[string]map[string]string{}
	for _, docs := range m {
		for _, o := range docs {
			switch o.Kind {
			case "Secret":
				secrets[o.Metadata.Name] = o.StringData
			case "ConfigMap":
				configMaps[o.Metadata.Name] = o.Data
			}
		}
	}
	// fileFrom resolves a path in the container to the Secret or ConfigMap
	// key that provides it.
	fileFrom := func(path string) (kind, name, key string) {
		dir, file := filepath.Split(path)
		v, ok := vols[mounts[filepath.Clean(dir)]]
		if !ok {
			return "", "", ""
		}
		switch {
		case v.Secret != nil:
			for _, it := range v.Secret.Items {
				if it.Path == file {
					return "Secret", v.Secret.SecretName, it.Key
				}
			}
		case v.ConfigMap != nil:
			for _, it := range v.ConfigMap.Items {
				if it.Path == file {
					return "ConfigMap", v.ConfigMap.Name, it.Key
				}
			}
		}
		return "", "", ""
	}
	for _, c := range []struct{ env, kind string }{
		{"RECONCILED_NATS_CREDS", "Secret"}, {"RECONCILED_SUPPORT_TOKEN_FILE", "Secret"}, {"RECONCILED_LEDGERS_FILE", "ConfigMap"},
	} {
		kind, name, key := fileFrom(env[c.env])
		if kind != c.kind {
			t.Errorf("%s=%q is not a file from a %s", c.env, env[c.env], c.kind)
			continue
		}
		src := secrets[name]
		if kind == "ConfigMap" {
			src = configMaps[name]
		}
		if _, ok := src[key]; !ok {
			t.Errorf("%s: %s %s has no key %s in %s", c.env, kind, name, key, manifestDir)
		}
	}
	if ref, ok := fromSecret["RECONCILED_NATS_URL"]; !ok {
		t.Error("RECONCILED_NATS_URL does not come from a Secret")
	} else if _, ok := secrets[ref[0]][ref[1]]; !ok {
		t.Errorf("RECONCILED_NATS_URL: Secret %s has no key %s", ref[0], ref[1])
	}
	if _, ok := env["RECONCILED_INSTANCE"]; ok {
		t.Error("RECONCILED_INSTANCE is set: every pod would share one verdict-follower consumer while each has its own store")
	}

	// The ledgers ConfigMap carries the example ledgers file.
	_, cmName, cmKey := fileFrom(env["RECONCILED_LEDGERS_FILE"])
	example, err := os.ReadFile("ledgers.example.json")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, []byte(configMaps[cmName][cmKey]), example) {
		t.Errorf("ConfigMap %s/%s differs from deploy/ledgers.example.json", cmName, cmKey)
	}

	// Shutdown: the pod's grace period covers the daemon's drain.
	grace, err := time.ParseDuration(env["RECONCILED_GRACE"])
	if err != nil {
		t.Fatalf("RECONCILED_GRACE %q: %v", env["RECONCILED_GRACE"], err)
	}
	if tgp := pod.TerminationGracePeriodSeconds; tgp == nil {
		t.Error("no terminationGracePeriodSeconds")
	} else if time.Duration(*tgp)*time.Second < grace+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d must exceed --grace %s by at least 5s", *tgp, grace)
	}

	// The support Service reaches the sidecar's named port on these pods.
	svc := findKind(t, m, "Service")
	if svc.Spec.Type != "ClusterIP" || !svc.selects(podLabels) {
		t.Errorf("Service: type %q; want ClusterIP selecting the Deployment's pods", svc.Spec.Type)
	}
	// A number, not the port's name: the sidecar is an init container, and
	// Services resolve named ports of init containers only from Kubernetes
	// 1.32, while the README supports 1.29.
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != strconv.Itoa(port) {
		t.Errorf("Service ports %+v: want one with targetPort %d (the sidecar's containerPort)", svc.Spec.Ports, port)
	}
	pdb := findKind(t, m, "PodDisruptionBudget")
	if !pdb.selects(podLabels) ||
		(pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil) {
		t.Error("PodDisruptionBudget does not bound the Deployment's pods")
	}

	// kustomization.yaml lists every other manifest but the example
	// Secret, whose placeholders must never overwrite a real one.
	k := findKind(t, m, "Kustomization")
	var want []string
	for f := range m {
		if f != "kustomization.yaml" && !strings.HasSuffix(f, ".example.yaml") {
			want = append(want, f)
		}
	}
	sort.Strings(want)
	got := append([]string(nil), k.Resources...)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kustomization resources %q, want %q", got, want)
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("ConfigMap ledgers: %v", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("ledgers.example.json: %v", err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// The data dir the README's serve example creates stays out of commits and
// out of the image's build context.
func TestIgnoredDataDir(t *testing.T) {
	for _, f := range []string{"../.gitignore", "../.dockerignore"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l == "reconciled-data" || l == "/reconciled-data" || l == "reconciled-data/" || l == "/reconciled-data/" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s does not ignore reconciled-data (the default --data)", f)
		}
	}
}

// quantity reads a Kubernetes binary quantity ("512Mi", "2Gi") or a
// GOMEMLIMIT value ("384MiB") as bytes; 0 for anything else.
func quantity(s string) int64 {
	s = strings.TrimSuffix(strings.TrimSpace(s), "B")
	mult := int64(1)
	for suf, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}

func reconciledContainer(t *testing.T, dep object) *container {
	t.Helper()
	for i := range dep.Spec.Template.Spec.InitContainers {
		if c := &dep.Spec.Template.Spec.InitContainers[i]; c.Name == "reconciled" {
			return c
		}
	}
	t.Fatal("no init container named reconciled")
	return nil
}

// A fleet that runs for months meets node drains during NATS outages,
// node losses, memory pressure and disk pressure; these settings keep each
// from turning into an outage of its own.
func TestKubernetesFleetSettings(t *testing.T) {
	m := loadManifests(t)
	dep := findKind(t, m, "Deployment")
	pod := dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Metadata.Labels
	rc := reconciledContainer(t, dep)
	vols := map[string]volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mountedAt := map[string]volume{}
	for _, vm := range rc.VolumeMounts {
		mountedAt[vm.MountPath] = vols[vm.Name]
	}

	t.Run("pdb evicts unready pods", func(t *testing.T) {
		// A NATS outage makes every sidecar unready; with the default
		// policy (IfHealthyBudget) no pod could then be evicted and every
		// node drain would block until NATS is back.
		pdb := findKind(t, m, "PodDisruptionBudget")
		if pdb.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" {
			t.Errorf("PodDisruptionBudget unhealthyPodEvictionPolicy %q, want AlwaysAllow", pdb.Spec.UnhealthyPodEvictionPolicy)
		}
	})

	t.Run("network policy guards the support port", func(t *testing.T) {
		// /metrics and the support API share the port: only chosen
		// clients may reach it, while the tool layer's own ports stay open.
		var np *object
		for _, docs := range m {
			for i := range docs {
				if docs[i].Kind == "NetworkPolicy" {
					np = &docs[i]
				}
			}
		}
		if np == nil {
			t.Fatal("no NetworkPolicy")
		}
		if !subset(np.Spec.PodSelector.MatchLabels, podLabels) {
			t.Errorf("NetworkPolicy podSelector %v does not select the Deployment's pods %v", np.Spec.PodSelector.MatchLabels, podLabels)
		}
		ingress := false
		for _, pt := range np.Spec.PolicyTypes {
			ingress = ingress || pt == "Ingress"
		}
		if !ingress {
			t.Errorf("NetworkPolicy policyTypes %q: want Ingress", np.Spec.PolicyTypes)
		}
		port := 0
		for _, p := range rc.Ports {
			if p.Name == "http" {
				port = p.ContainerPort
			}
		}
		admitted := false
		for i, r := range np.Spec.Ingress {
			ok, anywhere := r.admits(port)
			if ok && anywhere {
				t.Errorf("NetworkPolicy ingress rule %d admits port %d from anywhere", i, port)
			}
			admitted = admitted || ok
		}
		if !admitted {
			t.Errorf("NetworkPolicy admits port %d from nobody: the support clients and the scraper need it", port)
		}
		others := false
		for _, r := range np.Spec.Ingress {
			ok, anywhere := r.admits(port + 1)
			others = others || (ok && anywhere)
		}
		if !others {
			t.Errorf("NetworkPolicy closes the tool layer's other ports (port %d): the policy applies to the whole pod", port+1)
		}
	})

	t.Run("pods spread over nodes and zones", func(t *testing.T) {
		keys := map[string]bool{}
		for _, c := range pod.TopologySpreadConstraints {
			if !subset(c.LabelSelector.MatchLabels, podLabels) {
				t.Errorf("topology spread on %s selects %v, not the Deployment's pods", c.TopologyKey, c.LabelSelector.MatchLabels)
			}
			if c.MaxSkew < 1 || (c.WhenUnsatisfiable != "ScheduleAnyway" && c.WhenUnsatisfiable != "DoNotSchedule") {
				t.Errorf("topology spread on %s: maxSkew %d, whenUnsatisfiable %q", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable)
			}
			keys[c.TopologyKey] = true
		}
		for _, k := range []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"} {
			if !keys[k] {
				t.Errorf("no topologySpreadConstraints on %s", k)
			}
		}
	})

	t.Run("GOMEMLIMIT leaves room for SQLite and the memory tmp", func(t *testing.T) {
		limit := quantity(rc.Resources.Limits["memory"])
		var memTmp int64
		for _, v := range mountedAt {
			if v.EmptyDir != nil && v.EmptyDir.Medium == "Memory" {
				memTmp += quantity(v.EmptyDir.SizeLimit)
			}
		}
		var gml string
		for _, e := range rc.Env {
			if e.Name == "GOMEMLIMIT" {
				gml = e.Value
				if e.ValueFrom != nil {
					t.Error("GOMEMLIMIT comes from limits.memory: 100% of the limit, while SQLite's memory and the in-memory /tmp count against the same cgroup")
				}
			}
		}
		const sqliteAndRuntime = 64 << 20 // page caches of the pools, C-side allocations, stacks
		g := quantity(gml)
		if limit == 0 || g == 0 || g+memTmp+sqliteAndRuntime > limit || g < limit/2 {
			t.Errorf("GOMEMLIMIT %q with limit %s and %d MiB of memory-backed tmp: want at least half the limit and at most limit - tmp - %d MiB",
				gml, rc.Resources.Limits["memory"], memTmp>>20, sqliteAndRuntime>>20)
		}
	})

	t.Run("ephemeral storage requested for the store", func(t *testing.T) {
		v := mountedAt["/data"]
		if v.EmptyDir == nil {
			t.Fatal("/data is not an emptyDir") // a PVC would be sized by its claim
		}
		want := quantity(v.EmptyDir.SizeLimit)
		if got := quantity(rc.Resources.Requests["ephemeral-storage"]); want == 0 || got < want {
			t.Errorf("ephemeral-storage request %q below the /data emptyDir sizeLimit %q: the scheduler may place the pod on a node without room for its store",
				rc.Resources.Requests["ephemeral-storage"], v.EmptyDir.SizeLimit)
		}
		if lim := quantity(rc.Resources.Limits["ephemeral-storage"]); lim != 0 && lim < want {
			t.Errorf("ephemeral-storage limit %q below the /data sizeLimit %q", rc.Resources.Limits["ephemeral-storage"], v.EmptyDir.SizeLimit)
		}
	})

	t.Run("the store fits its emptyDir at the stated rate", func(t *testing.T) {
		// docs/sizing.md: a pod's store holds about rate x retention x
		// bytes per intent (4,160 measured by store.TestSizing, and 10%
		// of free pages), plus the block cache and the WAL. The manifest
		// states the rate it is sized for (sizedRate) and sets the
		// retention; the default retention (30 d) would need 10x the
		// volume at this rate.
		const sizedRate = 1.0 // intents/s, the manifest's comment on RECONCILED_RETENTION
		const bytesPerIntent = 4160 * 11 / 10
		const cacheAndWAL = 1 << 30
		var retention time.Duration
		for _, e := range rc.Env {
			if e.Name == "RECONCILED_RETENTION" {
				d, err := time.ParseDuration(e.Value)
				if err != nil {
					t.Fatalf("RECONCILED_RETENTION %q: %v", e.Value, err)
				}
				retention = d
			}
		}
		if retention == 0 {
			t.Fatal("RECONCILED_RETENTION is not set: the default (30 d) fits no sizeLimit the manifest states")
		}
		if retention < 25*time.Hour {
			t.Errorf("RECONCILED_RETENTION %v is below the default re-publish horizon (25h): reconciled refuses to start", retention)
		}
		need := int64(sizedRate*retention.Seconds()*bytesPerIntent) + cacheAndWAL
		v := mountedAt["/data"]
		if v.EmptyDir == nil {
			t.Fatal("/data is not an emptyDir")
		}
		if got := quantity(v.EmptyDir.SizeLimit); got < need {
			t.Errorf("/data sizeLimit %q (%d MiB) below the %d MiB a store needs at %.1f intents/s with retention %v",
				v.EmptyDir.SizeLimit, got>>20, need>>20, sizedRate, retention)
		}
	})

	t.Run("image pinnable by digest", func(t *testing.T) {
		// name:tag in the manifest, and a kustomize images entry of that
		// name, whose digest field then replaces the tag in the rendered
		// Deployment (see the README).
		ref := regexp.MustCompile(`^([a-z0-9.-]+(?::[0-9]+)?/[a-z0-9._/-]+)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(sha256:[0-9a-f]{64}))?$`)
		sm := ref.FindStringSubmatch(rc.Image)
		if sm == nil || (sm[2] == "" && sm[3] == "") || sm[2] == "latest" {
			t.Fatalf("image %q: want a fully qualified name with a version tag or a digest", rc.Image)
		}
		k := findKind(t, m, "Kustomization")
		found := false
		for _, im := range k.Images {
			if im.Name != sm[1] {
				continue
			}
			found = true
			if im.Digest != "" && !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(im.Digest) {
				t.Errorf("kustomization image %s: digest %q is not sha256:<64 hex>", im.Name, im.Digest)
			}
			if im.NewTag != "" && im.NewTag != sm[2] {
				t.Errorf("kustomization image %s: newTag %q differs from the manifest's tag %q", im.Name, im.NewTag, sm[2])
			}
		}
		if !found {
			t.Errorf("kustomization.yaml has no images entry named %q: there is nothing to set a digest on", sm[1])
		}
		readme, err := os.ReadFile(filepath.Join(manifestDir, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(readme, []byte("digest: sha256:")) {
			t.Error("deploy/kubernetes/README.md does not show how to pin the image by digest")
		}
	})

	t.Run("startup probe timeout", func(t *testing.T) {
		p := rc.StartupProbe
		if p == nil {
			t.Fatal("no startup probe")
		}
		// The default 1 s fails on a loaded node while the store is
		// checked and NATS connected.
		if p.TimeoutSeconds < 3 {
			t.Errorf("startup probe timeoutSeconds %d: want at least 3", p.TimeoutSeconds)
		}
		if p.PeriodSeconds*p.FailureThreshold < 150 {
			t.Errorf("startup probe allows %ds: want at least 150s", p.PeriodSeconds*p.FailureThreshold)
		}
	})
}

// The image's /data is the runtime user's and 0700, as the daemon makes a
// data directory it creates itself: a volume Docker fills from the image
// inherits it.
func TestDockerfileDataMode(t *testing.T) {
	d := readDockerfile(t)
	var dataCopy string
	for _, c := range d.copies {
		if f := strings.Fields(c); len(f) > 0 && f[len(f)-1] == "/data" {
			dataCopy = c
		}
	}
	if dataCopy == "" {
		t.Fatal("no COPY to /data")
	}
	if !strings.Contains(dataCopy, "--chown=65532:65532") {
		t.Errorf("COPY %s: want --chown=65532:65532", dataCopy)
	}
	if !strings.Contains(dataCopy, "--chmod=0700") && !regexp.MustCompile(`mkdir (-p )?-m ?0?700 (-p )?/out/data`).MatchString(d.run) {
		t.Errorf("/data is not made 0700 (COPY %s; RUN %q)", dataCopy, d.run)
	}
}
