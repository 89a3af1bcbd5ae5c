package bootcfg

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/pxeperf/pxeperf/internal/testkit/golden"
)

var sampleHosts = map[string]Data{
	"fdt": {
		MAC: "52:54:00:12:34:56", IP: "192.168.50.10", Hostname: "board1", Arch: "arm64",
		Server: "192.168.50.1", ServerURL: "http://192.168.50.1",
		Kernel: "boot/vmlinuz", Initrd: "boot/initrd.img", FDT: "boot/dtbs/board1.dtb",
		Cmdline: `console=ttyS0,115200 root=/dev/nfs nfsroot=192.168.50.1:/srv/nfs,vers=3 ip=dhcp dyndbg="file x.c +p"`,
	},
	"fdtdir": {
		MAC: "52:54:00:12:34:57", IP: "192.168.50.11", Hostname: "board2",
		Server: "192.168.50.1", ServerURL: "http://192.168.50.1",
		Kernel: "boot/zImage", Initrd: "boot/initrd.img", FDTDir: "boot/dtbs/",
		Cmdline: "console=ttyS0 quiet\n",
	},
	"kernel-only": {
		MAC: "52:54:00:12:34:58", IP: "192.168.50.12",
		Kernel: "boot/bzImage",
	},
	"nothing": {MAC: "52:54:00:12:34:59", IP: "192.168.50.13"},
	"local":   {MAC: "52:54:00:12:34:5a", IP: "192.168.50.14", Hostname: "board5", DefaultBoot: "local"},
	"local-target": {MAC: "52:54:00:12:34:5b", IP: "192.168.50.15", Hostname: "board6",
		DefaultBoot: "local", LocalBoot: "mmc0"},
	"shell": {MAC: "52:54:00:12:34:5c", IP: "192.168.50.16", DefaultBoot: "shell"},
	// A kernel wins over default_boot.
	"kernel-over-local": {MAC: "52:54:00:12:34:5d", Kernel: "boot/Image", DefaultBoot: "local", LocalBoot: "mmc0"},
}

// The built-ins rendered for each kind of host, against testdata/*.golden
// (go test ./bootcfg/ -run TestRenderBuiltin -update rewrites them).
func TestRenderBuiltin(t *testing.T) {
	for _, l := range []Loader{PXELinux, GRUB, UBoot} {
		tmpl, err := Parse(l, "built-in", 0, Builtin(l))
		if err != nil {
			t.Fatalf("Parse(%s built-in): %v", l, err)
		}
		for name, d := range sampleHosts {
			t.Run(string(l)+"/"+name, func(t *testing.T) {
				b, err := Render(l, tmpl, d, time.Unix(1764000000, 0))
				if err != nil {
					t.Fatal(err)
				}
				if l == UBoot {
					h, script, err := ParseScriptImage(b)
					if err != nil {
						t.Fatal(err)
					}
					if !strings.HasPrefix(h.Name, "pxeperf ") {
						t.Errorf("image name %q", h.Name)
					}
					b = script
				}
				first, _, _ := strings.Cut(string(b), "\n")
				if !strings.Contains(first, d.MAC) {
					t.Errorf("first line %q does not name the host", first)
				}
				if l == UBoot && !strings.HasPrefix(first, "echo ") {
					t.Errorf("script does not start with echo: %q", first)
				}
				golden.Check(t, filepath.Join("testdata", string(l)+"-"+name+".golden"), b)
			})
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		loader    Loader
		src, file string
		first     int
		text      string
		want      string // prefix of the message
		line      int
	}{
		"unknown function in config": {
			UBoot, "hosts[board1].templates.uboot", "pxeperf.yaml", 12, "echo a\necho b\n{{foo .MAC}}\n",
			`hosts[board1].templates.uboot (pxeperf.yaml line 14): template line 3: function "foo" not defined; fix the template: known fields are .MAC .IP`, 14,
		},
		"unknown field, own file": {
			PXELinux, "@boot/pxelinux.tmpl", "", 0, "default x\n\nkernel {{.Kernal}}\n",
			`@boot/pxelinux.tmpl: template line 3: at <.Kernal>: can't evaluate field Kernal in type bootcfg.Data; fix the template`, 3,
		},
		"unknown field in else branch": {
			GRUB, "grub.template", "", 5, "{{if .Kernel}}x{{else}}\n{{.Nope}}{{end}}",
			`grub.template (line 6): template line 2: at <.Nope>: can't evaluate field Nope`, 6,
		},
		"unclosed action": {
			UBoot, "hosts[b].templates.uboot", "lab.yaml", 3, "echo {{.MAC\n",
			`hosts[b].templates.uboot (lab.yaml line 4): template line 2: unclosed action started at template line 1;`, 4,
		},
		"unknown loader": {
			Loader("ipxe"), "x", "", 0, "", `x: unknown loader "ipxe"`, 0,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIn(tt.loader, tt.src, tt.file, tt.first, tt.text)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n %s\nwant prefix\n %s", err, tt.want)
			}
			var te *TemplateError
			if errors.As(err, &te) && te.AbsLine != tt.line {
				t.Errorf("AbsLine = %d, want %d", te.AbsLine, tt.line)
			}
		})
	}
}

// Errors that depend on the host come from Render, with the same location.
func TestRenderErrors(t *testing.T) {
	tmpl, err := ParseIn(UBoot, "hosts[board1].templates.uboot", "pxeperf.yaml", 20, "echo hi\nsetenv rack {{.Labels.rack}}\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Render(UBoot, tmpl, Data{}, time.Time{})
	want := `hosts[board1].templates.uboot (pxeperf.yaml line 21): template line 2: at <.Labels.rack>: map has no entry for key "rack"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Render error\n %v\nwant prefix\n %s", err, want)
	}
	b, err := Render(UBoot, tmpl, Data{Labels: map[string]string{"rack": "r1"}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, s, _ := ParseScriptImage(b); string(s) != "echo hi\nsetenv rack r1\n" {
		t.Errorf("script %q", s)
	}
	// A newline in a value cannot be quoted onto one script line.
	if _, err := Render(UBoot, mustParse(t, UBoot, Builtin(UBoot)), Data{Kernel: "a\nb"}, time.Time{}); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("kernel with a newline: %v", err)
	}
}

func mustParse(t *testing.T, l Loader, text string) *template.Template {
	t.Helper()
	tm, err := Parse(l, "test", 0, text)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestTemplateFuncs(t *testing.T) {
	d := Data{ServerURL: "http://10.0.0.1:8080", Kernel: "/boot/vmlinuz", Initrd: "https://x/initrd"}
	tm := mustParse(t, PXELinux, `{{url .Kernel}} {{url .Initrd}} {{.URL "a"}} {{quote "a b"}} {{trimslash "d//"}} [{{oneline " a\nb "}}]`)
	b, err := Render(PXELinux, tm, d, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := `http://10.0.0.1:8080/boot/vmlinuz https://x/initrd http://10.0.0.1:8080/a 'a b' d [a b]`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestUBootQuote(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":     {"boot/vmlinuz", "boot/vmlinuz"},
		"empty":     {"", "''"},
		"spaces":    {"console=ttyS0 quiet", "'console=ttyS0 quiet'"},
		"dollar":    {"x=$y ${z}", "'x=$y ${z}'"},
		"dquotes":   {`foo="a b"`, `'foo="a b"'`},
		"squote":    {"it's", `'it'\''s'`},
		"backslash": {`a\b`, `'a\\b'`},
		"separator": {"a; reset # b", "'a; reset # b'"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := UBootQuote(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("UBootQuote(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
	if _, err := UBootQuote("a\nreset"); err == nil {
		t.Error("UBootQuote accepted a newline")
	}
}

func TestGRUBArgs(t *testing.T) {
	tests := map[string]struct {
		in, want string
		err      bool
	}{
		"plain":        {"console=ttyS0 root=/dev/nfs", "console=ttyS0 root=/dev/nfs", false},
		"empty":        {"", "", false},
		"spaces":       {"  a \n b  ", "a b", false},
		"quoted value": {`dyndbg="file x.c +p" quiet`, `'dyndbg=file x.c +p' quiet`, false},
		"quoted whole": {`"a b"`, `'a b'`, false},
		"dollar":       {`x=$y`, `'x=$y'`, false},
		"inner quote":  {`a"b"c`, "", true},
		"backslash":    {`a\b`, "", true},
		"single quote": {`it's`, "", true},
		"unbalanced":   {`a="b c`, "", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := GRUBArgs(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("GRUBArgs(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}
