package container

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pxeperf/pxeperf/internal/testkit/nstest"
)

// dockerfile reads the repository's Dockerfile with its continuation lines
// joined.
func dockerfile(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if cur == "" && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	return lines
}

var capLabel = regexp.MustCompile(`io\.github\.pxeperf\.capabilities="([^"]*)"`)

// imageCaps is the Dockerfile's io.github.pxeperf.capabilities label: the
// capabilities serve needs, which every run line adds.
func imageCaps(t *testing.T, root string) []string {
	t.Helper()
	for _, l := range dockerfile(t, root) {
		if m := capLabel.FindStringSubmatch(l); m != nil {
			return strings.Fields(m[1])
		}
	}
	t.Fatal("Dockerfile has no io.github.pxeperf.capabilities label")
	return nil
}

// imageVolumes is the Dockerfile's VOLUME list.
func imageVolumes(t *testing.T, root string) []string {
	t.Helper()
	for _, l := range dockerfile(t, root) {
		if rest, ok := strings.CutPrefix(l, "VOLUME "); ok {
			var v []string
			if err := yaml.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("VOLUME %s: %v", rest, err)
			}
			return v
		}
	}
	t.Fatal("Dockerfile has no VOLUME")
	return nil
}

var flagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

var (
	helpOnce sync.Once
	helpOut  []byte
	helpErr  error
)

// serveFlags are the flags of the built binary's `serve --help` (asked
// once per test process).
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := nstest.Binary(t)
	helpOnce.Do(func() {
		helpOut, helpErr = exec.Command(bin, "serve", "--help").CombinedOutput()
		if helpErr != nil {
			helpErr = fmt.Errorf("pxeperf serve --help: %v\n%s", helpErr, helpOut)
		}
	})
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	out := helpOut
	flags := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["iface"] || !flags["root"] {
		t.Fatalf("serve --help lists no --iface/--root:\n%s", out)
	}
	return flags
}

// checkServeArgs fails t unless args is a serve command line whose flags
// all exist, with --root and --data on the image's volumes.
func checkServeArgs(t *testing.T, what string, args []string, flags map[string]bool, volumes []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Errorf("%s: command %q does not run serve", what, args)
		return
	}
	val := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, v, hasV := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		if !strings.HasPrefix(args[i], "--") || !flags[name] {
			t.Errorf("%s: %q is not a flag of pxeperf serve", what, args[i])
			continue
		}
		if !hasV && i+1 < len(args) {
			i++
			v = args[i]
		}
		val[name] = v
	}
	for _, f := range []string{"root", "data"} {
		if !slices.Contains(volumes, val[f]) {
			t.Errorf("%s: --%s %q is not one of the image's volumes %v", what, f, val[f], volumes)
		}
	}
	if val["iface"] == "" {
		t.Errorf("%s: no --iface (serve would pick an interface itself)", what)
	}
}

func checkCaps(t *testing.T, what string, drop, add, want []string) {
	t.Helper()
	if !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("%s: drops %q, want ALL", what, drop)
	}
	if !slices.Equal(add, want) {
		t.Errorf("%s: adds capabilities %q, want the image's %q", what, add, want)
	}
}

// mountTargets are the container paths of "host:container[:opts]" volumes.
func mountTargets(vols []string) []string {
	var out []string
	for _, v := range vols {
		f := strings.Split(v, ":")
		if len(f) >= 2 {
			out = append(out, f[1])
		}
	}
	return out
}

// TestContribCompose parses contrib/compose.yaml and checks it against the
// image: the host's network, the Dockerfile's capabilities (and no other),
// its volumes mounted, a serve command line of flags the binary has.
func TestContribCompose(t *testing.T) {
	root, _ := filepath.Abs("..")
	b, err := os.ReadFile(filepath.Join(root, "contrib", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string
			NetworkMode string   `yaml:"network_mode"`
			CapAdd      []string `yaml:"cap_add"`
			CapDrop     []string `yaml:"cap_drop"`
			Volumes     []string
			Command     []string
		}
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	s, ok := c.Services["pxeperf"]
	if !ok {
		t.Fatalf("compose.yaml has no pxeperf service: %v", c.Services)
	}
	vols := imageVolumes(t, root)
	if s.NetworkMode != "host" {
		t.Errorf("network_mode %q, want host (DHCP is broadcast)", s.NetworkMode)
	}
	checkCaps(t, "compose.yaml", s.CapDrop, s.CapAdd, imageCaps(t, root))
	if got := mountTargets(s.Volumes); !slices.Equal(got, vols) {
		t.Errorf("compose.yaml mounts %q, want the image's volumes %q", got, vols)
	}
	checkServeArgs(t, "compose.yaml", s.Command, serveFlags(t), vols)
}

// TestContribDaemonSet parses contrib/kubernetes/daemonset.yaml and checks
// it against the image like TestContribCompose: hostNetwork, the
// capabilities, the volumes, the serve arguments, the health probe.
func TestContribDaemonSet(t *testing.T) {
	root, _ := filepath.Abs("..")
	b, err := os.ReadFile(filepath.Join(root, "contrib", "kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Name            string
		Image           string
		Command         []string
		Args            []string
		SecurityContext struct {
			Capabilities struct{ Add, Drop []string }
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		LivenessProbe struct {
			Exec struct{ Command []string }
		} `yaml:"livenessProbe"`
	}
	var d struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			}
			Template struct {
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					HostNetwork bool `yaml:"hostNetwork"`
					Containers  []container
					Volumes     []struct {
						Name     string
						HostPath struct{ Path string } `yaml:"hostPath"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("daemonset.yaml: %v", err)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "DaemonSet" {
		t.Errorf("apiVersion/kind %s/%s, want apps/v1 DaemonSet", d.APIVersion, d.Kind)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, d.Spec.Template.Metadata.Labels)
		}
	}
	ps := d.Spec.Template.Spec
	if !ps.HostNetwork {
		t.Error("hostNetwork is not true (DHCP is broadcast)")
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ps.Containers))
	}
	c := ps.Containers[0]
	vols := imageVolumes(t, root)
	checkCaps(t, "daemonset.yaml", c.SecurityContext.Capabilities.Drop, c.SecurityContext.Capabilities.Add, imageCaps(t, root))
	var mounts []string
	declared := map[string]bool{}
	for _, v := range ps.Volumes {
		declared[v.Name] = v.HostPath.Path != ""
	}
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
		if !declared[m.Name] {
			t.Errorf("volumeMount %s names no hostPath volume", m.Name)
		}
	}
	if !slices.Equal(mounts, vols) {
		t.Errorf("daemonset.yaml mounts %q, want the image's volumes %q", mounts, vols)
	}
	if len(c.Command) != 0 {
		t.Errorf("command %q overrides the image's entrypoint", c.Command)
	}
	checkServeArgs(t, "daemonset.yaml", c.Args, serveFlags(t), vols)
	var hc []string
	for _, l := range dockerfile(t, root) {
		if rest, ok := strings.CutPrefix(l, "HEALTHCHECK "); ok {
			_, js, _ := strings.Cut(rest, "CMD ")
			if err := yaml.Unmarshal([]byte(js), &hc); err != nil {
				t.Fatalf("HEALTHCHECK %s: %v", rest, err)
			}
		}
	}
	if !slices.Equal(c.LivenessProbe.Exec.Command, hc) {
		t.Errorf("livenessProbe %q, want the image's HEALTHCHECK %q", c.LivenessProbe.Exec.Command, hc)
	}
}
